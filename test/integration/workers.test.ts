// `workers: 2`: the primary keeps the API and the actors, two data-plane workers (node:cluster) answer.
// Every check asks both workers: TCP connections are dealt to the workers in turn by the primary
// (the cluster module's round-robin), so ten fresh connections reach each worker five times; UDP
// queries from many source ports spread over both readers of the shared socket.

import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, expect, test } from "vitest";
import { startCli, type RunningCli } from "../helpers/cli.js";
import { query, rcodeOf, answerIps } from "../helpers/dns.js";
import { startDnsLoad } from "../helpers/dns-load.js";
import { answerWith, startResponder, type Responder } from "../helpers/responder.js";

let dir: string;
let upstream: Responder;
let upstreamAnswer = "10.9.0.1";
let sluice: RunningCli;
let api = "";
let udp = 0;
let tcp = 0;

const config = (upstreamPort: number): string => `
workers: 2
api: { http: { listen: 127.0.0.1:0 } }
plugins:
  - { tag: list, type: domain_set, args: { files: [list.txt] } }
  - { tag: listed, type: qname, args: [$list] }
  - { tag: dyn, type: dynamic_domain_set, args: { path: dyn.rules, flush_interval_ms: 20 } }
  - { tag: dynamic, type: qname, args: [$dyn] }
  - { tag: learn, type: learn_domain, args: { provider: dyn, qtypes: [TXT] } }
  - { tag: m, type: qname, args: ["domain:switch.test"] }
  - { tag: pz, type: qname, args: ["domain:paused.test"] }
  - tag: clients
    type: clients
    args:
      clients: [{ name: desk, addresses: [127.0.0.1], groups: [kids] }]
      groups: [{ name: kids }]
      pause: [pz]
      neighbour_refresh: 0s
      state_interval: 100ms
  - { tag: c, type: cache, args: { size: 1000, short_circuit: true } }
  - { tag: rec, type: query_recorder, args: { path: rec.db, flush_interval_ms: 20 } }
  - { tag: up, type: forward, args: { upstreams: [{ addr: "127.0.0.1:${upstreamPort}" }] } }
  - tag: main
    type: sequence
    args:
      - exec: $rec
      - { matches: qname domain:load.test, exec: black_hole 192.0.2.1 }
      - { matches: qname full:reload.test, exec: reload }
      - { matches: $m, exec: reject 5 }
      - { matches: $pz, exec: reject 4 }
      - { matches: $listed, exec: reject 3 }
      - { matches: $dynamic, exec: reject 2 }
      - { matches: qname domain:learn.test, exec: $learn }
      - exec: $c
      - exec: $up
  - { tag: udp, type: udp_server, args: { entry: main, listen: 127.0.0.1:0 } }
  - { tag: tcp, type: tcp_server, args: { entry: main, listen: 127.0.0.1:0 } }
`;

const call = async (path: string, init?: RequestInit): Promise<Response> => fetch(api + path, init);
const post = (path: string, body?: unknown): Promise<Response> =>
  call(path, { method: "POST", ...(body === undefined ? {} : { headers: { "content-type": "application/json" }, body: JSON.stringify(body) }) });

/** The rcodes of `n` answers over fresh TCP connections (dealt to the workers in turn) and `n` over UDP. */
async function everyWorker(name: string, n = 10): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n; i++) out.push(rcodeOf(await query(tcp, name, "A", { tcp: true })));
  out.push(...(await Promise.all(Array.from({ length: n }, () => query(udp, name, "A").then(rcodeOf)))));
  return out;
}

async function metric(name: string): Promise<number> {
  const text = await (await call("/api/metrics")).text();
  return text
    .split("\n")
    .filter((l) => l.startsWith(name))
    .reduce((sum, l) => sum + Number(l.slice(l.lastIndexOf(" ") + 1)), 0);
}

async function until(check: () => Promise<boolean>, ms = 5000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error("condition not met in time");
    await new Promise((r) => setTimeout(r, 25));
  }
}

