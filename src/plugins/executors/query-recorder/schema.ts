// The recorder's SQLite schema, generation 2. Every table name carries the generation; a newer
// generation adds its own tables (and may copy from older ones) but never alters or drops an older
// generation's, so a file written by an older Sluice stays readable by it. `recorder_schema` (not
// versioned) lists the generations a file holds. Version 3 only adds a column to records_v2
// (`instance`, the Sluice instance that recorded the row): an older Sluice's inserts name their
// columns, so it keeps writing and reading the same tables. Version 4 adds the client's name and
// group set (nullable columns an older Sluice leaves NULL), their dictionaries, a rollup per address
// and name, and those columns to the time index (rebuilt once, under the same name).
//
// Layout, chosen for writes that stay sequential and reads that never scan more than they count:
//  - records_v2: one row per query. Text that repeats (names, client addresses, tags) is stored once
//    in a dictionary and referenced by id; the first question's name and type are on the row.
//    Request and response are kept as wire bytes and turned into JSON when read.
//  - client_names_v2, group_sets_v2 (the groups, comma-separated in the provider's order) and
//    group_members_v2 (group name → the sets holding it): `client_name=` and `group=` become a test
//    of one column of the time index against the ids one indexed lookup finds.
//  - records_v2_time: (created_at_ms, id, ...every column a filter tests): paging, time ranges and
//    any combination of filters read this index alone, in time order, and it grows at its end.
//  - questions_v2: every question of a record; steps_v2: every execution-path event.
//  - rollups (see rollups.ts): per-minute and per-hour aggregates kept in the same transaction as the
//    records, so statistics over a whole range read thousands of rows, not millions.

import type { Database } from "better-sqlite3";
import { CLIENT_NAMES, CLIENTS, rebuildRollup, ROLLUPS, V2_ROLLUPS } from "./rollups.js";

export const SCHEMA_VERSION = 4;

/** Outcome codes in records_v2.outcome: the rcode (0..4095) when there is a response, else these. */
export const OUTCOME_ERROR = -1;
export const OUTCOME_NO_RESPONSE = -2;

const V2 = `
CREATE TABLE IF NOT EXISTS names_v2 (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);
CREATE TABLE IF NOT EXISTS clients_v2 (id INTEGER PRIMARY KEY, ip TEXT NOT NULL UNIQUE);
CREATE TABLE IF NOT EXISTS tags_v2 (id INTEGER PRIMARY KEY, tag TEXT NOT NULL UNIQUE);
CREATE TABLE IF NOT EXISTS records_v2 (
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
CREATE INDEX IF NOT EXISTS records_v2_time ON records_v2 (created_at_ms, id, outcome, qtype, client_id, name_id, elapsed_us, question_count);
CREATE TABLE IF NOT EXISTS questions_v2 (
  record_id INTEGER NOT NULL,
  question_index INTEGER NOT NULL,
  name_id INTEGER NOT NULL,
  qtype INTEGER NOT NULL,
  qclass INTEGER NOT NULL,
  PRIMARY KEY (record_id, question_index)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS steps_v2 (
  record_id INTEGER NOT NULL,
  event_index INTEGER NOT NULL,
  sequence_tag INTEGER NOT NULL,
  node_index INTEGER,
  kind INTEGER NOT NULL,
  tag INTEGER NOT NULL,
  outcome INTEGER NOT NULL,
  PRIMARY KEY (record_id, event_index)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS steps_v2_matched ON steps_v2 (tag, record_id) WHERE kind = 0 AND outcome = 0;
`;

const V4 = `
CREATE TABLE IF NOT EXISTS client_names_v2 (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);
CREATE TABLE IF NOT EXISTS group_sets_v2 (id INTEGER PRIMARY KEY, groups TEXT NOT NULL UNIQUE);
CREATE TABLE IF NOT EXISTS group_members_v2 (group_name TEXT NOT NULL, set_id INTEGER NOT NULL, PRIMARY KEY (group_name, set_id)) WITHOUT ROWID;
ALTER TABLE records_v2 ADD COLUMN client_name_id INTEGER;
ALTER TABLE records_v2 ADD COLUMN group_set_id INTEGER;
DROP INDEX IF EXISTS records_v2_time;
CREATE INDEX records_v2_time ON records_v2 (created_at_ms, id, outcome, qtype, client_id, name_id, elapsed_us, question_count, client_name_id, group_set_id);
${CLIENT_NAMES.ddl};
`;

