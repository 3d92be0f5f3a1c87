// A replica started with --config-from (the real program as a child process) following an
// in-process primary with basic auth: the primary's configuration replaces the replica's before
// start, a configuration saved on the primary reaches the replica, one that does not validate is
// refused (file untouched, old configuration serving, reload status and log say why), wrong
// credentials and an unreachable primary leave the replica serving, and the credentials never appear.
// The follower is the app actor's child `config-follow`: /api/actors lists it, and its stream shows
// it waiting in `reloading` until the reload of a saved version has ended.
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, expect, test } from "vitest";
import { runCli, startCli, type RunningCli } from "../helpers/cli.js";
import { query, rcodeOf } from "../helpers/dns.js";
import { openSse, type SseFrame } from "../helpers/sse.js";
import { startSluice, tempDir, type RunningSluice } from "../helpers/sluice.js";

/** The replicas' poll interval (the shortest allowed is 200ms): each change on the primary is followed within it. */
const POLL = "250ms";
const AUTH = { Authorization: `Basic ${Buffer.from("admin:s3cret-pw").toString("base64")}` };
const primaryYaml = (rcode: number): string => `
api:
  http:
    listen: "127.0.0.1:0"
    auth: { username: admin, password: s3cret-pw }
plugins:
  - { tag: main, type: sequence, args: [{ exec: reject ${rcode} }] }
  - { tag: udp, type: udp_server, args: { entry: main, listen: "127.0.0.1:0" } }
`;

let primary: RunningSluice;
const replicas: RunningCli[] = [];
const dir = tempDir("sluice-replica-");

beforeAll(async () => {
  primary = await startSluice(primaryYaml(2));
});
afterAll(async () => {
  for (const r of replicas) {
    r.child.kill("SIGTERM");
    await r.exited;
  }
  await primary.stop();
});

async function save(content: string, validate = true): Promise<Response> {
  const current = (await (await primary.api("/api/config", { headers: AUTH })).json()) as { version: string };
  return primary.api("/api/config", {
    method: "PUT",
    headers: { ...AUTH, "content-type": "application/json" },
    body: JSON.stringify({ content, base_version: current.version, validate, reload: validate }),
  });
}

async function replica(name: string, local: string, extra: string[] = [], env: NodeJS.ProcessEnv = { SLUICE_CONFIG_FROM_AUTH: "admin:s3cret-pw" }): Promise<{ run: RunningCli; file: string; dns: () => number; url: string; api: (p: string) => Promise<Response> }> {
  const file = join(dir, `${name}.yaml`);
  writeFileSync(file, local);
  const run = startCli(["-c", file, "--config-from", primary.apiUrl, "--config-poll", POLL, ...extra], { env });
  replicas.push(run);
  let udp = 0;
  let api = 0;
  const track = (l: Record<string, unknown>): boolean => {
    if (l.msg === "udp server listening") udp = Number(l.port);
    if (l.msg === "management API listening") api = Number(l.port);
    return false;
  };
  // The pull is validated in a worker before start (a fresh one loads every plugin module): room for a busy machine.
  await run.waitForLog((l) => (track(l), l.msg === "sluice started"), 30_000);
  run.logs.forEach(track);
  return { run, file, dns: () => udp, url: `http://127.0.0.1:${api}`, api: (p) => fetch(`http://127.0.0.1:${api}${p}`, { headers: AUTH }) };
}

async function until<T>(what: string, fn: () => Promise<T | undefined | false>, ms = 8000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v !== undefined && v !== false) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

