// The query recorder's PostgreSQL store against a real, throwaway PostgreSQL server: two instances
// (a: PostgreSQL only; b: SQLite and PostgreSQL) write one store; records, the detail route and
// every stats route read the same from either, `instance=` narrows; the stream of one shows a query
// answered by the other and resumes with Last-Event-ID; a stream opened while the store refuses new
// connections (the writers keep theirs) gets every record committed meanwhile once it accepts them
// again (issue 22, defect 11: it got none); with PostgreSQL stopped DNS keeps answering,
// the routes (a delete too) answer 503, an instance started meanwhile starts and answers, and after
// its restart the records waiting in the queues and new ones are written; max_records caps each
// instance's own records and retention takes every instance's; a store of a newer schema version is
// refused at start. Reads past the reader processes' queue (held by a table lock) are refused by the
// recorder actor's guard.
import Database from "better-sqlite3";
import { join } from "node:path";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { query as dnsQuery, rcodeOf } from "../helpers/dns.js";
import { PostgresServer, requirePostgres } from "../helpers/postgres.js";
import { RedisServer } from "../helpers/redis.js";
import { isHeartbeat, openSse, type SseFrame } from "../helpers/sse.js";
import { serversYaml, startSluice, type RunningSluice } from "../helpers/sluice.js";
import { GUARD_REFUSALS } from "../../src/api/guards.js";
import { pgNames } from "../../src/plugins/executors/query-recorder/pg-schema.js";
import { MAX_READERS, MAX_WAITING } from "../../src/plugins/executors/query-recorder/readers.js";
import { allRecords, apiJson, until, type RecordJson } from "./recorder-helpers.js";

const R = "/api/plugins/rec";
let server: PostgresServer;
let redis: RedisServer;
let a: RunningSluice;
let b: RunningSluice;

const config = (instance: string, store: string): string => `
api: { http: "127.0.0.1:0" }
cluster: { name: lab, redis: "${redis.url}", instance: ${instance} }
plugins:
  - { tag: blocked, type: qname, args: ["domain:ads.pg.test"] }
  - { tag: rec, type: query_recorder, args: { ${store}, flush_interval_ms: 20, queue_size: 64, batch_size: 8 } }
  - tag: main
    type: sequence
    args:
      - exec: $rec
      - { matches: $blocked, exec: reject 3 }
      - exec: reject 0
${serversYaml()}`;

const pgArgs = (schema = "lab"): string => `postgres: { url: "${server.url()}", schema: ${schema}, connect_timeout_ms: 5000 }`;
const ask = async (s: RunningSluice, name: string): Promise<number> => rcodeOf(await dnsQuery(s.port("udp"), name, "A"));
const names = (records: RecordJson[]): string[] => records.map((r) => r.questions_json[0]?.name ?? "").sort();
/** Waits until `s` reads at least `n` records matching `query`. */
const seen = (s: RunningSluice, n: number, query = ""): Promise<RecordJson[]> =>
  until(`${n} records (${query})`, async () => {
    const res = await s.api(`${R}/records?limit=500${query ? `&${query}` : ""}`);
    if (res.status !== 200) return undefined;
    const page = (await res.json()) as { records: RecordJson[] };
    return page.records.length >= n ? page.records : undefined;
  }, 20_000);

requirePostgres();

