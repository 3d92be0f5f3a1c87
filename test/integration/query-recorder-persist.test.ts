// The recorder's database over time: DELETE empties it (after committing the queue), records survive
// a restart and a reload (those not yet flushed too), retention and max_records delete the oldest, a
// full queue drops and counts while DNS answers everything, a crashed writer is replaced, two
// recorders cannot share a file, args need a store, and a file of schema version 2 is upgraded with the instance column.
import Database from "better-sqlite3";
import { hostname } from "node:os";
import { join } from "node:path";
import { afterEach, expect, test } from "vitest";
import { buildQuery, udpBurst, udpExchange } from "../helpers/dns.js";
import { openSse } from "../helpers/sse.js";
import { startSluice, tempDir, type RunningSluice } from "../helpers/sluice.js";
import type { QueryRecorder } from "../../src/plugins/executors/query-recorder/index.js";
import { allRecords, apiJson, committed, crashWriter, metric, until, writerUp } from "./recorder-helpers.js";

const running: RunningSluice[] = [];
afterEach(async () => {
  for (const s of running.splice(0)) await s.stop();
});

function config(args: Record<string, number>, dbPath = "rec.db"): string {
  return `api:
  http: 127.0.0.1:0
plugins:
  - { tag: rec, type: query_recorder, args: ${JSON.stringify({ path: dbPath, flush_interval_ms: 20, ...args })} }
  - tag: main
    type: sequence
    args:
      - exec: $rec
      - exec: reject 0
  - { tag: udp, type: udp_server, args: { entry: main, listen: "127.0.0.1:0" } }
`;
}

async function start(yaml: string): Promise<RunningSluice> {
  const s = await startSluice(yaml);
  running.push(s);
  return s;
}

async function sendN(s: RunningSluice, n: number, prefix: string): Promise<void> {
  for (let i = 0; i < n; i++) await udpExchange(s.port("udp"), buildQuery(`${prefix}${i}.persist.test`, "A"));
}

const recorder = (s: RunningSluice): QueryRecorder => s.app.runtime.live("rec")?.instance as QueryRecorder;

test("DELETE records commits what is queued, then empties records, stats and the stream's tail", async () => {
  // A long flush interval: the records are still in the queue when DELETE arrives.
  const s = await start(config({ flush_interval_ms: 60000, batch_size: 1000 }));
  await sendN(s, 25, "d");
  expect((await apiJson<{ sample_size: number }>(s, "/api/plugins/rec/stats/rcode")).sample_size).toBe(0);
  expect(await apiJson(s, "/api/plugins/rec/records", { method: "DELETE" })).toEqual({ ok: true, cleared_records: 25 });
  expect(await apiJson(s, "/api/plugins/rec/records")).toEqual({ ok: true, next_cursor: null, records: [] });
  for (const st of ["rcode", "plugins", "top_qnames", "latency"]) expect((await apiJson<{ sample_size: number }>(s, `/api/plugins/rec/stats/${st}`)).sample_size, st).toBe(0);
  const db = new Database(join(s.dir, "rec.db"), { readonly: true });
  try {
    for (const t of ["records_v2", "questions_v2", "steps_v2", "rollup_outcomes_v2", "rollup_names_v2"]) expect(db.prepare(`SELECT count(*) FROM ${t}`).pluck().get(), t).toBe(0);
  } finally {
    db.close();
  }
  const stream = await openSse(`${s.apiUrl}/api/plugins/rec/stream?tail=100`);
  try {
    await sendN(s, 1, "after");
    // What the flush timer would do in a minute.
    recorder(s).flush();
    const frames = await stream.until((f) => f.event === "record", 5000);
    expect(frames.filter((f) => f.event === "record").map((f) => (JSON.parse(f.data ?? "") as { record: { questions_json: { name: string }[] } }).record.questions_json[0].name)).toEqual(["after0.persist.test."]);
  } finally {
    await stream.close();
  }
  expect(await metric(s, /query_recorder_records\{plugin_tag="rec"\}/)).toBe(1);
});