interface Health {
  workers: { expected: number; alive: number; restarts: number };
  checks: Record<string, string>;
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "sluice-workers-"));
  upstream = await startResponder((q) => answerWith(q, [upstreamAnswer], 300));
  writeFileSync(join(dir, "list.txt"), "full:listed-a.test\n");
  writeFileSync(join(dir, "sluice.yaml"), config(upstream.port));
  sluice = startCli(["-c", "sluice.yaml", "-d", dir]);
  const apiLine = await sluice.waitForLog((l) => l.msg === "management API listening", 20_000);
  api = `http://127.0.0.1:${String(apiLine.port)}`;
  await sluice.waitForLog((l) => l.msg === "data-plane workers started", 30_000);
  const udpLine = await sluice.waitForLog((l) => l.msg === "udp server listening");
  const tcpLine = await sluice.waitForLog((l) => l.msg === "tcp server listening");
  udp = Number(udpLine.port);
  tcp = Number(tcpLine.port);
}, 60_000);

afterAll(async () => {
  if (sluice.child.exitCode === null) sluice.child.kill("SIGKILL");
  await upstream.close();
});

test("both workers serve the shared listeners; health, actors and the servers' addresses say so", async () => {
  const health = (await (await call("/api/health")).json()) as Health;
  expect(health.workers).toEqual({ expected: 2, alive: 2, restarts: 0 });
  expect(health.checks.workers).toBe("ok");
  const actors = ((await (await call("/api/actors")).json()) as { actors: { id: string; state: unknown; context: Record<string, unknown> }[] }).actors;
  const workers = actors.filter((a) => /^worker:\d$/.test(a.id));
  expect(workers.map((w) => [w.id, w.state])).toEqual([
    ["worker:1", { up: "running" }],
    ["worker:2", { up: "running" }],
  ]);
  expect(new Set(workers.map((w) => w.context.pid)).size).toBe(2);
  const logs = sluice.logs.filter((l) => l.msg === "udp server listening");
  expect(new Set(logs.map((l) => l.worker))).toEqual(new Set([1, 2]));
  expect(new Set(logs.map((l) => l.port))).toEqual(new Set([udp]));
  expect(await everyWorker("a.test")).toEqual(Array(20).fill(0));
  // /api/metrics adds the workers' counts up, and says each worker's share (TCP connections are dealt in turn: both have some).
  const text = await (await call("/api/metrics")).text();
  const values = (name: string): number[] => text.split("\n").filter((l) => l.startsWith(name)).map((l) => Number(l.slice(l.lastIndexOf(" ") + 1)));
  const sum = (xs: number[]): number => xs.reduce((a, b) => a + b, 0);
  const perWorker = [1, 2].map((n) => values(`worker_request_total{worker="${String(n)}"}`));
  expect(perWorker.map((v) => v.length)).toEqual([1, 1]);
  expect(perWorker.every(([v]) => v > 0)).toBe(true);
  expect(sum(perWorker.flat())).toBe(sum(values("server_request_total{")));
  expect(values('worker_cpu_seconds_total{worker="1"}')[0]).toBeGreaterThan(0);
  expect(values('worker_cpu_seconds_total{worker="2"}')[0]).toBeGreaterThan(0);
  // The summed exposition is as clean as one process's (promtool comes with the suite's Debian tools).
  const lint = spawnSync(process.env.PROMTOOL ?? "promtool", ["check", "metrics"], { input: text, encoding: "utf8" });
  expect(`${lint.stdout}${lint.stderr}`).toBe("");
  expect(lint.status).toBe(0);
  // The workers' log lines are in the primary's log (GET /api/logs, the stream), each saying its worker.
  await until(async () => {
    const logs = (await (await call("/api/logs?limit=1000")).json()) as { entries: { message: string; fields: Record<string, unknown> }[] };
    const from = new Set(logs.entries.filter((e) => e.message === "udp server listening").map((e) => e.fields.worker));
    return from.has(1) && from.has(2);
  }, 2000);
});

