// The worked example of docs/plugins.md ("Worked example: a nightly block list"), run as printed
// against a local file server: its YAML and its curl commands, with only the addresses changed to
// the test's (API and DNS listeners on port 0, the list's server, and a local upstream instead of
// 9.9.9.9). The list is fetched before the providers start, the manual run downloads the new list
// and reloads only `ads` (answers change, no configuration reload), and a failed download keeps
// the old list.
import { execFile } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, expect, test } from "vitest";
import { startCli, type RunningCli } from "../helpers/cli.js";
import { answerIps, query, rcodeOf } from "../helpers/dns.js";
import { startFileServer, type FileServer } from "../helpers/file-server.js";
import { answerWith, startResponder, type Responder } from "../helpers/responder.js";
import { tempDir } from "../helpers/sluice.js";

const run = promisify(execFile);
const root = join(import.meta.dirname, "..", "..");

/** The fenced blocks of the worked example, in order. */
function exampleBlocks(): { yaml: string; sh: string[] } {
  const doc = readFileSync(join(root, "docs", "plugins.md"), "utf8");
  const start = doc.indexOf("#### Worked example: a nightly block list");
  const section = doc.slice(start, doc.indexOf("\n### ", start));
  const block = (lang: string): string => {
    const at = section.indexOf("```" + lang + "\n");
    return section.slice(at + lang.length + 4, section.indexOf("```", at + lang.length + 4));
  };
  const sh = block("sh")
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l.length > 0 && !l.startsWith("#"));
  return { yaml: block("yaml"), sh };
}

let files: FileServer;
let upstream: Responder;
let cli: RunningCli;
let base = "";
let dnsPort = 0;
const dir = tempDir();
const { yaml, sh } = exampleBlocks();

beforeAll(async () => {
  files = await startFileServer();
  files.set("ads.txt", "full:ads.example\n");
  upstream = await startResponder((q) => answerWith(q, ["192.0.2.1"]));
  const config = yaml
    .replace("http: 127.0.0.1:9080", "http: 127.0.0.1:0")
    .replace("listen: 127.0.0.1:5353", 'listen: "127.0.0.1:0"')
    .replace("http://127.0.0.1:8000", `${files.url}/dyn`)
    .replace("forward 9.9.9.9", `forward 127.0.0.1:${upstream.port}`);
  writeFileSync(join(dir, "sluice.yaml"), config);
  cli = startCli(["-c", "sluice.yaml", "-d", dir]);
  base = `http://127.0.0.1:${String((await cli.waitForLog((l) => l.msg === "management API listening")).port)}`;
  dnsPort = Number((await cli.waitForLog((l) => l.msg === "udp server listening")).port);
  await cli.waitForLog((l) => l.msg === "sluice started");
});
afterAll(async () => {
  cli.child.kill("SIGTERM");
  await cli.exited;
  await files.close();
  await upstream.close();
});

async function shell(command: string): Promise<Record<string, unknown>> {
  const { stdout } = await run("bash", ["-o", "pipefail", "-c", command.replaceAll("http://127.0.0.1:9080", base)], { cwd: dir, timeout: 10_000 });
  return JSON.parse(stdout) as Record<string, unknown>;
}

async function waitForRun(status: string, runId: number, expected: string): Promise<Record<string, unknown>> {
  for (let i = 0; i < 300; i++) {
    const jobs = (await shell(status)).jobs as Record<string, { last_manual_run: { run_id: number; status: string } | null }>;
    const last = jobs.ads.last_manual_run;
    if (last?.run_id === runId) {
      expect(last.status).toBe(expected);
      return last;
    }
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`run ${runId} did not finish`);
}

test("the example's commands are the three documented ones", () => {
  expect(sh).toHaveLength(3);
  expect(sh[0]).toContain("/api/plugins/nightly/jobs/ads/run");
});

test("the nightly job downloads the new list and reloads only the provider that reads it", async () => {
  const [runJob, status, downloads] = sh;
  // startup_if_missing fetched the list before `ads` was created.
  expect(files.hits("/dyn/ads.txt")).toBe(1);
  expect(rcodeOf(await query(dnsPort, "ads.example", "A"))).toBe(3);
  const before = await query(dnsPort, "new-ad.example", "A");
  expect(rcodeOf(before)).toBe(0);
  expect(answerIps(before)).toEqual(["192.0.2.1"]);

  files.set("ads.txt", "full:ads.example\nfull:new-ad.example\n");
  expect(await shell(runJob)).toEqual({ ok: true, job: "ads", status: "started", trigger: "manual", run_id: 1 });
  await waitForRun(status, 1, "completed");
  expect(rcodeOf(await query(dnsPort, "new-ad.example", "A"))).toBe(3);
  expect(rcodeOf(await query(dnsPort, "ads.example", "A"))).toBe(3);
  expect(readFileSync(join(dir, "lists", "ads.txt"), "utf8")).toBe("full:ads.example\nfull:new-ad.example\n");
  const items = (await shell(downloads)).items as Record<string, unknown>[];
  expect(items).toHaveLength(1);
  expect(items[0]).toMatchObject({ index: 0, path: join(dir, "lists", "ads.txt"), running: false, last_error: null, size_bytes: 37 });

  // No configuration reload happened: the first generation still serves, and `ads` was reloaded by itself.
  const reload = (await (await fetch(`${base}/api/reload/status`)).json()) as { status: string; last_started_ms: number | null };
  expect(reload).toMatchObject({ status: "idle", last_started_ms: null });
  expect(((await (await fetch(`${base}/api/plugins`)).json()) as { generation: number }).generation).toBe(1);
  expect(cli.logs.some((l) => l.msg === "domain_set reloaded" && l.target === "plugin:ads")).toBe(true);
});

test("a failed download keeps the old list; the run ends completed_with_errors", async () => {
  const [runJob, status, downloads] = sh;
  const old = readFileSync(join(dir, "lists", "ads.txt"));
  files.mode("ads.txt", "fail");
  try {
    expect(await shell(runJob)).toMatchObject({ ok: true, run_id: 2 });
    expect(await waitForRun(status, 2, "completed_with_errors")).toMatchObject({ executor_error_count: 1 });
    expect(readFileSync(join(dir, "lists", "ads.txt"))).toEqual(old);
    expect(rcodeOf(await query(dnsPort, "new-ad.example", "A"))).toBe(3);
    const items = (await shell(downloads)).items as Record<string, unknown>[];
    expect(items[0].last_error).toBe("HTTP 500 Internal Server Error");
  } finally {
    files.mode("ads.txt", "ok");
  }
});