interface Migration {
  version: number;
  /** `instance`: the name of the Sluice that migrates the file. */
  up(db: Database, instance: string): void;
}

const sqlText = (s: string): string => `'${s.replace(/'/g, "''")}'`;

const MIGRATIONS: Migration[] = [
  {
    version: 2,
    up(db) {
      db.exec(V2);
      for (const r of V2_ROLLUPS) db.exec(r.ddl);
    },
  },
  {
    version: 3,
    // A constant default costs nothing (no row is rewritten): rows recorded before the upgrade read
    // as recorded by the instance that upgraded the file, the only one that wrote it.
    up(db, instance) {
      db.exec(`ALTER TABLE records_v2 ADD COLUMN instance TEXT NOT NULL DEFAULT ${sqlText(instance)}`);
    },
  },
  {
    version: 4,
    // Records from before read as from no named client in no group. The index is built again over
    // every row (a few seconds per million records, once); the new rollup is filled from the records.
    up(db) {
      db.exec(V4);
      rebuildRollup(db, CLIENT_NAMES);
    },
  },
];

/** Connection settings of the writer: WAL, and fsync only at checkpoints (a crash loses at most the last commits). */
export function configureWriter(db: Database, cacheMb: number): void {
  // auto_vacuum only takes effect before the first table exists (a new file).
  db.pragma("auto_vacuum = INCREMENTAL");
  db.pragma("journal_mode = WAL");
  db.pragma("synchronous = NORMAL");
  db.pragma(`cache_size = ${-cacheMb * 1024}`);
  db.pragma("busy_timeout = 5000");
  db.pragma("temp_store = MEMORY");
}

export function configureReader(db: Database, cacheMb: number): void {
  db.pragma(`cache_size = ${-cacheMb * 1024}`);
  db.pragma("busy_timeout = 5000");
  db.pragma("temp_store = MEMORY");
}

/** Creates or upgrades this file's tables to the current generation; older generations are left as they are. */
export function migrate(db: Database, instance: string): void {
  db.exec("CREATE TABLE IF NOT EXISTS recorder_schema (version INTEGER PRIMARY KEY, created_at_ms INTEGER NOT NULL)");
  const have = new Set((db.prepare("SELECT version FROM recorder_schema").pluck().all() as number[]).map(Number));
  const apply = db.transaction(() => {
    for (const m of MIGRATIONS) {
      if (have.has(m.version)) continue;
      m.up(db, instance);
      db.prepare("INSERT INTO recorder_schema (version, created_at_ms) VALUES (?, ?)").run(m.version, Date.now());
    }
  });
  apply.immediate();
}

/** True when the file holds this generation's tables (a reader checks before querying). */
export function hasCurrentSchema(db: Database): boolean {
  const row = db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'recorder_schema'").get();
  if (!row) return false;
  return db.prepare("SELECT 1 FROM recorder_schema WHERE version = ?").get(SCHEMA_VERSION) !== undefined;
}

/**
 * A file written meanwhile by a Sluice of schema 3 (a rollback) has records the newer rollup did
 * not count: it is filled again when its total differs from the older per-address rollup's.
 */
export function repairRollups(db: Database): void {
  const total = (table: string): number => Number(db.prepare(`SELECT coalesce(sum(count), 0) FROM ${table}`).pluck().get());
  if (total(CLIENT_NAMES.table) !== total(CLIENTS.table)) db.transaction(() => rebuildRollup(db, CLIENT_NAMES)).immediate();
}

/** Tables of the current generation cleared by DELETE records (dictionaries of tags are kept). */
export const CLEARED_TABLES = ["records_v2", "questions_v2", "steps_v2", "names_v2", "clients_v2", "client_names_v2", "group_sets_v2", "group_members_v2", ...ROLLUPS.map((r) => r.table)];
