// Client names and groups in the query recorder's SQLite store (issue 26): the scenario of
// recorder-clients-scenario.ts (records, client_name= and group= filters, top_clients by address and
// by name from the rollups and from the records, the stream, a rename by reload); a file of the
// previous schema (3) upgraded in place, its records without a name or groups, and the filters
// going through the time index; a file written by a schema-3 Sluice after the upgrade (a rollback)
// gets the per-name rollup filled again.
import Database from "better-sqlite3";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { filterSql, parseFilter } from "../../src/plugins/executors/query-recorder/filters.js";
import { RecorderStore } from "../../src/plugins/executors/query-recorder/store.js";
import { buildQuery } from "../helpers/dns.js";
import { startSluice, tempDir, type RunningSluice } from "../helpers/sluice.js";
import { allRecords, apiJson, committed } from "./recorder-helpers.js";
import { askFrom, checkNamesAndGroups, checkRename, checkStream, clientsConfig, sendTraffic } from "./recorder-clients-scenario.js";

const STORE = "path: rec.db";

describe("names and groups in SQLite", () => {
  let s: RunningSluice;
  beforeAll(async () => {
    s = await startSluice(clientsConfig(STORE));
  });
  afterAll(() => s?.stop());

  test("records carry the client's name and groups; records and stats filter by them; top_clients names the clients", async () => {
    await sendTraffic(s);
    await checkNamesAndGroups(s);
  });

  test("the stream carries them", () => checkStream(s));

  test("a renamed client: its records keep the name they had, top_clients names its address as last known", () => checkRename(s, STORE));
});

/** The tables of schema 3 as that Sluice made them (schema.ts and rollups.ts before schema 4). */
const SCHEMA_3 = `
CREATE TABLE recorder_schema (version INTEGER PRIMARY KEY, created_at_ms INTEGER NOT NULL);
CREATE TABLE names_v2 (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);
CREATE TABLE clients_v2 (id INTEGER PRIMARY KEY, ip TEXT NOT NULL UNIQUE);
CREATE TABLE tags_v2 (id INTEGER PRIMARY KEY, tag TEXT NOT NULL UNIQUE);
CREATE TABLE records_v2 (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  created_at_ms INTEGER NOT NULL,
  elapsed_us INTEGER NOT NULL,
  client_id INTEGER NOT NULL,
  name_id INTEGER NOT NULL,
  qtype INTEGER NOT NULL,
  question_count INTEGER NOT NULL,
  outcome INTEGER NOT NULL,
  error TEXT,
  query BLOB NOT NULL,
  response BLOB
);
CREATE INDEX records_v2_time ON records_v2 (created_at_ms, id, outcome, qtype, client_id, name_id, elapsed_us, question_count);
CREATE TABLE questions_v2 (record_id INTEGER NOT NULL, question_index INTEGER NOT NULL, name_id INTEGER NOT NULL, qtype INTEGER NOT NULL, qclass INTEGER NOT NULL, PRIMARY KEY (record_id, question_index)) WITHOUT ROWID;
CREATE TABLE steps_v2 (record_id INTEGER NOT NULL, event_index INTEGER NOT NULL, sequence_tag INTEGER NOT NULL, node_index INTEGER, kind INTEGER NOT NULL, tag INTEGER NOT NULL, outcome INTEGER NOT NULL, PRIMARY KEY (record_id, event_index)) WITHOUT ROWID;
CREATE INDEX steps_v2_matched ON steps_v2 (tag, record_id) WHERE kind = 0 AND outcome = 0;
CREATE TABLE rollup_outcomes_v2 (bucket INTEGER NOT NULL, outcome INTEGER NOT NULL, qtype INTEGER NOT NULL, count INTEGER NOT NULL, elapsed_sum_us INTEGER NOT NULL, elapsed_max_us INTEGER NOT NULL, PRIMARY KEY (bucket, outcome, qtype)) WITHOUT ROWID;
CREATE TABLE rollup_latency_minutes_v2 (bucket INTEGER NOT NULL, bucket_us INTEGER NOT NULL, count INTEGER NOT NULL, PRIMARY KEY (bucket, bucket_us)) WITHOUT ROWID;
CREATE TABLE rollup_latency_hours_v2 (bucket INTEGER NOT NULL, bucket_us INTEGER NOT NULL, count INTEGER NOT NULL, PRIMARY KEY (bucket, bucket_us)) WITHOUT ROWID;
CREATE TABLE rollup_names_v2 (bucket INTEGER NOT NULL, name_id INTEGER NOT NULL, count INTEGER NOT NULL, elapsed_sum_us INTEGER NOT NULL, elapsed_max_us INTEGER NOT NULL, PRIMARY KEY (bucket, name_id)) WITHOUT ROWID;
CREATE TABLE rollup_clients_v2 (bucket INTEGER NOT NULL, client_id INTEGER NOT NULL, count INTEGER NOT NULL, PRIMARY KEY (bucket, client_id)) WITHOUT ROWID;
CREATE TABLE rollup_plugins_v2 (bucket INTEGER NOT NULL, kind INTEGER NOT NULL, tag INTEGER NOT NULL, checked INTEGER NOT NULL, matched INTEGER NOT NULL, executed INTEGER NOT NULL, queries INTEGER NOT NULL, PRIMARY KEY (bucket, kind, tag)) WITHOUT ROWID;
ALTER TABLE records_v2 ADD COLUMN instance TEXT NOT NULL DEFAULT 'old-host';
INSERT INTO recorder_schema (version, created_at_ms) VALUES (2, 0), (3, 0);
`;