test("the primary's configuration replaces the replica's before start and follows every save; a broken one is refused", async () => {
  const r = await replica("r1", primaryYaml(9).replace("s3cret-pw", "other"));
  expect(rcodeOf(await query(r.dns(), "x.test"))).toBe(2);
  expect(readFileSync(r.file, "utf8")).toBe(readFileSync(join(primary.dir, "sluice.yaml"), "utf8"));
  expect(r.run.logs.some((l) => l.msg === "configuration pulled from the primary")).toBe(true);

  const saved3 = await save(primaryYaml(3));
  expect(saved3.status, await saved3.clone().text()).toBe(200);
  await until("the new configuration on the replica", async () => rcodeOf(await query(r.dns(), "x.test")) === 3);
  const status = (await (await r.api("/api/reload/status")).json()) as { status: string; running_version: string; follow: Record<string, unknown> };
  const primaryVersion = ((await (await primary.api("/api/config", { headers: AUTH })).json()) as { version: string }).version;
  expect(status.running_version).toBe(primaryVersion);
  expect(status.follow).toMatchObject({ applied_version: primaryVersion, last_error: null, source: primary.apiUrl });

  // Saved on the primary without validation (PUT validate:false): the replica refuses it.
  const broken = `${primaryYaml(4)}  - { tag: nope, type: no_such_type }\n`;
  expect((await save(broken, false)).status).toBe(200);
  const refused = await until("the refusal in the reload status", async () => {
    const s = (await (await r.api("/api/reload/status")).json()) as { status: string; last_error: string | null; running_version: string; follow: { refused_version: string | null; last_error: string | null } };
    return s.status === "failed" && s.follow.refused_version !== null ? s : undefined;
  });
  expect(refused.last_error).toMatch(/refused; the last good configuration keeps serving/);
  expect(refused.last_error).toMatch(/no_such_type/);
  expect(refused.running_version).toBe(primaryVersion);
  expect(readFileSync(r.file, "utf8")).toBe(primaryYaml(3));
  expect(rcodeOf(await query(r.dns(), "x.test"))).toBe(3);
  expect(r.run.logs.some((l) => l.msg === "configuration from the primary refused; the last good configuration keeps serving")).toBe(true);
  // Not tried again while the primary keeps that version: three more polls find it.
  const polls = async (): Promise<number> => ((await (await r.api("/api/reload/status")).json()) as { follow: { polls: number } }).follow.polls;
  const pollsAtRefusal = await polls();
  await until("three more polls", async () => (await polls()) >= pollsAtRefusal + 3);
  expect(r.run.logs.filter((l) => l.msg === "configuration from the primary refused; the last good configuration keeps serving")).toHaveLength(1);

  // The follower among the app's actors.
  const { actors } = (await (await r.api("/api/actors")).json()) as { actors: { id: string; parent: string | null; context: Record<string, unknown> }[] };
  expect(actors.find((a) => a.id === "config-follow")).toMatchObject({ parent: "app", context: { source: primary.apiUrl, applied_version: primaryVersion } });

  // Fixed on the primary: followed again. The follower waits until its reload has ended, so DNS
  // answers with the fixed configuration as soon as it is waiting again.
  const stream = await openSse(`${r.url}/api/actors/stream`, AUTH);
  try {
    const follower = (state: string) => (f: SseFrame): boolean => {
      const a = f.event === "actor" ? (JSON.parse(f.data as string) as { id: string; state: unknown }) : null;
      return a?.id === "config-follow" && a.state === state;
    };
    expect((await save(primaryYaml(5))).status).toBe(200);
    await stream.until(follower("reloading"), 8000);
    await stream.until(follower("waiting"), 8000);
    expect(rcodeOf(await query(r.dns(), "x.test"))).toBe(5);
  } finally {
    await stream.close();
  }
  expect(JSON.stringify(r.run.logs) + r.run.stderr()).not.toContain("s3cret-pw");
});

test("wrong credentials or an unreachable primary: the replica serves its local configuration and says why", async () => {
  const r = await replica("r2", primaryYaml(7).replace("s3cret-pw", "x"), [], { SLUICE_CONFIG_FROM_AUTH: "admin:wr0ng-pw-zz" });
  expect(rcodeOf(await query(r.dns(), "x.test"))).toBe(7);
  const follow = await until("the follower's error", async () => {
    const res = await fetch(`http://127.0.0.1:${Number(r.run.logs.find((l) => l.msg === "management API listening")?.port)}/api/reload/status`, { headers: { Authorization: `Basic ${Buffer.from("admin:x").toString("base64")}` } });
    const s = (await res.json()) as { follow?: { last_error: string | null } };
    return s.follow?.last_error ? s.follow : undefined;
  });
  expect(follow.last_error).toMatch(/HTTP 401/);
  expect(r.run.logs.some((l) => l.msg === "the primary could not be read; serving the local configuration and polling")).toBe(true);
  expect(JSON.stringify(r.run.logs) + r.run.stderr()).not.toContain("wr0ng-pw-zz");

  // Nobody listening at all.
  const file = join(dir, "r4.yaml");
  writeFileSync(file, primaryYaml(6).replace("s3cret-pw", "x"));
  const down = startCli(["-c", file, "--config-from", "http://127.0.0.1:9", "--config-poll", "1s"]);
  replicas.push(down);
  const line = await down.waitForLog((l) => l.msg === "the primary could not be read; serving the local configuration and polling");
  expect(String(line.err)).toMatch(/ECONNREFUSED/);
  const port = Number((await down.waitForLog((l) => l.msg === "udp server listening")).port);
  expect(rcodeOf(await query(port, "x.test"))).toBe(6);
});

test("bad --config-from options are usage errors", async () => {
  const file = join(dir, "u.yaml");
  writeFileSync(file, primaryYaml(1));
  const bad = await runCli(["start", "-c", file, "--config-from", "ftp://x"]);
  expect(bad.code).toBe(2);
  expect(bad.stderr).toMatch(/http:\/\/ or https:\/\//);
  const poll = await runCli(["start", "-c", file, "--config-from", "http://127.0.0.1:1", "--config-poll", "10ms"]);
  expect(poll.code).toBe(2);
  expect(poll.stderr).toMatch(/--config-poll must be between 200ms and 1h/);
  const alone = await runCli(["start", "-c", file, "--config-poll", "5s"]);
  expect(alone.code).toBe(2);
});
