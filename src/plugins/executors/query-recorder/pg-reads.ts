// The records and stats routes against the PostgreSQL store, as a reader process runs them: the same
// filters (filters.ts) translated to SQL over `records_v1`, the same response bodies (the shape
// builders of stats.ts and json.ts). Every statement is bounded by the connection's
// statement_timeout; pages and top lists by LIMIT.

import type pg from "pg";
import { typeName } from "../../../dns/constants.js";
import { RouteError } from "../../../registry/control.js";
import type { Filter, PluginKind, ReadRequest, TopClientsBy } from "./filters.js";
import { outcomeKey, recordDetail, recordFields, type RawRecord, type RawStep } from "./json.js";
import { pgNames, type PgStep } from "./pg-schema.js";
import { latencyBucketSql } from "./rollups.js";
import { OUTCOME_ERROR, OUTCOME_NO_RESPONSE } from "./schema.js";
import { byCount, KIND_CODE, latencyBody, pluginsBody, timeseriesBody, timeseriesWindow, type TopClientRow } from "./stats.js";

type Db = pg.Client;

/** Numbered parameters of one statement. */
class Params {
  readonly values: unknown[] = [];
  add(v: unknown): string {
    this.values.push(v);
    return `$${this.values.length}`;
  }
}

const like = (s: string): string => `%${s.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;

/** The WHERE clause (on the records table as `r`) for every filter, time included, within `window` when given. */
function pgWhere(f: Filter, p: Params, window?: [number, number]): string {
  const conds: string[] = [];
  const lo = Math.max(window?.[0] ?? 0, f.sinceMs ?? 0);
  const hi = Math.min(window?.[1] ?? Number.MAX_SAFE_INTEGER, f.untilMs ?? Number.MAX_SAFE_INTEGER);
  conds.push(`r.created_at_ms BETWEEN ${p.add(lo)} AND ${p.add(hi)}`);
  if (f.qname !== null) {
    conds.push(`r.qname LIKE ${p.add(like(f.qname))}`);
  }
  if (f.clientIp !== null) conds.push(`r.client_ip ILIKE ${p.add(like(f.clientIp))}`);
  if (f.qtype !== null) conds.push(`r.qtype = ${p.add(f.qtype)}`);
  if (f.outcome !== null) conds.push(`r.outcome = ${p.add(f.outcome)}`);
  if (f.status === "error") conds.push(`r.outcome = ${OUTCOME_ERROR}`);
  else if (f.status === "has_response") conds.push("r.outcome >= 0");
  else if (f.status === "no_response") conds.push(`r.outcome = ${OUTCOME_NO_RESPONSE}`);
  if (f.matcherTag !== null) conds.push(`r.steps @> ${p.add(JSON.stringify([{ k: 0, o: 0, t: f.matcherTag }]))}::jsonb`);
  if (f.instance !== null) conds.push(`r.instance = ${p.add(f.instance)}`);
  if (f.clientName !== null) conds.push(`r.client_name = ${p.add(f.clientName)}`);
  // Containment, so the GIN index on client_groups can answer.
  if (f.group !== null) conds.push(`r.client_groups @> ARRAY[${p.add(f.group)}::text]`);
  return conds.join(" AND ");
}

interface RecordRow {
  id: string;
  created_at_ms: string;
  elapsed_us: string;
  client_ip: string;
  client_name: string | null;
  client_groups: string[];
  instance: string;
  outcome: number;
  error: string | null;
  query: Buffer;
  response: Buffer | null;
  steps: PgStep[];
}

const ROW_COLUMNS = "r.id, r.created_at_ms, r.elapsed_us, r.client_ip, r.client_name, r.client_groups, r.instance, r.outcome, r.error, r.query, r.response";

export function rawRecord(row: RecordRow): RawRecord {
  return {
    id: Number(row.id),
    createdAtMs: Number(row.created_at_ms),
    elapsedUs: Number(row.elapsed_us),
    clientIp: row.client_ip,
    clientName: row.client_name,
    clientGroups: row.client_groups,
    instance: row.instance,
    outcome: row.outcome,
    error: row.error,
    query: row.query,
    response: row.response,
  };
}

export function rawSteps(steps: PgStep[]): RawStep[] {
  return steps.map((s) => ({ sequenceTag: s.s, nodeIndex: s.n, kind: s.k, tag: s.t, outcome: s.o }));
}

/** Newest records with ids in (after, through], at most `limit`, oldest first, with their steps (the stream). */
export async function pgRecordsAfter(db: Db, schema: string, after: number, through: number | null, limit: number): Promise<{ record: RawRecord; steps: RawStep[] }[]> {
  const t = pgNames(schema).records;
  const res = await db.query<RecordRow>(`SELECT ${ROW_COLUMNS}, r.steps FROM ${t} r WHERE r.id > $1 ${through === null ? "" : "AND r.id <= $3"} ORDER BY r.id ${through === null ? "ASC" : "DESC"} LIMIT $2`, through === null ? [after, limit] : [after, limit, through]);
  const rows = through === null ? res.rows : res.rows.reverse();
  return rows.map((row) => ({ record: rawRecord(row), steps: rawSteps(row.steps) }));
}

async function recordsPage(db: Db, t: string, f: Filter, cursor: { createdAtMs: number; id: number } | null, limit: number): Promise<object> {
  const p = new Params();
  let where = pgWhere(f, p);
  if (cursor) where += ` AND (r.created_at_ms, r.id) < (${p.add(cursor.createdAtMs)}, ${p.add(cursor.id)})`;
  const res = await db.query<RecordRow>(`SELECT ${ROW_COLUMNS} FROM ${t} r WHERE ${where} ORDER BY r.created_at_ms DESC, r.id DESC LIMIT ${p.add(limit + 1)}`, p.values);
  const more = res.rows.length > limit;
  const page = res.rows.slice(0, limit);
  const last = page[page.length - 1];
  return { ok: true, next_cursor: more && last ? `${last.created_at_ms}:${last.id}` : null, records: page.map((row) => recordFields(rawRecord(row))) };
}

async function recordById(db: Db, t: string, id: number): Promise<object> {
  const res = await db.query<RecordRow>(`SELECT ${ROW_COLUMNS}, r.steps FROM ${t} r WHERE r.id = $1`, [id]);
  const row = res.rows[0];
  if (!row) throw new RouteError("record_not_found", `record ${id} does not exist`);
  return { ok: true, record: recordDetail(rawRecord(row), rawSteps(row.steps)) };
}

/** Rows of `sql` as arrays of numbers (aggregates come back as text from bigint and numeric). */
async function numbers(db: Db, sql: string, values: unknown[]): Promise<number[][]> {
  const res = await db.query<unknown[]>({ text: sql, values, rowMode: "array" });
  return res.rows.map((r) => r.map((v) => Number(v ?? 0)));
}

async function count(db: Db, t: string, f: Filter): Promise<number> {
  const p = new Params();
  return (await numbers(db, `SELECT count(*) FROM ${t} r WHERE ${pgWhere(f, p)}`, p.values))[0][0];
}

async function distribution(db: Db, t: string, f: Filter, what: "rcode" | "qtype"): Promise<object> {
  const col = what === "rcode" ? "outcome" : "qtype";
  const p = new Params();
  const rows = (await numbers(db, `SELECT r.${col}, count(*) FROM ${t} r WHERE ${pgWhere(f, p)} GROUP BY 1`, p.values)).map(([k, n]) => ({ key: what === "rcode" ? outcomeKey(k) : typeName(k), count: n }));
  const total = rows.reduce((n, r) => n + r.count, 0);
  return { ok: true, sample_size: total, rows: byCount(rows, total, rows.length) };
}

async function topNames(db: Db, t: string, f: Filter, limit: number): Promise<object> {
  const p = new Params();
  const res = await db.query<{ key: string; n: string }>(`SELECT r.qname AS key, count(*) AS n FROM ${t} r WHERE ${pgWhere(f, p)} GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT ${p.add(limit)}`, p.values);
  const total = await count(db, t, f);
  return { ok: true, sample_size: total, rows: byCount(res.rows.map((r) => ({ key: r.key, count: Number(r.n) })), total, limit) };
}

/** stats/top_clients, as stats.ts topClients: pairs (address, name) with their newest record, then grouped by address or by name. */
async function topClients(db: Db, t: string, f: Filter, by: TopClientsBy, limit: number): Promise<object> {
  const p = new Params();
  const pairs = `SELECT r.client_ip, r.client_name, count(*) AS n, max(r.created_at_ms) AS last FROM ${t} r WHERE ${pgWhere(f, p)} GROUP BY 1, 2`;
  // The newest pair of a row gives its name (by ip) or its address (by name).
  const newest = (col: string): string => `(array_agg(x.${col} ORDER BY x.last DESC, x.client_name DESC NULLS LAST))[1]`;
  const group = by === "ip" ? "x.client_ip" : "x.client_name, CASE WHEN x.client_name IS NULL THEN x.client_ip END";
  const res = await db.query<{ ip: string; name: string | null; n: string }>(
    `SELECT ${by === "ip" ? "x.client_ip" : newest("client_ip")} AS ip, ${by === "ip" ? newest("client_name") : "x.client_name"} AS name, sum(x.n) AS n FROM (${pairs}) x GROUP BY ${group} ORDER BY 3 DESC, ${by === "ip" ? "1" : "coalesce(x.client_name, min(x.client_ip))"} LIMIT ${p.add(limit)}`,
    p.values,
  );
  const total = await count(db, t, f);
  const rows = res.rows.map((r): TopClientRow => ({ key: by === "name" ? (r.name ?? r.ip) : r.ip, count: Number(r.n), client_ip: r.ip, client_name: r.name }));
  return { ok: true, sample_size: total, rows: byCount(rows, total, limit) };
}

async function latency(db: Db, t: string, f: Filter, slowLimit: number): Promise<object> {
  const p = new Params();
  const where = pgWhere(f, p);
  const [n, sumUs, maxUs] = (await numbers(db, `SELECT count(*), sum(r.elapsed_us), max(r.elapsed_us) FROM ${t} r WHERE ${where}`, p.values))[0];
  const hist = (await numbers(db, `SELECT ${latencyBucketSql("r.elapsed_us")}, count(*) FROM ${t} r WHERE ${where} GROUP BY 1`, p.values)).map(([b, c]): [number, number] => [b, c]);
  const slow = await db.query<{ qname: string; n: string; avg: string; max: string }>(
    `SELECT r.qname, count(*) AS n, avg(r.elapsed_us) AS avg, max(r.elapsed_us) AS max FROM ${t} r WHERE ${where} GROUP BY 1 ORDER BY 3 DESC, 2 DESC, 1 LIMIT ${p.add(slowLimit)}`,
    p.values,
  );
  return latencyBody(n, sumUs, maxUs, hist, slow.rows.map((r) => ({ qname: r.qname, count: Number(r.n), avgUs: Number(r.avg), maxUs: Number(r.max) })));
}

async function plugins(db: Db, t: string, f: Filter, kind: PluginKind): Promise<object> {
  const p = new Params();
  const where = pgWhere(f, p) + (kind === "all" ? "" : ` AND s.k = ${KIND_CODE[kind]}`);
  const res = await db.query<unknown[]>({
    text: `SELECT s.k, s.t, count(*) FILTER (WHERE s.k = 0), count(*) FILTER (WHERE s.k = 0 AND s.o = 0), count(*) FILTER (WHERE (s.k = 1 AND s.o = 2) OR s.k = 2), count(DISTINCT r.id)
      FROM ${t} r CROSS JOIN LATERAL jsonb_to_recordset(r.steps) AS s(k integer, t text, o integer) WHERE ${where} GROUP BY 1, 2`,
    values: p.values,
    rowMode: "array",
  });
  const rows = res.rows.map((r): [number, string, number, number, number, number] => [Number(r[0]), String(r[1]), Number(r[2]), Number(r[3]), Number(r[4]), Number(r[5])]);
  return pluginsBody(rows, await count(db, t, f));
}

async function timeseries(db: Db, t: string, f: Filter, bucketMs: number, buckets: number, nowMs: number): Promise<object> {
  const { first, window } = timeseriesWindow(f, bucketMs, buckets, nowMs);
  const p = new Params();
  const where = pgWhere(f, p, window);
  const point = `r.created_at_ms / ${bucketMs}`;
  const counts = await numbers(db, `SELECT ${point}, r.outcome, count(*), sum(r.elapsed_us) FROM ${t} r WHERE ${where} GROUP BY 1, 2`, p.values);
  const hist = await numbers(db, `SELECT ${point}, ${latencyBucketSql("r.elapsed_us")}, count(*) FROM ${t} r WHERE ${where} GROUP BY 1, 2`, p.values);
  return timeseriesBody(first, buckets, bucketMs, counts, hist);
}

/** The response body of one read request. */
export function pgAnswer(db: Db, schema: string, req: ReadRequest): Promise<object> {
  const t = pgNames(schema).records;
  switch (req.op) {
    case "records":
      return recordsPage(db, t, req.filter, req.cursor, req.limit);
    case "record":
      return recordById(db, t, req.id);
    case "stats":
      switch (req.stat) {
        case "plugins":
          return plugins(db, t, req.filter, req.kind);
        case "top_clients":
          return topClients(db, t, req.filter, req.by, req.limit);
        case "top_qnames":
          return topNames(db, t, req.filter, req.limit);
        case "qtype":
        case "rcode":
          return distribution(db, t, req.filter, req.stat);
        case "latency":
          return latency(db, t, req.filter, req.slowLimit);
        case "timeseries":
          return timeseries(db, t, req.filter, req.bucketMs, req.buckets, req.nowMs);
      }
  }
}