/** The rollups as schema 3 kept them, for records of under 1 ms without steps (the fixture's). */
const FILL_ROLLUPS_3 = `
INSERT INTO rollup_outcomes_v2 SELECT created_at_ms / 60000, outcome, qtype, count(*), sum(elapsed_us), max(elapsed_us) FROM records_v2 GROUP BY 1, 2, 3;
INSERT INTO rollup_latency_minutes_v2 SELECT created_at_ms / 60000, elapsed_us, count(*) FROM records_v2 GROUP BY 1, 2;
INSERT INTO rollup_latency_hours_v2 SELECT created_at_ms / 3600000, elapsed_us, count(*) FROM records_v2 GROUP BY 1, 2;
INSERT INTO rollup_names_v2 SELECT created_at_ms / 3600000, name_id, count(*), sum(elapsed_us), max(elapsed_us) FROM records_v2 GROUP BY 1, 2;
INSERT INTO rollup_clients_v2 SELECT created_at_ms / 3600000, client_id, count(*) FROM records_v2 GROUP BY 1, 2;
`;

/** A schema-3 file with one record from 127.0.0.9 and one from 127.0.0.2 (an address annas-phone has now), an hour old. */
function schema3File(path: string): void {
  const db = new Database(path);
  try {
    db.exec(SCHEMA_3);
    const at = Date.now() - 3_600_000;
    db.exec("INSERT INTO names_v2 (id, name) VALUES (1, 'old.clients.test.'); INSERT INTO clients_v2 (id, ip) VALUES (1, '127.0.0.9'), (2, '127.0.0.2')");
    const ins = db.prepare("INSERT INTO records_v2 (created_at_ms, elapsed_us, client_id, name_id, qtype, question_count, outcome, error, query, response, instance) VALUES (?, 500, ?, 1, 1, 1, -2, NULL, ?, NULL, 'old-host')");
    for (const [i, client] of [1, 2].entries()) {
      const id = Number(ins.run(at + i, client, buildQuery("old.clients.test", "A")).lastInsertRowid);
      db.prepare("INSERT INTO questions_v2 VALUES (?, 0, 1, 1, 1)").run(id);
    }
    db.exec(FILL_ROLLUPS_3);
  } finally {
    db.close();
  }
}