test("records survive a restart of the process and a reload, and the stream's tail is reloaded from the file", async () => {
  const dir = tempDir("sluice-recorder-");
  const path = join(dir, "kept.db");
  const first = await start(config({}, path));
  await sendN(first, 40, "k");
  await committed(first, "rec", 40);
  const before = await allRecords(first, "rec");
  await first.stop();
  running.splice(running.indexOf(first), 1);

  const second = await start(config({}, path));
  expect(await allRecords(second, "rec")).toEqual(before);
  expect((await apiJson<{ sample_size: number }>(second, "/api/plugins/rec/stats/top_qnames")).sample_size).toBe(40);
  const stream = await openSse(`${second.apiUrl}/api/plugins/rec/stream?tail=2`);
  try {
    const frames = await stream.until((f) => f.event === "record" && f.id === String(before[0].id));
    expect(frames.filter((f) => f.event === "record").map((f) => Number(f.id))).toEqual([before[1].id, before[0].id]);
  } finally {
    await stream.close();
  }
  // A reload builds a new recorder on the same file (the old one commits and closes first).
  await sendN(second, 5, "r");
  const res = await second.api("/api/reload", { method: "POST" });
  expect(res.status).toBe(202);
  await until("reload ok", async () => (await apiJson<{ status: string }>(second, "/api/reload/status")).status === "ok");
  await sendN(second, 5, "s");
  await committed(second, "rec", 50);
  expect((await allRecords(second, "rec")).length).toBe(50);
});

test("records still in the batch (no flush tick yet) when the plugin goes are committed: by a reload, and by the process's stop", async () => {
  const dir = tempDir("sluice-recorder-");
  const path = join(dir, "batch.db");
  // No flush tick and no full batch within the test: only the plugin's destroy hands these over.
  const yaml = config({ flush_interval_ms: 60000, batch_size: 1000 }, path);
  const first = await start(yaml);
  await sendN(first, 7, "before-reload");
  const res = await first.api("/api/reload", { method: "POST" });
  expect(res.status).toBe(202);
  await until("reload ok", async () => (await apiJson<{ status: string }>(first, "/api/reload/status")).status === "ok");
  // The old generation may still be draining; a query it answers is not recorded (its recorder is gone).
  await until("old generation gone", async () => !(await apiJson<{ actors: { id: string }[] }>(first, "/api/actors")).actors.some((a) => a.id.startsWith("runtime:1")));
  await sendN(first, 4, "before-stop");
  await first.stop();
  running.splice(running.indexOf(first), 1);
  const db = new Database(path, { readonly: true });
  try {
    expect(db.prepare("SELECT count(*) FROM records_v2").pluck().get()).toBe(11);
  } finally {
    db.close();
  }
});

test("max_records keeps the newest; retention deletes what is older; rollups follow", async () => {
  const s = await start(config({ max_records: 50, retention_days: 0.00004, cleanup_interval_hours: 0.0003 }));
  await sendN(s, 120, "m");
  await until("trimmed to 50", async () => (await allRecords(s, "rec")).length === 50 && (await apiJson<{ sample_size: number }>(s, "/api/plugins/rec/stats/rcode")).sample_size === 50);
  const kept = await allRecords(s, "rec");
  expect(kept.map((r) => r.questions_json[0].name)).toEqual(Array.from({ length: 50 }, (_, i) => `m${119 - i}.persist.test.`));
  const names = await apiJson<{ sample_size: number; rows: { key: string }[] }>(s, "/api/plugins/rec/stats/top_qnames?limit=1000");
  expect(names.rows.map((r) => r.key).sort()).toEqual(kept.map((r) => r.questions_json[0].name).sort());
  // retention_days 0.00004 is about 3.5 s; a cleanup runs every ~1.1 s.
  await until("retention", async () => (await allRecords(s, "rec")).length === 0, 15_000);
  expect((await apiJson<{ sample_size: number }>(s, "/api/plugins/rec/stats/timeseries")).sample_size).toBe(0);
  await sendN(s, 3, "n");
  await committed(s, "rec", 3);
  expect((await allRecords(s, "rec")).length).toBe(3);
});

test("a queue of 16 under a burst of 5 000 queries drops and counts records; every query is answered", async () => {
  const s = await start(config({ queue_size: 16, batch_size: 8, flush_interval_ms: 200 }));
  const packets = Array.from({ length: 5000 }, (_, i) => buildQuery(`q${i}.burst.test`, "A", { id: i }));
  const answers = await udpBurst(s.port("udp"), packets, { timeoutMs: 20_000, perTick: 100 });
  expect(answers.size).toBe(5000);
  await until("queue empty", async () => (await metric(s, /query_recorder_queue_records\{plugin_tag="rec"\}/)) === 0 && (await metric(s, /query_recorder_records_written_total\{plugin_tag="rec"\}/)) + (await metric(s, /query_recorder_dropped_total\{plugin_tag="rec"\}/)) === 5000);
  const written = await metric(s, /query_recorder_records_written_total\{plugin_tag="rec"\}/);
  const dropped = await metric(s, /query_recorder_dropped_total\{plugin_tag="rec"\}/);
  expect(dropped).toBeGreaterThan(0);
  expect(written).toBeGreaterThan(0);
  expect((await allRecords(s, "rec")).length).toBe(written);
});

