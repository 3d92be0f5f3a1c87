// The README's management examples, run as printed (only the address is changed to the test's
// listener) against the real program started with the shipped default configuration; and what that
// configuration answers itself (_dns.resolver.arpa).
import { execFile } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, expect, test } from "vitest";
import { QTYPE } from "../../src/dns/constants.js";
import { readSoa } from "../../src/dns/rdata.js";
import { startCli, type RunningCli } from "../helpers/cli.js";
import { query, rcodeOf } from "../helpers/dns.js";
import { tempDir } from "../helpers/sluice.js";

const run = promisify(execFile);
const root = join(import.meta.dirname, "..", "..");
const dir = tempDir();
let cli: RunningCli;
let base = "";

/** The shell block under "## Managing a running Sluice", split into its commands (comments dropped). */
function readmeCommands(): string[] {
  const readme = readFileSync(join(root, "README.md"), "utf8");
  const section = readme.slice(readme.indexOf("## Managing a running Sluice"));
  const block = section.slice(section.indexOf("```sh") + 5, section.indexOf("```", section.indexOf("```sh") + 5));
  return block
    .replace(/\\\n\s*/g, " ")
    .replace(/\|\n\s*/g, "| ")
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l.length > 0 && !l.startsWith("#"));
}

beforeAll(async () => {
  // The shipped configuration, with ephemeral ports instead of 5353/9080.
  const config = readFileSync(join(root, "config", "sluice.yaml"), "utf8").replace("http: 127.0.0.1:9080", "http: 127.0.0.1:0").replace(/listen: 127\.0\.0\.1:5353/g, 'listen: "127.0.0.1:0"');
  writeFileSync(join(dir, "sluice.yaml"), config);
  cli = startCli(["-c", "sluice.yaml", "-d", dir]);
  base = `http://127.0.0.1:${String((await cli.waitForLog((l) => l.msg === "management API listening")).port)}`;
  await cli.waitForLog((l) => l.msg === "sluice started");
});
afterAll(async () => {
  cli.child.kill("SIGTERM");
  await cli.exited;
});

async function sh(command: string): Promise<string> {
  const { stdout } = await run("bash", ["-o", "pipefail", "-c", command.replaceAll("http://127.0.0.1:9080", base)], { cwd: dir, timeout: 10_000 });
  return stdout;
}

test("the README's curl examples work as printed", async () => {
  const commands = readmeCommands();
  expect(commands).toHaveLength(8);
  const [health, getConfig, extract, edit, save, reload, status, stream] = commands;

  expect(JSON.parse(await sh(health))).toMatchObject({ status: "ok", checks: { server_startup: "ok" } });

  await sh(getConfig);
  await sh(extract);
  await sh(edit);
  expect(readFileSync(join(dir, "edited.yaml"), "utf8")).toContain("level: debug");
  const saved = JSON.parse(await sh(save)) as { ok: boolean; version: string };
  expect(saved.ok).toBe(true);
  expect(readFileSync(join(dir, "sluice.yaml"), "utf8")).toContain("level: debug");
  // The same save again is refused: its base_version is no longer the file's version.
  expect(JSON.parse(await sh(save))).toMatchObject({ ok: false, code: "config_conflict" });

  expect(JSON.parse(await sh(reload))).toEqual({ ok: true, action: "reload", status: "accepted" });
  let record: { status: string; running_version: string } = { status: "", running_version: "" };
  for (let i = 0; i < 200 && record.status !== "ok"; i++) {
    record = JSON.parse(await sh(status)) as typeof record;
    if (record.status !== "ok") await new Promise((r) => setTimeout(r, 25));
  }
  expect(record).toMatchObject({ status: "ok", running_version: saved.version });

  // The stream never ends on its own; give it a moment and look at what arrived.
  const out = await run("bash", ["-c", `timeout 2 ${stream.replaceAll("http://127.0.0.1:9080", base)}; true`], { cwd: dir, timeout: 10_000 });
  expect(out.stdout).toContain("event: log");
  expect(out.stdout).toMatch(/"message":"reload succeeded"/);
});

test("the shipped configuration answers _dns.resolver.arpa itself: NODATA with Sluice's SOA, never forwarded", async () => {
  const port = Number(cli.logs.find((l) => l.msg === "udp server listening")?.port);
  for (const type of ["SVCB", "A"]) {
    const m = await query(port, "_dns.resolver.arpa", type);
    expect(rcodeOf(m)).toBe(0);
    expect(m.answers).toEqual([]);
    expect(m.authorities.map((r) => [r.name, r.type, r.ttl])).toEqual([["_dns.resolver.arpa", QTYPE.SOA, 300]]);
    expect(readSoa(m.authorities[0].data).mname).toBe("ns.sluice.invalid");
  }
});