describe("a file of schema 3", () => {
  let s: RunningSluice;
  beforeAll(async () => {
    const dir = tempDir("sluice-schema3-");
    schema3File(join(dir, "old.db"));
    s = await startSluice(clientsConfig("path: old.db"), { "old.db": readFileSync(join(dir, "old.db")) });
  });
  afterAll(() => s?.stop());

  test("is upgraded in place: old records have no name and no groups, new ones have them, and both count", async () => {
    const old = await allRecords(s, "rec");
    expect(old.map((r) => [r.client_ip, r.client_name, r.client_groups, r.instance, r.questions_json[0].name])).toEqual([
      ["127.0.0.2", null, [], "old-host", "old.clients.test."],
      ["127.0.0.9", null, [], "old-host", "old.clients.test."],
    ]);
    expect(await askFrom("127.0.0.2", s.port("udp"), "new.clients.test")).toBe(0);
    await committed(s, "rec", 3);
    expect((await allRecords(s, "rec", "client_name=annas-phone")).map((r) => [r.client_ip, r.client_groups, r.questions_json[0].name])).toEqual([["127.0.0.2", ["kids"], "new.clients.test."]]);
    expect(await allRecords(s, "rec", "group=kids")).toHaveLength(1);

    // The per-name rollup was filled from the old records: the rollups' answer and the records' agree.
    const byIp = [
      { key: "127.0.0.2", count: 2, share: 2 / 3, client_ip: "127.0.0.2", client_name: "annas-phone" },
      { key: "127.0.0.9", count: 1, share: 1 / 3, client_ip: "127.0.0.9", client_name: null },
    ];
    expect((await apiJson<{ rows: unknown[] }>(s, "/api/plugins/rec/stats/top_clients")).rows).toEqual(byIp);
    expect((await apiJson<{ rows: unknown[] }>(s, "/api/plugins/rec/stats/top_clients?qtype=A")).rows).toEqual(byIp);
    expect((await apiJson<{ rows: { key: string; count: number }[] }>(s, "/api/plugins/rec/stats/top_clients?by=name")).rows.map((r) => [r.key, r.count])).toEqual([
      ["127.0.0.2", 1],
      ["127.0.0.9", 1],
      ["annas-phone", 1],
    ]);

    const db = new Database(join(s.dir, "old.db"), { readonly: true });
    try {
      expect(db.prepare("SELECT version FROM recorder_schema ORDER BY version").pluck().all()).toEqual([2, 3, 4]);
      expect(db.prepare("SELECT name FROM pragma_index_info('records_v2_time') ORDER BY seqno").pluck().all()).toEqual([
        "created_at_ms", "id", "outcome", "qtype", "client_id", "name_id", "elapsed_us", "question_count", "client_name_id", "group_set_id",
      ]);
      // A page filtered by name and group reads the time index alone, and finds the ids through their dictionaries' keys.
      const f = filterSql(parseFilter({ client_name: "annas-phone", group: "kids" }));
      const plan = (db.prepare(`EXPLAIN QUERY PLAN SELECT r.id, r.created_at_ms FROM records_v2 r INDEXED BY records_v2_time WHERE r.created_at_ms BETWEEN 0 AND 9e15 AND ${f.sql} ORDER BY r.created_at_ms DESC, r.id DESC LIMIT 10`).all(...f.params) as { detail: string }[]).map((p) => p.detail);
      expect(plan).toContainEqual(expect.stringMatching(/^SEARCH r USING COVERING INDEX records_v2_time/));
      expect(plan).toContainEqual(expect.stringMatching(/^SEARCH client_names_v2 USING COVERING INDEX sqlite_autoindex_client_names_v2_1 \(name=\?\)/));
      expect(plan).toContainEqual(expect.stringMatching(/^SEARCH group_members_v2 USING PRIMARY KEY \(group_name=\?\)/));
    } finally {
      db.close();
    }
  });
});

test("records written by a schema-3 Sluice after the upgrade (a rollback) are counted again in the per-name rollup at the next start", () => {
  const path = join(tempDir("sluice-rollback-"), "rec.db");
  const options = { path, instance: "a", memoryTail: 4, maxRecords: 0, retentionMs: 86_400_000, cacheMb: 4 };
  const record = { createdAtMs: Date.now(), elapsedUs: 100, query: buildQuery("x.test", "A"), response: null, clientIp: "127.0.0.5", error: null, steps: [] };
  let store = new RecorderStore(options);
  store.insert([{ ...record, clientName: "annas-phone", clientGroups: ["kids"] }]);
  store.close();
  // What schema 3 writes: its own columns, its own rollups.
  const db = new Database(path);
  db.prepare("INSERT INTO records_v2 (created_at_ms, elapsed_us, client_id, name_id, qtype, question_count, outcome, error, query, response, instance) VALUES (?, 100, 1, 1, 1, 1, -2, NULL, ?, NULL, 'a')").run(record.createdAtMs + 1, record.query);
  db.exec("UPDATE rollup_clients_v2 SET count = count + 1");
  const rollup = (): unknown[] => db.prepare("SELECT client_name_id, count FROM rollup_client_names_v2 ORDER BY client_name_id").raw().all();
  expect(rollup()).toEqual([[1, 1]]);
  db.close();
  store = new RecorderStore(options);
  store.close();
  const after = new Database(path, { readonly: true });
  try {
    expect(after.prepare("SELECT client_name_id, count FROM rollup_client_names_v2 ORDER BY client_name_id").raw().all()).toEqual([
      [0, 1],
      [1, 1],
    ]);
  } finally {
    after.close();
  }
});
