// Aggregates per minute or per hour, kept exact in the same transaction as the records they count.
// Each rollup is declared once, as the GROUP BY over raw rows that defines it; that one query fills
// it after an insert (over the new ids), rebuilds it after a deletion (over a time range), and
// computes the same aggregate from raw rows for the edges of a range that do not cover whole
// buckets, or for any request with a filter other than time (stats.ts).

import type { Database } from "better-sqlite3";

/**
 * Latency bucket of a value in µs, as SQL: the value with at most three significant digits kept
 * (exact below 1 ms, within 1 % above). Percentiles and histograms are computed from these buckets.
 */
export function latencyBucketSql(col: string): string {
  return `(CASE WHEN ${col} < 1000 THEN ${col} WHEN ${col} < 10000 THEN ${col} / 10 * 10 WHEN ${col} < 100000 THEN ${col} / 100 * 100 WHEN ${col} < 1000000 THEN ${col} / 1000 * 1000 WHEN ${col} < 10000000 THEN ${col} / 10000 * 10000 WHEN ${col} < 100000000 THEN ${col} / 100000 * 100000 ELSE ${col} / 1000000 * 1000000 END)`;
}

export const MINUTE_MS = 60_000;
export const HOUR_MS = 3_600_000;

export interface RollupValue {
  col: string;
  /** Aggregate over raw rows (a SQL expression). */
  expr: string;
  /** How two partial values combine. */
  merge: "sum" | "max";
}

export interface Rollup {
  table: string;
  bucketMs: number;
  /** Key columns besides the bucket, and the raw expressions that give them. */
  keys: readonly { col: string; expr: string }[];
  values: readonly RollupValue[];
  /** FROM clause over raw rows; the records table is `r`. */
  from: string;
  ddl: string;
}

function rollup(table: string, bucketMs: number, keys: Rollup["keys"], values: Rollup["values"], from = "records_v2 r"): Rollup {
  const cols = ["bucket INTEGER NOT NULL", ...keys.map((k) => `${k.col} INTEGER NOT NULL`), ...values.map((v) => `${v.col} INTEGER NOT NULL`)];
  const pk = ["bucket", ...keys.map((k) => k.col)].join(", ");
  return { table, bucketMs, keys, values, from, ddl: `CREATE TABLE IF NOT EXISTS ${table} (${cols.join(", ")}, PRIMARY KEY (${pk})) WITHOUT ROWID` };
}

const count: RollupValue = { col: "count", expr: "count(*)", merge: "sum" };
const elapsedSum: RollupValue = { col: "elapsed_sum_us", expr: "sum(r.elapsed_us)", merge: "sum" };
const elapsedMax: RollupValue = { col: "elapsed_max_us", expr: "max(r.elapsed_us)", merge: "max" };

export const OUTCOMES = rollup("rollup_outcomes_v2", MINUTE_MS, [{ col: "outcome", expr: "r.outcome" }, { col: "qtype", expr: "r.qtype" }], [count, elapsedSum, elapsedMax]);
export const LATENCY_MINUTES = rollup("rollup_latency_minutes_v2", MINUTE_MS, [{ col: "bucket_us", expr: latencyBucketSql("r.elapsed_us") }], [count]);
export const LATENCY_HOURS = rollup("rollup_latency_hours_v2", HOUR_MS, [{ col: "bucket_us", expr: latencyBucketSql("r.elapsed_us") }], [count]);
export const NAMES = rollup("rollup_names_v2", HOUR_MS, [{ col: "name_id", expr: "r.name_id" }], [count, elapsedSum, elapsedMax]);
export const CLIENTS = rollup("rollup_clients_v2", HOUR_MS, [{ col: "client_id", expr: "r.client_id" }], [count]);
/**
 * Schema 4: per address and client name (0: none), with the newest record's time, so top_clients
 * names each address as it was last known and `by=name` sums a client over its addresses.
 * (rollup_clients_v2 is still kept: a file opened again by an older Sluice reads it.)
 */