test("a writer that crashes is replaced; records captured meanwhile are kept or counted as dropped", async () => {
  const s = await start(config({}));
  await sendN(s, 5, "c");
  await committed(s, "rec", 5);
  await crashWriter(recorder(s));
  // Until the new writer is up, a DELETE is refused with the guard's code.
  const refused = await apiJson<{ code: string }>(s, "/api/plugins/rec/records", { method: "DELETE" }, 503);
  expect(refused.code).toBe("query_recorder_unavailable");
  await sendN(s, 5, "d");
  await writerUp(s, "rec");
  await committed(s, "rec", 10);
  const actors = await apiJson<{ actors: { id: string; context: { restarts: number } }[] }>(s, "/api/actors");
  expect(actors.actors.find((a) => a.id.endsWith("/recorder:rec"))?.context.restarts).toBe(1);
  expect((await allRecords(s, "rec")).length).toBe(10);
});

test("two recorders cannot share a database file", async () => {
  await expect(
    startSluice(`plugins:
  - { tag: a, type: query_recorder, args: { path: same.db } }
  - { tag: b, type: query_recorder, args: { path: same.db } }
  - { tag: main, type: sequence, args: [{ exec: $a }, { exec: $b }] }
  - { tag: udp, type: udp_server, args: { entry: main, listen: "127.0.0.1:0" } }
`),
  ).rejects.toThrow(/already the database of query_recorder 'a'/);
});

test("a recorder needs path, postgres or both; a bad postgres section is located", async () => {
  const problems = async (args: string): Promise<string> => {
    try {
      await startSluice(`plugins:
  - { tag: rec, type: query_recorder, args: ${args} }
  - { tag: main, type: sequence, args: [{ exec: $rec }] }
`);
    } catch (err) {
      return (err as Error).message;
    }
    throw new Error(`${args} was accepted`);
  };
  const none = await problems("{ queue_size: 10 }");
  expect(none).toMatch(/missing required field 'path'/);
  expect(none).toMatch(/missing required field 'postgres'/);
  expect(await problems('{ postgres: { url: "mysql://x" } }')).toMatch(/url/);
  expect(await problems('{ postgres: { url: "postgres://x/db", schema: "Bad-Name" } }')).toMatch(/schema/);
  expect(await problems('{ postgres: { schema: "ok" } }')).toMatch(/missing required field 'url'/);
});

test("a file of schema version 2 gains the instance column: its rows read as recorded by the instance that upgraded it", async () => {
  const dir = tempDir("sluice-recorder-");
  const path = join(dir, "old.db");
  const first = await start(config({}, path));
  await sendN(first, 3, "old");
  await committed(first, "rec", 3);
  await first.stop();
  running.splice(running.indexOf(first), 1);
  // What a Sluice before version 3 left: no instance column, no version 3.
  const old = new Database(path);
  old.exec("ALTER TABLE records_v2 DROP COLUMN instance; DELETE FROM recorder_schema WHERE version = 3");
  old.close();

  const second = await start(config({}, path));
  await sendN(second, 2, "new");
  await committed(second, "rec", 5);
  const records = await allRecords(second, "rec");
  expect(records.map((r) => r.instance)).toEqual(new Array(5).fill(hostname()));
  expect((await allRecords(second, "rec", `instance=${hostname()}`)).length).toBe(5);
  const db = new Database(path, { readonly: true });
  try {
    // (4 stays listed: the file was made by this Sluice, and only version 3 was taken out of it.)
    expect(db.prepare("SELECT version FROM recorder_schema ORDER BY version").pluck().all()).toEqual([2, 3, 4]);
    expect(db.prepare("SELECT count(*) FROM pragma_table_info('records_v2') WHERE name = 'instance'").pluck().get()).toBe(1);
  } finally {
    db.close();
  }
});
