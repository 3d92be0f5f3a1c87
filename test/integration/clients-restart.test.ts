// The `clients` provider's state file across a restart of the real program (two runs on one directory):
// the seen clients are written every state_interval and at stop, named clients and pauses at each change;
// the next start restores them all, and drops a pause that ended while the program was down.
import { existsSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, expect, test } from "vitest";
import { startCli, type RunningCli } from "../helpers/cli.js";
import { rcodeFrom } from "../helpers/client-source.js";
import { tempDir } from "../helpers/sluice.js";

const dir = tempDir();
const stateFile = join(dir, "state", "clients.json");
writeFileSync(
  join(dir, "sluice.yaml"),
  `api:
  http: 127.0.0.1:0
plugins:
  - { tag: ads, type: qname, args: ["domain:ads.test"] }
  - tag: clients
    type: clients
    args:
      groups: [{ name: kids }, { name: guests }]
      pause: [ads]
      neighbour_refresh: 0s
      state_file: state/clients.json
      state_interval: 100ms
  - tag: main
    type: sequence
    args:
      - { matches: ["client kids", "$ads"], exec: reject 3 }
      - { matches: "client kids", exec: reject 4 }
      - exec: reject 2
  - { tag: udp, type: udp_server, args: { entry: main, listen: "127.0.0.1:0" } }
`,
);

const running: RunningCli[] = [];
afterAll(async () => {
  for (const run of running) {
    run.child.kill("SIGKILL");
    await run.exited;
  }
  rmSync(dir, { recursive: true, force: true });
});

interface Program {
  run: RunningCli;
  call(method: string, path: string, body?: unknown): Promise<{ status: number; json: Record<string, unknown> }>;
  rcodeFrom(source: string, name?: string): Promise<number>;
  stop(): Promise<void>;
}

async function start(): Promise<Program> {
  const run = startCli(["-c", "sluice.yaml", "-d", dir]);
  running.push(run);
  const api = `http://127.0.0.1:${String((await run.waitForLog((l) => l.msg === "management API listening")).port)}`;
  const port = Number((await run.waitForLog((l) => l.msg === "udp server listening")).port);
  await run.waitForLog((l) => l.msg === "sluice started");
  return {
    run,
    call: async (method, path, body) => {
      const res = await fetch(`${api}/api/plugins/clients/${path}`, body === undefined ? { method } : { method, headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
      return { status: res.status, json: (await res.json()) as Record<string, unknown> };
    },
    rcodeFrom: (source, name) => rcodeFrom(source, port, name),
    stop: async () => {
      run.child.kill("SIGTERM");
      expect((await run.exited).code).toBe(0);
      running.splice(running.indexOf(run), 1);
    },
  };
}

type State = { named: { name: string }[]; pauses: { group: string; paused_until_ms: number }[]; seen: { key: string; name: string | null; queries: number }[] };
const readState = (): State => JSON.parse(readFileSync(stateFile, "utf8")) as State;

async function eventually<T>(what: string, fn: () => T | undefined, timeoutMs = 5000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = fn();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

test("named clients, pauses and seen clients survive a restart; a pause that ended meanwhile does not", async () => {
  const first = await start();
  expect(await first.rcodeFrom("127.0.0.21")).toBe(2);
  // Nothing changed through the API: the seen client reaches the file with the state interval (100ms, the shortest).
  const seen = await eventually("the seen client in the state file", () => (existsSync(stateFile) ? readState().seen.find((c) => c.key === "127.0.0.21") : undefined));
  expect(seen.queries).toBe(1);

  expect(await first.rcodeFrom("127.0.0.22")).toBe(2);
  expect((await first.call("POST", "clients", { name: "console", addresses: ["127.0.0.22"], groups: ["kids"] })).status).toBe(201);
  const kidsUntil = (await first.call("POST", "groups/kids/pause", { duration: "1h" })).json.paused_until_ms as number;
  const guestsUntil = (await first.call("POST", "groups/guests/pause", { duration: "30m" })).json.paused_until_ms as number;
  expect(await first.rcodeFrom("127.0.0.22", "ads.test")).toBe(4);
  expect(await first.rcodeFrom("127.0.0.21")).toBe(2);
  await first.stop();
  // The last write, at stop, has the queries since the last interval.
  const written = readState();
  expect(written.named.map((c) => c.name)).toEqual(["console"]);
  expect(written.pauses).toEqual([
    { group: "kids", paused_until_ms: kidsUntil },
    { group: "guests", paused_until_ms: guestsUntil },
  ]);
  expect(written.seen.map((c) => [c.key, c.name, c.queries])).toEqual([["console", "console", 2], ["127.0.0.21", null, 2]]);

  // The guests' pause ends while the program is down. The clock is the child's own, so the file's end of
  // that pause moves into the past instead, as if the program had been down past it (a pause short enough
  // to end by itself in real time could end before the last write on a busy machine).
  const file = JSON.parse(readFileSync(stateFile, "utf8")) as State & Record<string, unknown>;
  writeFileSync(stateFile, JSON.stringify({ ...file, pauses: file.pauses.map((p) => (p.group === "guests" ? { ...p, paused_until_ms: Date.now() - 1000 } : p)) }));
  const second = await start();
  const list = (await second.call("GET", "clients")).json as {
    clients: { name: string; source: string; groups: string[]; seen: { queries: number } | null }[];
    seen: { key: string; queries: number }[];
    groups: { name: string; paused_until_ms: number | null }[];
  };
  expect(list.clients).toEqual([expect.objectContaining({ name: "console", source: "api", groups: ["kids"], seen: expect.objectContaining({ queries: 2 }) as unknown })]);
  expect(list.seen).toEqual([expect.objectContaining({ key: "127.0.0.21", queries: 2 })]);
  expect(list.groups).toEqual([expect.objectContaining({ name: "kids", paused_until_ms: kidsUntil }), expect.objectContaining({ name: "guests", paused_until_ms: null })]);
  expect(await second.rcodeFrom("127.0.0.22", "ads.test")).toBe(4);
  expect(await second.rcodeFrom("127.0.0.22")).toBe(4);
  // The ended pause is gone from the file too (written once at start).
  await eventually("the file without the ended pause", () => (readState().pauses.length === 1 ? true : undefined));
  expect(readState().pauses).toEqual([{ group: "kids", paused_until_ms: kidsUntil }]);
  await second.stop();
});

test("a state file that is not one stops the start, naming the file", async () => {
  writeFileSync(stateFile, "{ not json");
  const run = startCli(["-c", "sluice.yaml", "-d", dir]);
  running.push(run);
  const exit = await run.exited;
  running.splice(running.indexOf(run), 1);
  expect(exit.code).not.toBe(0);
  const text = JSON.stringify(run.logs) + run.stderr();
  expect(text).toContain("state/clients.json");
  expect(text).toContain("fix or remove the file");
});
