// The query recorder's curl examples in docs/api.md, run as printed (only the address is changed to the
// test's listener) against the real program with a recorder tagged `recorder` and a matcher `blocked`.
import { execFile } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, expect, test } from "vitest";
import { startCli, type RunningCli } from "../helpers/cli.js";
import { buildQuery, udpExchange } from "../helpers/dns.js";
import { tempDir } from "../helpers/sluice.js";

const run = promisify(execFile);
const root = join(import.meta.dirname, "..", "..");
const dir = tempDir();
let cli: RunningCli;
let base = "";

/** The shell block of docs/api.md's "Query recorder routes" section. */
function examples(): string[] {
  const doc = readFileSync(join(root, "docs", "api.md"), "utf8");
  const section = doc.slice(doc.indexOf("## Query recorder routes"), doc.indexOf("\n## ", doc.indexOf("## Query recorder routes") + 5));
  const start = section.indexOf("```sh") + 5;
  return section
    .slice(start, section.indexOf("```", start))
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l.startsWith("curl"));
}

beforeAll(async () => {
  writeFileSync(
    join(dir, "sluice.yaml"),
    `api:
  http: "127.0.0.1:0"
plugins:
  - { tag: blocked, type: qname, args: ["domain:ads.example"] }
  - { tag: recorder, type: query_recorder, args: { path: recorder.db, flush_interval_ms: 20 } }
  - tag: main
    type: sequence
    args:
      - exec: $recorder
      - { matches: $blocked, exec: reject 3 }
      - exec: reject 0
  - { tag: udp, type: udp_server, args: { entry: main, listen: "127.0.0.1:0" } }
`,
  );
  cli = startCli(["-c", "sluice.yaml", "-d", dir]);
  base = `http://127.0.0.1:${String((await cli.waitForLog((l) => l.msg === "management API listening")).port)}`;
  const udp = Number((await cli.waitForLog((l) => l.msg === "udp server listening")).port);
  await cli.waitForLog((l) => l.msg === "sluice started");
  for (const name of ["www.example.com", "ads.example", "mail.example.org"]) await udpExchange(udp, buildQuery(name, "A"));
  // The examples read what was committed.
  for (let i = 0; i < 100; i++) {
    const r = (await (await fetch(`${base}/api/plugins/recorder/stats/rcode`)).json()) as { sample_size: number };
    if (r.sample_size === 3) break;
    await new Promise((res) => setTimeout(res, 50));
  }
});

afterAll(async () => {
  cli.child.kill("SIGTERM");
  await cli.exited;
});

test("every query recorder example in docs/api.md works as printed", async () => {
  const commands = examples();
  expect(commands.length).toBeGreaterThanOrEqual(13);
  for (const command of commands) {
    const line = command.replaceAll("http://127.0.0.1:9080", base);
    if (command.includes("/stream")) {
      // A stream does not end: read it for a moment, then stop curl.
      const out = await run("bash", ["-c", `timeout 2 ${line}; test $? -eq 124`], { cwd: dir, timeout: 10_000 });
      expect(out.stdout, command).toMatch(/^: heartbeat$/m);
      expect(out.stdout.match(/^event: record$/gm)?.length, command).toBe(3);
      continue;
    }
    const { stdout } = await run("bash", ["-o", "pipefail", "-c", line], { cwd: dir, timeout: 10_000 });
    const body = JSON.parse(stdout) as { ok: boolean; sample_size?: number; rows?: unknown[]; cleared_records?: number };
    expect(body.ok, `${command}: ${stdout.slice(0, 200)}`).toBe(true);
    if (command.includes("matcher_tag=blocked")) expect(body.rows, command).toEqual([{ key: "ads.example.", count: 1, share: 1 }]);
    if (command.includes("-X DELETE")) expect(body.cleared_records, command).toBe(3);
  }
});