test("a matcher switch, a provider reload, a cache flush, a group pause and a dynamic rule reach every worker within a second", async () => {
  // Matcher mode (MATCHER.SET_MODE through the primary's actor).
  expect(await everyWorker("x.switch.test")).toEqual(Array(20).fill(5));
  expect((await post("/api/plugins/m/mode", { mode: "always_false" })).status).toBe(200);
  await until(async () => (await everyWorker("x.switch.test")).every((r) => r === 0), 1000);
  expect((await post("/api/plugins/m/mode", { mode: "normal" })).status).toBe(200);
  await until(async () => (await everyWorker("x.switch.test")).every((r) => r === 5), 1000);

  // Provider reload: the file changes, the primary's provider reloads, the workers' follow.
  expect(await everyWorker("listed-b.test")).toEqual(Array(20).fill(0));
  writeFileSync(join(dir, "list.txt"), "full:listed-a.test\nfull:listed-b.test\n");
  expect((await post("/api/plugins/list/reload")).status).toBe(200);
  await until(async () => (await everyWorker("listed-b.test")).every((r) => r === 3), 1000);

  // Cache flush: every worker cached the upstream's answer; after the flush each asks again.
  expect(new Set((await Promise.all(Array.from({ length: 10 }, () => query(tcp, "cached.test", "A", { tcp: true })))).flatMap(answerIps))).toEqual(new Set(["10.9.0.1"]));
  upstreamAnswer = "10.9.0.2";
  expect(new Set((await Promise.all(Array.from({ length: 10 }, () => query(tcp, "cached.test", "A", { tcp: true })))).flatMap(answerIps))).toEqual(new Set(["10.9.0.1"]));
  expect((await post("/api/plugins/c/flush")).status).toBe(200);
  await until(async () => {
    const ips = new Set((await Promise.all(Array.from({ length: 10 }, () => query(tcp, "cached.test", "A", { tcp: true })))).flatMap(answerIps));
    return ips.size === 1 && ips.has("10.9.0.2");
  }, 1000);

  // A group pause (the clients provider's state, shared with the workers only), then its end.
  expect(await everyWorker("x.paused.test")).toEqual(Array(20).fill(4));
  expect((await post("/api/plugins/clients/groups/kids/pause", { duration: "10m" })).status).toBe(200);
  await until(async () => (await everyWorker("x.paused.test")).every((r) => r === 0), 1000);
  expect((await call("/api/plugins/clients/groups/kids/pause", { method: "DELETE" })).status).toBe(200);
  await until(async () => (await everyWorker("x.paused.test")).every((r) => r === 4), 1000);

  // A dynamic rule added through the API.
  expect((await post("/api/plugins/dyn/rules", { rules: ["domain:dyn.test"] })).status).toBe(200);
  await until(async () => (await everyWorker("x.dyn.test")).every((r) => r === 2), 1000);
});

test("a name learn_domain adds in one worker is matched by every worker, listed by the primary's API and written to its file", async () => {
  // A queries never learn (qtypes: TXT): the name is not matched anywhere yet.
  expect(await everyWorker("a.learn.test")).toEqual(Array(20).fill(0));
  // One TXT query: one worker learns the name (and answers it from upstream this once).
  expect(rcodeOf(await query(udp, "a.learn.test", "TXT"))).toBe(0);
  // Within about a flush interval (20 ms here) every worker matches it.
  await until(async () => (await everyWorker("a.learn.test")).every((r) => r === 2), 1000);
  const listed = (await (await call("/api/plugins/dyn/rules?q=learn")).json()) as { rules: { rule: string; source: string; expires_at_ms: number | null }[] };
  expect(listed.rules.map((r) => [r.rule, r.source])).toEqual([["full:a.learn.test", "learned"]]);
  await until(async () => Promise.resolve(readFileSync(join(dir, "dyn.rules"), "utf8").includes("full:a.learn.test")), 1000);
  // A name learned in another worker too: each worker learns its own, and all end up with both.
  const names = Array.from({ length: 10 }, (_, i) => `n${i}.learn.test`);
  await Promise.all(names.map((n) => query(tcp, n, "TXT", { tcp: true })));
  for (const n of names) await until(async () => (await everyWorker(n, 4)).every((r) => r === 2), 1000);
  const status = (await (await call("/api/plugins/dyn/rules/status")).json()) as { by_source: Record<string, number> };
  expect(status.by_source.learned).toBe(11);
});