describe("PostgreSQL query store", () => {
  beforeAll(async () => {
    server = await PostgresServer.start();
    redis = await RedisServer.start();
    a = await startSluice(config("a", pgArgs()));
    b = await startSluice(config("b", `path: rec.db, ${pgArgs()}`));
  });

  afterAll(async () => {
    await a?.stop();
    await b?.stop();
    await redis?.stop();
    server?.destroy();
  });

  test("records of both instances read the same from either; instance= narrows; every stats route agrees", async () => {
    expect(await ask(a, "one.a.pg.test")).toBe(0);
    expect(await ask(b, "one.b.pg.test")).toBe(0);
    expect(await ask(b, "ads.pg.test")).toBe(3);
    const fromA = await seen(a, 3);
    const fromB = await seen(b, 3);
    expect(names(fromA)).toEqual(["ads.pg.test.", "one.a.pg.test.", "one.b.pg.test."]);
    expect(fromB).toEqual(fromA);
    expect(Object.fromEntries(fromA.map((r) => [r.questions_json[0].name, r.instance]))).toEqual({ "one.a.pg.test.": "a", "one.b.pg.test.": "b", "ads.pg.test.": "b" });

    expect(names(await allRecords(a, "rec", "instance=b"))).toEqual(["ads.pg.test.", "one.b.pg.test."]);
    expect(names(await allRecords(b, "rec", "instance=a"))).toEqual(["one.a.pg.test."]);
    expect(await allRecords(a, "rec", "instance=c")).toEqual([]);
    expect(names(await allRecords(a, "rec", "qname=ONE&client_ip=127.0&qtype=A&rcode=NOERROR&status=has_response"))).toEqual(["one.a.pg.test.", "one.b.pg.test."]);
    expect(names(await allRecords(a, "rec", "matcher_tag=blocked"))).toEqual(["ads.pg.test."]);
    expect(await apiJson(a, `${R}/records?instance=a%20b`, undefined, 400)).toMatchObject({ ok: false, code: "invalid_query" });

    // Paging with a cursor.
    const p1 = await apiJson<{ next_cursor: string; records: RecordJson[] }>(a, `${R}/records?limit=2`);
    const p2 = await apiJson<{ next_cursor: string | null; records: RecordJson[] }>(a, `${R}/records?limit=2&cursor=${p1.next_cursor}`);
    expect([...p1.records, ...p2.records].map((r) => r.id)).toEqual(fromA.map((r) => r.id));
    expect(p2.next_cursor).toBeNull();

    // The detail of b's record from a, with its execution path.
    const ads = fromA.find((r) => r.questions_json[0].name === "ads.pg.test.");
    const detail = await apiJson<{ record: { record: RecordJson; steps: { tag: string; outcome: string }[] } }>(a, `${R}/records/${ads?.id}`);
    expect(detail.record.record).toEqual(ads);
    expect(detail.record.steps).toContainEqual(expect.objectContaining({ tag: "blocked", outcome: "matched" }));
    expect(await apiJson(a, `${R}/records/999999`, undefined, 404)).toMatchObject({ code: "record_not_found" });

    for (const s of [a, b]) {
      const rcode = await apiJson<{ sample_size: number; rows: { key: string; count: number }[] }>(s, `${R}/stats/rcode`);
      expect(rcode.sample_size).toBe(3);
      expect(rcode.rows).toEqual([
        { key: "NOERROR", count: 2, share: 2 / 3 },
        { key: "NXDOMAIN", count: 1, share: 1 / 3 },
      ]);
      expect((await apiJson<{ rows: unknown[] }>(s, `${R}/stats/rcode?instance=a`)).rows).toEqual([{ key: "NOERROR", count: 1, share: 1 }]);
      expect((await apiJson<{ rows: unknown[] }>(s, `${R}/stats/qtype`)).rows).toEqual([{ key: "A", count: 3, share: 1 }]);
      expect((await apiJson<{ rows: { key: string }[] }>(s, `${R}/stats/top_qnames?limit=2`)).rows).toHaveLength(2);
      expect((await apiJson<{ sample_size: number; rows: { key: string; count: number }[] }>(s, `${R}/stats/top_clients`)).rows).toEqual([{ key: "127.0.0.1", count: 3, share: 1, client_ip: "127.0.0.1", client_name: null }]);
      const plugins = await apiJson<{ sample_size: number; rows: { tag: string; kind: string; checked: number; matched: number }[] }>(s, `${R}/stats/plugins?kind=matcher`);
      expect(plugins.rows).toEqual([{ kind: "matcher", tag: "blocked", checked: 3, matched: 1, executed: 0, query_total: 3, query_share: 1 }]);
      const latency = await apiJson<{ sample_size: number; p50_ms: number; histogram: { count: number }[]; slow_top: unknown[] }>(s, `${R}/stats/latency`);
      expect(latency.sample_size).toBe(3);
      expect(latency.histogram.reduce((n, h) => n + h.count, 0)).toBe(3);
      expect(latency.slow_top).toHaveLength(3);
      const series = await apiJson<{ sample_size: number; points: { total: number }[] }>(s, `${R}/stats/timeseries?buckets=5`);
      expect(series.sample_size).toBe(3);
      expect(series.points).toHaveLength(5);
    }
    // b also keeps its own records in its SQLite file.
    const db = new Database(join(b.dir, "rec.db"), { readonly: true });
    try {
      expect(db.prepare("SELECT instance, count(*) AS n FROM records_v2 GROUP BY instance").all()).toEqual([{ instance: "b", n: 2 }]);
    } finally {
      db.close();
    }
  });

  test("the stream of one instance shows a query answered by the other, and resumes with Last-Event-ID", async () => {
    // The replay is the newest by id (commit order), which need not be the order of arrival.
    const newest = (await allRecords(a, "rec")).sort((x, y) => x.id - y.id).slice(-2);
    const stream = await openSse(`${a.apiUrl}${R}/stream?tail=2`);
    const record = (f: SseFrame): { id: number; name: string; instance: string } => {
      const d = JSON.parse(f.data ?? "") as { record: { id: number; instance: string; questions_json: { name: string }[] } };
      return { id: d.record.id, name: d.record.questions_json[0].name, instance: d.record.instance };
    };
    let lastId: string;
    try {
      expect(stream.response.status).toBe(200);
      const replay = (await stream.until((f) => f.event === "record" && record(f).id === newest[1].id)).filter((f) => f.event === "record");
      expect(replay.map((f) => record(f).id)).toEqual(newest.map((r) => r.id));
      const sent = Date.now();
      await ask(b, "live.b.pg.test");
      const live = (await stream.until((f) => f.event === "record")).map(record);
      expect(live).toEqual([expect.objectContaining({ name: "live.b.pg.test.", instance: "b" })]);
      expect(Date.now() - sent).toBeLessThan(2000);
      lastId = String(live[0].id);
    } finally {
      await stream.close();
    }
    await ask(a, "later.a.pg.test");
    await ask(b, "later.b.pg.test");
    await seen(a, 2, "qname=later");
    const again = await openSse(`${b.apiUrl}${R}/stream`, { "last-event-id": lastId });
    try {
      const frames: { id: number; name: string }[] = [];
      await again.until((f) => {
        if (f.event === "record") frames.push(record(f));
        return frames.length === 2;
      });
      expect(frames.map((f) => f.name).sort()).toEqual(["later.a.pg.test.", "later.b.pg.test."]);
      expect(frames[0].id).toBeGreaterThan(Number(lastId));
      expect(frames[1].id).toBeGreaterThan(frames[0].id);
    } finally {
      await again.close();
    }
  });

  test("a stream opened while the store takes no new connections gets every record committed meanwhile, once it does", async () => {
    // The writers connect at start and keep their connections; the streams' feeds connect when a
    // stream opens. ALLOW_CONNECTIONS false refuses new connections (superusers too) and keeps open ones.
    // Counts through a connection to the store's database; the switch from another (PostgreSQL
    // refuses it for the current database).
    const admin = new pg.Client({ connectionString: server.url() });
    const other = new pg.Client({ connectionString: server.url("template1") });
    for (const c of [admin, other]) {
      c.on("error", () => undefined);
      await c.connect();
    }
    const newest = async (): Promise<{ id: number; n: number }> => {
      const row = (await admin.query<{ id: string | null; n: string }>("SELECT max(id) AS id, count(*) AS n FROM lab.records_v1")).rows[0];
      return { id: Number(row.id ?? 0), n: Number(row.n) };
    };
    const record = (f: SseFrame): string => (JSON.parse(f.data ?? "") as { record: { questions_json: { name: string }[] } }).record.questions_json[0].name;
    const collect = async (stream: Awaited<ReturnType<typeof openSse>>, n: number): Promise<string[]> => {
      const got: string[] = [];
      await stream.until((f) => {
        if (f.event === "record") got.push(record(f));
        return got.length === n;
      }, 15_000);
      return got.sort();
    };
    expect(await ask(a, "warm.a.pg.test")).toBe(0);
    expect(await ask(b, "warm.b.pg.test")).toBe(0);
    await seen(a, 2, "qname=warm");
    const before = await newest();
    await other.query("ALTER DATABASE postgres ALLOW_CONNECTIONS false");
    let restored = false;
    const restore = async (): Promise<void> => {
      if (restored) return;
      restored = true;
      await other.query("ALTER DATABASE postgres ALLOW_CONNECTIONS true");
      await Promise.all([admin.end(), other.end()]);
    };
    const streams: Awaited<ReturnType<typeof openSse>>[] = [];
    try {
      await expect(new pg.Client({ connectionString: server.url() }).connect()).rejects.toThrow(/not currently accepting connections/);
      // One stream without Last-Event-ID (it starts at the newest record the writer knows of), one resuming.
      const fresh = await openSse(`${a.apiUrl}${R}/stream`);
      streams.push(fresh);
      const resumed = await openSse(`${b.apiUrl}${R}/stream`, { "last-event-id": String(before.id) });
      streams.push(resumed);
      for (const s of streams) expect(isHeartbeat((await s.next()) as SseFrame)).toBe(true);
      for (let i = 0; i < 5; i++) {
        expect(await ask(a, `out${i}.a.pg.test`)).toBe(0);
        expect(await ask(b, `out${i}.b.pg.test`)).toBe(0);
      }
      await until("10 records committed through the writers' open connections", async () => (await newest()).n >= before.n + 10);
      // The feeds look every 500 ms and fail while the store refuses them.
      await new Promise((r) => setTimeout(r, 1500));
      await restore();
      const restoredAt = Date.now();
      const names = Array.from({ length: 5 }, (_, i) => [`out${i}.a.pg.test.`, `out${i}.b.pg.test.`]).flat().sort();
      const got = await Promise.all([collect(fresh, 10), collect(resumed, 10)]);
      console.log(`streams opened during the outage: ${got[0].length}/10 (fresh) and ${got[1].length}/10 (Last-Event-ID) delivered, ${Date.now() - restoredAt} ms after connections were allowed again`);
      expect(got[0]).toEqual(names);
      expect(got[1]).toEqual(names);
    } finally {
      await restore();
      for (const s of streams) await s.close();
    }
  }, 40_000);

  test("reads past the readers' queue are refused by the actor's guard (503), and those admitted are answered", async () => {
    // The reads are held by a lock on the records table: two run (one per reader process), the rest wait.
    const locker = new pg.Client({ connectionString: server.url() });
    await locker.connect();
    const held: Promise<Response>[] = [];
    try {
      await locker.query("BEGIN");
      await locker.query(`LOCK TABLE ${pgNames("lab").records} IN ACCESS EXCLUSIVE MODE`);
      for (let i = 0; i < MAX_READERS + MAX_WAITING; i++) held.push(a.api(`${R}/stats/rcode`));
      // The actor reads the pool's queue (shown in its context) when it admits a read.
      await until("a full queue", async () => {
        const { actors } = await apiJson<{ actors: { id: string; context: { readers?: { waiting: number } } }[] }>(a, "/api/actors");
        return actors.find((x) => x.id.endsWith("/recorder:rec"))?.context.readers?.waiting === MAX_WAITING || undefined;
      });
      const refused = await a.api(`${R}/records`);
      expect([refused.status, await refused.json()]).toEqual([503, { ok: false, code: "query_recorder_unavailable", message: GUARD_REFUSALS.recorderReadersFree.message }]);
    } finally {
      await locker.query("COMMIT");
      await locker.end();
    }
    expect((await Promise.all(held)).map((r) => r.status)).toEqual(new Array(MAX_READERS + MAX_WAITING).fill(200));
    expect((await a.api(`${R}/records`)).status).toBe(200);
  }, 30_000);

  test("PostgreSQL stopped: DNS answers, routes 503, records wait; after its restart they and new ones are written", async () => {
    const before = (await allRecords(a, "rec")).length;
    server.stop();
    const t0 = Date.now();
    for (let i = 0; i < 10; i++) expect(await ask(a, `down${i}.a.pg.test`)).toBe(0);
    // Ten answers with the store down take no longer than answers do.
    expect(Date.now() - t0).toBeLessThan(2000);
    const down = await until("503", async () => {
      const res = await a.api(`${R}/records`);
      return res.status === 503 ? ((await res.json()) as { code: string }) : undefined;
    });
    // The read was admitted (the writer is up, retrying) and failed: not a refusal.
    expect(down.code).toBe("query_recorder_read_failed");
    expect((await a.api(`${R}/stats/rcode`)).status).toBe(503);
    // A delete does not wait for PostgreSQL behind the records that do.
    const del = await a.api(`${R}/records`, { method: "DELETE" });
    expect(await del.json()).toMatchObject({ ok: false, code: "query_recorder_clear_failed" });
    expect(del.status).toBe(503);
    // An instance started meanwhile starts and answers; its recorder waits the same way.
    const late = await startSluice(config("late", pgArgs()));
    try {
      expect(await ask(late, "down.late.pg.test")).toBe(0);
      await server.resume();
      const after = await seen(a, before + 11);
      expect(after.filter((r) => r.questions_json[0].name.startsWith("down"))).toHaveLength(11);
      expect(await ask(a, "up-again.a.pg.test")).toBe(0);
      await seen(b, 1, "qname=up-again");
      expect((await seen(late, 1, "instance=late")).map((r) => r.questions_json[0].name)).toEqual(["down.late.pg.test."]);
    } finally {
      await late.stop();
    }
  }, 60_000);

  test("max_records caps each instance's own records; retention deletes every instance's", async () => {
    const capped = await startSluice(config("capped", `${pgArgs("trim")}, max_records: 5`));
    const other = await startSluice(config("other", `${pgArgs("trim")}, max_records: 0`));
    try {
      for (let i = 0; i < 3; i++) await ask(other, `o${i}.trim.pg.test`);
      for (let i = 0; i < 12; i++) await ask(capped, `c${i}.trim.pg.test`);
      await seen(other, 3, "instance=other");
      // Trimmed after the batch that took it past the cap: the newest five stay.
      const kept = await until("the cap", async () => {
        const page = await apiJson<{ records: RecordJson[] }>(other, `${R}/records?instance=capped&limit=500`);
        return page.records.some((r) => r.questions_json[0].name === "c11.trim.pg.test.") && page.records.length === 5 ? page.records : undefined;
      });
      expect(names(kept)).toEqual(["c10.trim.pg.test.", "c11.trim.pg.test.", "c7.trim.pg.test.", "c8.trim.pg.test.", "c9.trim.pg.test."]);
      expect(await allRecords(capped, "rec", "instance=other")).toHaveLength(3);
    } finally {
      await capped.stop();
      await other.stop();
    }
    // retention_days 0.00003 is about 2.6 s; a cleanup runs every ~1.1 s, and takes every instance's records.
    const keeper = await startSluice(config("keeper", `${pgArgs("trim")}, retention_days: 0.00003, cleanup_interval_hours: 0.0003`));
    try {
      await until("retention", async () => (await allRecords(keeper, "rec")).length === 0, 15_000);
    } finally {
      await keeper.stop();
    }
  }, 40_000);

  test("a store that holds a newer schema version is refused at start, saying so", async () => {
    const c = new pg.Client({ connectionString: server.url() });
    await c.connect();
    try {
      await c.query("CREATE SCHEMA future; CREATE TABLE future.recorder_schema (version integer PRIMARY KEY, created_at_ms bigint NOT NULL); INSERT INTO future.recorder_schema VALUES (99, 0)");
    } finally {
      await c.end();
    }
    await expect(startSluice(config("z", pgArgs("future")))).rejects.toThrow(/version 99, newer than this Sluice's 1/);
  });
});
