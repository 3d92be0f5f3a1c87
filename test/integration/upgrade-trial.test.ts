// The first start after an upgrade, in the real program (a child process) run from an install
// directory with a pending marker: reaching serving completes the upgrade; failing to start,
// missing the deadline, or finding an earlier attempt unconfirmed switches `current` back to the
// release upgraded from and exits for the restart (SLUICE_RESTART=exit: status 75, no re-exec here).
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { expect, test } from "vitest";
import { VERSION } from "../../src/version.js";
import { OLD, startTrial as start, trialInstall as fixture } from "../helpers/upgrade.js";
import { HeldFile, until } from "../model/harness.js";

const good = (): string => `api:\n  http: 127.0.0.1:0\nplugins:\n  - { tag: main, type: sequence, args: [ { exec: reject 3 } ] }\n  - { tag: udp, type: udp_server, args: { entry: main, listen: "127.0.0.1:0" } }\n`;

test("a trial that reaches serving completes the upgrade: marker gone, status completed", async () => {
  const f = fixture({}, good);
  const run = start(f);
  try {
    await run.waitForLog((l) => l.msg === "upgrade complete: the new release is serving", 15_000);
    const api = run.logs.find((l) => l.msg === "management API listening");
    const status = (await (await fetch(`http://127.0.0.1:${api?.port as number}/api/upgrade/status`)).json()) as Record<string, unknown>;
    expect(status).toMatchObject({ ok: true, state: "completed", error: null, installed_version: VERSION, restart_required: false, started_at_ms: 1_700_000_000_000 });
    expect(f.file("pending.json")).toBeNull();
    expect(f.file("result.json")).toMatchObject({ state: "completed", installed_version: VERSION, from_version: OLD });
    expect(f.link("current")).toBe(`releases/${VERSION}`);
  } finally {
    run.child.kill("SIGTERM");
    await run.exited;
  }
});

test("a trial that fails to start switches back to the old release and exits for the restart", async () => {
  const f = fixture({}, (dir) => `api:\n  http: 127.0.0.1:0\nplugins:\n  - { tag: h, type: hosts, args: { files: [${join(dir, "missing.txt")}] } }\n  - { tag: main, type: sequence, args: [ { exec: $h } ] }\n`);
  const run = start(f);
  const { code } = await run.exited;
  expect(code).toBe(75);
  expect(run.stderr()).toMatch(/switched back to the previous release/);
  // As for a missed deadline: why, and the release switched back to.
  expect(run.stderr()).toMatch(new RegExp(`error: release ${VERSION} failed to start: .*missing\\.txt.*; switched back to ${OLD}\n`));
  expect(f.link("current")).toBe(`releases/${OLD}`);
  expect(f.link("previous")).toBe(`releases/${VERSION}`);
  expect(f.file("pending.json")).toBeNull();
  expect(f.file("result.json")).toMatchObject({ state: "failed", installed_version: OLD, error: expect.stringMatching(new RegExp(`release ${VERSION} failed to start: .*missing\\.txt.*; rolled back to ${OLD}`)) as unknown });
});

test("a trial that misses the deadline is rolled back while it is still starting", async () => {
  // Its one rule file is a FIFO the test writes only once the trial has given up: until then the start
  // cannot get past building its plugins. (The write lets the read end, so the process can exit: Node
  // waits for its file-system threads at exit.)
  let held: HeldFile | null = null;
  const f = fixture({ start_deadline_ms: 300 }, (dir) => {
    held = new HeldFile(join(dir, "big.fifo"));
    return `plugins:\n  - { tag: big, type: domain_set, args: { files: [${held.path}] } }\n  - { tag: main, type: sequence, args: [ { matches: "qname $big", exec: reject 3 } ] }\n`;
  });
  const run = start(f);
  await until("the trial to give up", () => run.stderr().includes("did not reach serving"));
  (held as HeldFile | null)?.openAll();
  const { code } = await run.exited;
  await (held as HeldFile | null)?.close();
  expect(code).toBe(75);
  expect(run.stderr()).toMatch(new RegExp(`release ${VERSION} did not reach serving within 0.3s \\(upgrade.start_deadline\\); switched back to ${OLD}`));
  expect(run.logs.some((l) => l.msg === "sluice started")).toBe(false);
  expect(f.link("current")).toBe(`releases/${OLD}`);
  expect(f.file("result.json")).toMatchObject({ state: "failed", installed_version: OLD });
});

test("a start that finds an earlier attempt unconfirmed (it crashed) rolls back before starting anything", async () => {
  const f = fixture({ attempts: 1 }, good);
  const run = start(f);
  const { code } = await run.exited;
  expect(code).toBe(75);
  expect(run.logs.some((l) => l.msg === "management API listening")).toBe(false);
  expect(run.stderr()).toMatch(/did not reach serving after the upgrade/);
  expect(f.link("current")).toBe(`releases/${OLD}`);
  expect(f.file("pending.json")).toBeNull();
});

test("a stale marker (for another version) is dropped; a result about another version is not shown", async () => {
  const f = fixture({ to_version: "7.7.7" }, good);
  writeFileSync(join(f.install, "upgrade", "result.json"), JSON.stringify({ state: "completed", started_at_ms: 1, completed_at_ms: 2, error: null, installed_version: "7.7.7", from_version: VERSION }));
  const run = start(f);
  try {
    const api = await run.waitForLog((l) => l.msg === "management API listening");
    await run.waitForLog((l) => l.msg === "sluice started");
    const status = (await (await fetch(`http://127.0.0.1:${api.port as number}/api/upgrade/status`)).json()) as Record<string, unknown>;
    expect(status).toMatchObject({ state: "idle", installed_version: VERSION, error: null });
    expect(f.file("pending.json")).toBeNull();
    expect(f.link("current")).toBe(`releases/${VERSION}`);
  } finally {
    run.child.kill("SIGTERM");
    await run.exited;
  }
});