interface EntriesPage {
  entries: { id: string; domain: string; worker?: number }[];
  next_cursor: string | null;
  total_entries: number;
}

test("the cache routes act on the workers' caches: entries page through all, a delete and a load reach all, a dump holds all", async () => {
  const entries = async (query: string): Promise<EntriesPage> => (await (await call(`/api/plugins/c/entries?${query}`)).json()) as EntriesPage;
  expect((await post("/api/plugins/c/flush")).status).toBe(200);
  await until(async () => (await entries("limit=1")).total_entries === 0, 1000);
  // Both workers ask the upstream for both names and cache them (TCP connections are dealt to both in turn).
  for (const name of ["one.cached.test", "two.cached.test"]) expect(await everyWorker(name)).toEqual(Array(20).fill(0));
  // One row a page: four pages, one per name and worker, each saying its worker.
  const rows: EntriesPage["entries"] = [];
  let cursor: string | null = null;
  for (let pages = 0; pages < 10; pages++) {
    const page: EntriesPage = await entries(`limit=1${cursor === null ? "" : `&cursor=${encodeURIComponent(cursor)}`}`);
    expect(page.total_entries).toBe(4);
    rows.push(...page.entries);
    cursor = page.next_cursor;
    if (cursor === null) break;
  }
  expect(rows.map((r) => `${r.worker ?? "-"} ${r.domain}`).sort()).toEqual(["1 one.cached.test", "1 two.cached.test", "2 one.cached.test", "2 two.cached.test"]);
  expect((await call("/api/plugins/c/entries?cursor=w1.bogus")).status).toBe(400);

  // A dump holds each entry once (both workers hold both names).
  const dump = Buffer.from(await (await call("/api/plugins/c/dump")).arrayBuffer());
  // A delete removes the entry from both workers.
  const one = rows.find((r) => r.domain === "one.cached.test");
  expect((await call(`/api/plugins/c/entries/${one?.id ?? ""}`, { method: "DELETE" })).status).toBe(200);
  const after = await entries("limit=10");
  expect([after.total_entries, ...new Set(after.entries.map((r) => r.domain))]).toEqual([2, "two.cached.test"]);
  expect((await call(`/api/plugins/c/entries/${one?.id ?? ""}`, { method: "DELETE" })).status).toBe(404);
  // Loading the dump gives both workers both names again.
  const loaded = await call("/api/plugins/c/load_dump", { method: "POST", headers: { "content-type": "application/octet-stream" }, body: dump });
  expect([loaded.status, await loaded.json()]).toEqual([200, { ok: true, loaded_entries: 2 }]);
  const reloaded = await entries("limit=10");
  expect(reloaded.total_entries).toBe(4);
  let all = reloaded.entries.map((r) => `${r.worker ?? "-"} ${r.domain}`);
  if (reloaded.next_cursor !== null) all = all.concat((await entries(`limit=10&cursor=${encodeURIComponent(reloaded.next_cursor)}`)).entries.map((r) => `${r.worker ?? "-"} ${r.domain}`));
  expect(all.sort()).toEqual(["1 one.cached.test", "1 two.cached.test", "2 one.cached.test", "2 two.cached.test"]);
});