export const CLIENT_NAMES = rollup(
  "rollup_client_names_v2",
  HOUR_MS,
  [
    { col: "client_id", expr: "r.client_id" },
    { col: "client_name_id", expr: "coalesce(r.client_name_id, 0)" },
  ],
  [count, { col: "last_ms", expr: "max(r.created_at_ms)", merge: "max" }],
);
/** Per plugin: matcher checks and matches, executor runs (entered) and builtins, and the records that touched it. */
export const PLUGINS = rollup(
  "rollup_plugins_v2",
  MINUTE_MS,
  [
    { col: "kind", expr: "s.kind" },
    { col: "tag", expr: "s.tag" },
  ],
  [
    { col: "checked", expr: "sum(s.kind = 0)", merge: "sum" },
    { col: "matched", expr: "sum(s.kind = 0 AND s.outcome = 0)", merge: "sum" },
    { col: "executed", expr: "sum((s.kind = 1 AND s.outcome = 2) OR s.kind = 2)", merge: "sum" },
    { col: "queries", expr: "count(DISTINCT s.record_id)", merge: "sum" },
  ],
  "records_v2 r CROSS JOIN steps_v2 s ON s.record_id = r.id",
);

/** The rollups of schema version 2 (its migration creates them). */
export const V2_ROLLUPS: readonly Rollup[] = [OUTCOMES, LATENCY_MINUTES, LATENCY_HOURS, NAMES, CLIENTS, PLUGINS];
/** Every rollup the writer keeps. */
export const ROLLUPS: readonly Rollup[] = [...V2_ROLLUPS, CLIENT_NAMES];

/** The defining aggregate over raw rows that satisfy `where` (on `r`), grouped by bucket and keys. */
export function rawSelect(r: Rollup, where: string): string {
  const keys = r.keys.map((k) => `${k.expr} AS ${k.col}`);
  const groups = ["bucket", ...r.keys.map((k) => k.col)].join(", ");
  return `SELECT r.created_at_ms / ${r.bucketMs} AS bucket, ${[...keys, ...r.values.map((v) => `${v.expr} AS ${v.col}`)].join(", ")} FROM ${r.from} WHERE ${where} GROUP BY ${groups}`;
}

const columns = (r: Rollup): string => ["bucket", ...r.keys.map((k) => k.col), ...r.values.map((v) => v.col)].join(", ");

/** Fills a rollup (emptied first) from every record: a migration that adds one, or a rollup found out of step. */
export function rebuildRollup(db: Database, r: Rollup): void {
  db.exec(`DELETE FROM ${r.table}`);
  db.exec(`INSERT INTO ${r.table} (${columns(r)}) ${rawSelect(r, "1")}`);
}

/** Prepared statements that keep the rollups in step with the records (writer only). */
export class RollupMaintainer {
  private readonly add: { run(from: number, to: number): unknown }[];
  private readonly rebuild: { del: { run(a: number, b: number): unknown }; ins: { run(from: number, to: number): unknown }; r: Rollup }[];
  private readonly dropBelow: { run(bucket: number): unknown }[];

  constructor(db: Database) {
    this.add = ROLLUPS.map((r) => {
      const merge = r.values.map((v) => (v.merge === "sum" ? `${v.col} = ${v.col} + excluded.${v.col}` : `${v.col} = max(${v.col}, excluded.${v.col})`)).join(", ");
      const conflict = ["bucket", ...r.keys.map((k) => k.col)].join(", ");
      const stmt = db.prepare(`INSERT INTO ${r.table} (${columns(r)}) ${rawSelect(r, "r.id BETWEEN ? AND ?")} ON CONFLICT (${conflict}) DO UPDATE SET ${merge}`);
      return { run: (from: number, to: number) => stmt.run(from, to) };
    });
    this.rebuild = ROLLUPS.map((r) => {
      const del = db.prepare(`DELETE FROM ${r.table} WHERE bucket BETWEEN ? AND ?`);
      const ins = db.prepare(`INSERT INTO ${r.table} (${columns(r)}) ${rawSelect(r, "r.created_at_ms BETWEEN ? AND ?")}`);
      return { del, ins, r };
    });
    this.dropBelow = ROLLUPS.map((r) => db.prepare(`DELETE FROM ${r.table} WHERE bucket < ?`));
  }

  /** Adds the records with ids from..to (just inserted) to every rollup. */
  added(from: number, to: number): void {
    for (const a of this.add) a.run(from, to);
  }

  /**
   * After every record created before `t` (and some at `t`) was deleted: drops the buckets that are
   * now empty and recounts the one holding `t` from the records left in it.
   */
  deletedThrough(t: number): void {
    ROLLUPS.forEach((r, i) => {
      const bucket = Math.floor(t / r.bucketMs);
      this.dropBelow[i].run(bucket);
      const { del, ins } = this.rebuild[i];
      del.run(bucket, bucket);
      ins.run(bucket * r.bucketMs, (bucket + 1) * r.bucketMs - 1);
    });
  }
}
