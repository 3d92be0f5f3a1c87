// The "Plugin routes" section of docs/api.md, run as printed: its configuration and rule file are
// written as shown (only the listen addresses become port 0), the real program is started on them,
// and every shell block runs in order (only the addresses become the test's). The block after each
// shell block is what it printed: JSON lines must match (same fields, same values except the few
// that depend on time), other lines must be equal.
import { execFile } from "node:child_process";
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, expect, test } from "vitest";
import { startCli, type RunningCli } from "../helpers/cli.js";
import { tempDir } from "../helpers/sluice.js";

const run = promisify(execFile);
const root = join(import.meta.dirname, "..", "..");
const dir = tempDir();

interface Block {
  lang: string;
  /** A file name after the language (```yaml sluice.yaml), else "". */
  name: string;
  body: string;
}

function sectionBlocks(): Block[] {
  const doc = readFileSync(join(root, "docs", "api.md"), "utf8");
  const start = doc.indexOf("\n## Plugin routes\n");
  const section = doc.slice(start, doc.indexOf("\n## ", start + 1));
  return [...section.matchAll(/^```(\w+)[ \t]*([^\n]*)\n([\s\S]*?)^```$/gm)].map((m) => ({ lang: m[1], name: m[2].trim(), body: m[3] }));
}

const blocks = sectionBlocks();
let cli: RunningCli;
let api = "";
let dnsPort = 0;

beforeAll(async () => {
  const files = blocks.filter((b) => b.name !== "");
  expect(files.map((b) => b.name)).toEqual(["sluice.yaml", "blocklist.txt"]);
  for (const f of files) {
    const body = f.name === "sluice.yaml" ? f.body.replace("http: 127.0.0.1:9080", "http: 127.0.0.1:0").replace("listen: 127.0.0.1:5353", 'listen: "127.0.0.1:0"') : f.body;
    writeFileSync(join(dir, f.name), body);
  }
  cli = startCli(["-c", "sluice.yaml"], { cwd: dir });
  api = `http://127.0.0.1:${String((await cli.waitForLog((l) => l.msg === "management API listening")).port)}`;
  dnsPort = Number((await cli.waitForLog((l) => l.msg === "udp server listening")).port);
  await cli.waitForLog((l) => l.msg === "sluice started");
});
afterAll(async () => {
  cli.child.kill("SIGTERM");
  await cli.exited;
  rmSync(dir, { recursive: true, force: true });
});

async function sh(script: string): Promise<string> {
  const command = script.replaceAll("http://127.0.0.1:9080", api).replaceAll("-p 5353", `-p ${dnsPort}`);
  const { stdout } = await run("bash", ["-e", "-o", "pipefail", "-c", command], { cwd: dir, timeout: 10_000 });
  return stdout;
}

/** Fields whose values depend on when the example ran: only their type must match. */
const VOLATILE = new Set(["id", "cached_at_ms", "expires_at_ms", "last_access_ms", "remaining_ttl", "until_ms", "duration_ms", "added_at_ms", "ttl_left_ms"]);

/** `shown` with every volatile field replaced by a matcher of its type. */
function expected(shown: unknown, key = ""): unknown {
  if (VOLATILE.has(key) && shown !== null) return (typeof shown === "number" ? expect.any(Number) : expect.any(String)) as unknown;
  if (Array.isArray(shown)) return shown.map((v) => expected(v));
  if (shown !== null && typeof shown === "object") return Object.fromEntries(Object.entries(shown).map(([k, v]) => [k, expected(v, k)]));
  return shown;
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

/** Printed output against the documented one: one JSON document, or line by line. */
function expectOutput(printed: string, shown: Block, command: string): void {
  const whole = parseJson(shown.body);
  if (shown.lang === "json" || whole !== undefined) {
    expect(parseJson(printed), command).toEqual(expected(whole));
    return;
  }
  const want = shown.body.trimEnd().split("\n");
  const got = printed.trimEnd().split("\n");
  expect(got.length, `${command}\nprinted:\n${printed}`).toBe(want.length);
  want.forEach((line, i) => {
    const json = parseJson(line);
    if (json !== undefined) expect(parseJson(got[i]), command).toEqual(expected(json));
    else expect(got[i], command).toBe(line);
  });
}

test("the section shows a configuration, a rule file, and an answer for every command", () => {
  const shells = blocks.filter((b) => b.lang === "sh");
  expect(shells.length).toBeGreaterThanOrEqual(15);
  blocks.forEach((b, i) => {
    if (b.lang === "sh") expect(["json", "text"], b.body).toContain(blocks[i + 1]?.lang);
  });
  // Every route of the section is exercised.
  const all = shells.map((b) => b.body).join("\n");
  for (const route of [/\/api\/plugins$/m, /\/cache\/entries\?/, /-X DELETE .*\/cache\/entries\//, /\/cache\/flush/, /\/cache\/dump/, /\/cache\/load_dump/, /\/rdns\?ip=/, /\/ads\/status/, /\/ads\/mode/, /\/blocklist\/reload/, /-X POST .*\/blocked\/rules$/m, /\/blocked\/rules\?/, /-X DELETE .*\/blocked\/rules$/m, /\/blocked\/rules\/clear/]) {
    expect(all).toMatch(route);
  }
});

test("every command of the Plugin routes section prints what the section shows", async () => {
  for (let i = 0; i < blocks.length; i++) {
    const b = blocks[i];
    if (b.lang !== "sh") continue;
    const printed = await sh(b.body);
    expectOutput(printed, blocks[i + 1], b.body);
  }
  // The dump the section downloaded is a file named after the plugin.
  expect(readFileSync(join(dir, "cache.dump")).length).toBeGreaterThan(0);
});