test("every query is answered while the configuration reloads under load, and every answer is recorded", async () => {
  const requestsBefore = await metric("server_request_total");
  const load = await startDnsLoad(udp, 500);
  await new Promise((r) => setTimeout(r, 300));
  for (let i = 0; i < 3; i++) {
    expect((await post("/api/reload")).status).toBe(202);
    await until(async () => ((await (await call("/api/reload/status")).json()) as { status: string }).status === "ok", 5000);
    // Both workers built the new generation.
    await until(async () => sluice.logs.filter((l) => l.msg === "reload succeeded" && typeof l.worker === "number").length >= 2 * (i + 1), 5000);
  }
  const report = await load.stop(500);
  expect(report.lost, `${report.answered}/${report.sent}`).toBe(0);
  expect((await metric("server_request_total")) - requestsBefore).toBe(report.sent);
  // Every query since the start passed the recorder first: the workers' batches all reached the primary's writer.
  const counts = async (): Promise<string> => `${await metric("query_recorder_records_written_total")} written, ${await metric("server_request_total")} asked`;
  await until(async () => (await metric("query_recorder_records_written_total")) === (await metric("server_request_total")), 5000).catch(async (err: unknown) => {
    throw new Error(`${String(err)}: ${await counts()}`);
  });
  expect(await metric("query_recorder_dropped_total")).toBe(0);
  // The workers' seen clients reach the primary's clients provider (every state_interval): every query came from "desk".
  const deskQueries = async (): Promise<number> =>
    ((await (await call("/api/plugins/clients/clients")).json()) as { clients: { name: string; seen: { queries: number } | null }[] }).clients.find((c) => c.name === "desk")?.seen?.queries ?? 0;
  await until(async () => (await deskQueries()) === (await metric("server_request_total")), 5000).catch(async (err: unknown) => {
    throw new Error(`${String(err)}: desk ${await deskQueries()} queries, ${await metric("server_request_total")} asked`);
  });
  const page = (await (await call("/api/plugins/rec/records?limit=5&q=load.test")).json()) as { records: { qname?: string }[] };
  expect(page.records.length).toBe(5);
});

test("a reload executor run by a query in a worker reloads the primary, then every worker", async () => {
  const reloads = (worker: boolean): number => sluice.logs.filter((l) => l.msg === "reload succeeded" && (typeof l.worker === "number") === worker).length;
  const [primary, workers] = [reloads(false), reloads(true)];
  await query(udp, "reload.test", "A");
  await until(async () => reloads(false) === primary + 1 && reloads(true) === workers + 2, 5000);
  expect(sluice.logs.some((l) => l.msg === "reload requested by a worker's reload executor")).toBe(true);
});

test("a killed worker is replaced and DNS keeps answering meanwhile; the new one takes the primary's matcher modes", async () => {
  expect((await post("/api/plugins/m/mode", { mode: "always_false" })).status).toBe(200);
  const actors = ((await (await call("/api/actors")).json()) as { actors: { id: string; context: { pid?: number } }[] }).actors;
  const pid = actors.find((a) => a.id === "worker:1")?.context.pid;
  expect(typeof pid).toBe("number");
  const load = await startDnsLoad(udp, 200);
  process.kill(pid as number, "SIGKILL");
  await until(async () => ((await (await call("/api/health")).json()) as Health).workers.alive === 1, 2000);
  expect(((await (await call("/api/health")).json()) as Health).checks.workers).toBe("degraded");
  await until(async () => {
    const h = (await (await call("/api/health")).json()) as Health;
    return h.workers.alive === 2 && h.workers.restarts === 1;
  }, 10_000);
  const report = await load.stop(500);
  // Queries the kernel had queued on the killed reader's side are the only ones that may go unanswered.
  expect(report.answered / report.sent).toBeGreaterThan(0.95);
  expect(sluice.logs.some((l) => l.msg === "data-plane worker ended; starting it again" && l.worker === 1 && l.signal === "SIGKILL")).toBe(true);
  expect(await everyWorker("x.switch.test")).toEqual(Array(20).fill(0));
  expect((await post("/api/plugins/m/mode", { mode: "normal" })).status).toBe(200);
});

test("SIGTERM drains every worker, then the primary exits 0", async () => {
  sluice.child.kill("SIGTERM");
  const { code } = await sluice.exited;
  expect(code).toBe(0);
  const stopped = sluice.logs.filter((l) => l.msg === "state changed" && l.actor === "app" && l.state === "stopped");
  expect(new Set(stopped.map((l) => l.worker ?? "primary"))).toEqual(new Set([1, 2, "primary"]));
  expect(await query(udp, "a.test", "A", { timeoutMs: 300 }).then(() => "answered", () => "no answer")).toBe("no answer");
});
