// The stats routes as SQL aggregates over every matching record (no sampling: sample_size is the
// number of records counted). With only a time range, whole hours and minutes come from the
// rollups and the uneven edges of the range from the records' time index; any other filter
// aggregates the matching records directly. Both paths group the same way, so they agree exactly.
// The response bodies are built by the *Body functions, which the PostgreSQL reads share.

import type Database from "better-sqlite3";
import { typeName } from "../../../dns/constants.js";
import { KIND_NAMES } from "./batch.js";
import { filterSql, onlyTime, type Filter, type PluginKind, type TopClientsBy } from "./filters.js";
import { outcomeKey } from "./json.js";
import { CLIENT_NAMES, latencyBucketSql, LATENCY_HOURS, LATENCY_MINUTES, NAMES, OUTCOMES, PLUGINS, type Rollup } from "./rollups.js";
import { OUTCOME_ERROR, OUTCOME_NO_RESPONSE } from "./schema.js";

type Db = Database.Database;
type Merge = "sum" | "max";

const END = Number.MAX_SAFE_INTEGER;

/** A range of whole buckets of one rollup, and the ms ranges left for raw rows. */
interface Plan {
  rollups: { r: Rollup; a: number; b: number }[];
  raw: [number, number][];
}

/** Splits [lo, hi] (ms, inclusive) into whole buckets of the coarsest rollup first, then finer ones, then raw rows. */
export function plan(lo: number, hi: number, levels: readonly Rollup[]): Plan {
  const out: Plan = { rollups: [], raw: [] };
  const go = (from: number, to: number, i: number): void => {
    if (from > to) return;
    if (i >= levels.length) {
      out.raw.push([from, to]);
      return;
    }
    const ms = levels[i].bucketMs;
    const a = Math.ceil(from / ms);
    const b = to >= END ? END : Math.floor((to + 1) / ms) - 1;
    if (a > b) return go(from, to, i + 1);
    out.rollups.push({ r: levels[i], a, b });
    go(from, a * ms - 1, i + 1);
    if (b < END) go((b + 1) * ms, to, i + 1);
  };
  go(lo, hi, 0);
  return out;
}

interface Source {
  sql: string;
  params: unknown[];
}

/** Rows [...keys, ...values] from every source, merged by key. */
function collect(db: Db, sources: Source[], nKeys: number, merges: readonly Merge[]): Map<string, { key: number[]; vals: number[] }> {
  const out = new Map<string, { key: number[]; vals: number[] }>();
  for (const s of sources) {
    for (const row of db.prepare(s.sql).raw().all(...s.params) as (number | null)[][]) {
      const key = row.slice(0, nKeys).map(Number);
      const vals = row.slice(nKeys).map((v) => Number(v ?? 0));
      const k = key.join(",");
      const have = out.get(k);
      if (!have) {
        out.set(k, { key, vals });
        continue;
      }
      merges.forEach((m, i) => (have.vals[i] = m === "sum" ? have.vals[i] + vals[i] : Math.max(have.vals[i], vals[i])));
    }
  }
  return out;
}

/**
 * The sources for one aggregate: `fromRollup(table, where)` over rollup rows, `raw(where)` over
 * records (alias r) in a time range with the filters. Only a time range → rollups at `levels`.
 */
function sources(f: Filter, levels: readonly Rollup[], fromRollup: (r: Rollup) => string, raw: (where: string) => string, extra: unknown[] = [], window?: [number, number]): Source[] {
  const lo = Math.max(window?.[0] ?? 0, f.sinceMs ?? 0);
  const hi = Math.min(window?.[1] ?? END, f.untilMs ?? END);
  if (lo > hi) return [];
  const filters = filterSql(f);
  const p = onlyTime(f) ? plan(lo, hi, levels) : { rollups: [], raw: [[lo, hi] as [number, number]] };
  return [
    ...p.rollups.map(({ r, a, b }) => ({ sql: fromRollup(r), params: [a, b, ...extra] })),
    ...p.raw.map(([a, b]) => ({ sql: raw(`r.created_at_ms BETWEEN ? AND ? AND ${filters.sql}`), params: [a, b, ...filters.params, ...extra] })),
  ];
}

const RECORDS = "records_v2 r INDEXED BY records_v2_time";

function sampleSize(db: Db, f: Filter, window?: [number, number]): number {
  const m = collect(db, sources(f, [OUTCOMES], (r) => `SELECT sum(count) FROM ${r.table} WHERE bucket BETWEEN ? AND ?`, (w) => `SELECT count(*) FROM ${RECORDS} WHERE ${w}`, [], window), 0, ["sum"]);
  return m.get("")?.vals[0] ?? 0;
}

const share = (n: number, total: number): number => (total > 0 ? n / total : 0);
const ms = (us: number): number => Math.round(us) / 1000;

export function byCount<T extends { key: string; count: number }>(rows: T[], total: number, limit: number): (T & { share: number })[] {
  return rows
    .sort((a, b) => b.count - a.count || (a.key < b.key ? -1 : a.key > b.key ? 1 : 0))
    .slice(0, limit)
    .map((r) => ({ ...r, share: share(r.count, total) }));
}

/** stats/rcode and stats/qtype: one row per rcode bucket or question type. */
export function distribution(db: Db, f: Filter, what: "rcode" | "qtype"): object {
  const col = what === "rcode" ? "outcome" : "qtype";
  const m = collect(db, sources(f, [OUTCOMES], (r) => `SELECT ${col}, sum(count) FROM ${r.table} WHERE bucket BETWEEN ? AND ? GROUP BY ${col}`, (w) => `SELECT r.${col}, count(*) FROM ${RECORDS} WHERE ${w} GROUP BY r.${col}`), 1, ["sum"]);
  const rows = [...m.values()].map(({ key, vals }) => ({ key: what === "rcode" ? outcomeKey(key[0]) : typeName(key[0]), count: vals[0] }));
  const total = rows.reduce((n, r) => n + r.count, 0);
  return { ok: true, sample_size: total, rows: byCount(rows, total, rows.length) };
}

/** stats/top_qnames. */
export function topNames(db: Db, f: Filter, limit: number): object {
  const m = collect(db, sources(f, [NAMES], (r) => `SELECT name_id, sum(count) FROM ${r.table} WHERE bucket BETWEEN ? AND ? GROUP BY name_id`, (w) => `SELECT r.name_id, count(*) FROM ${RECORDS} WHERE ${w} GROUP BY r.name_id`), 1, ["sum"]);
  const total = sampleSize(db, f);
  const best = [...m.values()].sort((a, b) => b.vals[0] - a.vals[0] || a.key[0] - b.key[0]).slice(0, limit);
  const lookup = db.prepare<[number], string>("SELECT name FROM names_v2 WHERE id = ?").pluck();
  const rows = best.map(({ key, vals }) => ({ key: lookup.get(key[0]) ?? `#${key[0]}`, count: vals[0] }));
  return { ok: true, sample_size: total, rows: byCount(rows, total, limit) };
}

/** A row of stats/top_clients: `key` is the address (by ip) or the name, else the address (by name). */
export interface TopClientRow {
  key: string;
  count: number;
  /** The address of the row's newest record. */
  client_ip: string;
  /** The client's name at the row's newest record (null: not named then). */
  client_name: string | null;
}

/**
 * stats/top_clients: records per address (the name it had last), or per client name summed over its
 * addresses (the address it used last; clients without a name per address). From pairs
 * (address, name, count, newest ms) of the rollup per address and name, or of the matching records.
 */
export function topClients(db: Db, f: Filter, by: TopClientsBy, limit: number): object {
  const pairs = collect(
    db,
    sources(f, [CLIENT_NAMES], (r) => `SELECT client_id, client_name_id, sum(count), max(last_ms) FROM ${r.table} WHERE bucket BETWEEN ? AND ? GROUP BY 1, 2`, (w) => `SELECT r.client_id, coalesce(r.client_name_id, 0), count(*), max(r.created_at_ms) FROM ${RECORDS} WHERE ${w} GROUP BY 1, 2`),
    2,
    ["sum", "max"],
  );
  const groups = new Map<string, { count: number; last: number; ipId: number; nameId: number }>();
  for (const { key, vals } of pairs.values()) {
    const [ipId, nameId] = key;
    const k = by === "name" && nameId !== 0 ? `n${nameId}` : `a${ipId}`;
    const g = groups.get(k);
    if (!g) groups.set(k, { count: vals[0], last: vals[1], ipId, nameId });
    else {
      g.count += vals[0];
      if (vals[1] > g.last || (vals[1] === g.last && nameId > g.nameId)) Object.assign(g, { last: vals[1], ipId, nameId });
    }
  }
  const best = [...groups.values()].sort((a, b) => b.count - a.count || a.ipId - b.ipId || a.nameId - b.nameId).slice(0, limit);
  const ip = db.prepare<[number], string>("SELECT ip FROM clients_v2 WHERE id = ?").pluck();
  const name = db.prepare<[number], string>("SELECT name FROM client_names_v2 WHERE id = ?").pluck();
  const rows = best.map((g): TopClientRow => {
    const clientIp = ip.get(g.ipId) ?? `#${g.ipId}`;
    const clientName = g.nameId === 0 ? null : (name.get(g.nameId) ?? `#${g.nameId}`);
    return { key: by === "name" ? (clientName ?? clientIp) : clientIp, count: g.count, client_ip: clientIp, client_name: clientName };
  });
  const total = sampleSize(db, f);
  return { ok: true, sample_size: total, rows: byCount(rows, total, limit) };
}

/** Histogram edges of stats/latency, ms; a last bucket (lt_ms null) takes the rest. */
export const LATENCY_EDGES_MS = [1, 5, 10, 20, 50, 100, 300, 1000];

/** Nearest-rank percentile from (bucket, count) pairs sorted by bucket. */
function percentile(hist: [number, number][], n: number, q: number): number {
  const rank = Math.max(1, Math.ceil(q * n));
  let seen = 0;
  for (const [bucket, count] of hist) {
    seen += count;
    if (seen >= rank) return bucket;
  }
  return hist.length > 0 ? hist[hist.length - 1][0] : 0;
}

function latencyHistogram(db: Db, f: Filter, levels: readonly Rollup[], window?: [number, number], perPointMs?: number): Map<string, { key: number[]; vals: number[] }> {
  const point = (r: Rollup | null): string => (perPointMs === undefined ? "" : r === null ? `r.created_at_ms / ${perPointMs}, ` : `bucket / ${perPointMs / r.bucketMs}, `);
  const nKeys = perPointMs === undefined ? 1 : 2;
  return collect(
    db,
    sources(
      f,
      levels,
      (r) => `SELECT ${point(r)}bucket_us, sum(count) FROM ${r.table} WHERE bucket BETWEEN ? AND ? GROUP BY ${nKeys === 2 ? "1, 2" : "1"}`,
      (w) => `SELECT ${point(null)}${latencyBucketSql("r.elapsed_us")} AS b, count(*) FROM ${RECORDS} WHERE ${w} GROUP BY ${nKeys === 2 ? "1, 2" : "1"}`,
      [],
      window,
    ),
    nKeys,
    ["sum"],
  );
}

/** The slowest names, before the response shape. */
export interface SlowName {
  qname: string;
  count: number;
  avgUs: number;
  maxUs: number;
}

/** The body of stats/latency from its totals, its (bucket µs, count) histogram and the slowest names. */
export function latencyBody(n: number, sumUs: number, maxUs: number, histogram: [number, number][], slow: SlowName[]): object {
  const hist = [...histogram].sort((a, b) => a[0] - b[0]);
  const edgesUs = LATENCY_EDGES_MS.map((e) => e * 1000);
  const counts = new Array<number>(edgesUs.length + 1).fill(0);
  for (const [bucket, count] of hist) {
    const i = edgesUs.findIndex((e) => bucket < e);
    counts[i < 0 ? edgesUs.length : i] += count;
  }
  return {
    ok: true,
    sample_size: n,
    avg_ms: n > 0 ? ms(sumUs / n) : null,
    p50_ms: n > 0 ? ms(percentile(hist, n, 0.5)) : null,
    p95_ms: n > 0 ? ms(percentile(hist, n, 0.95)) : null,
    p99_ms: n > 0 ? ms(percentile(hist, n, 0.99)) : null,
    max_ms: n > 0 ? ms(maxUs) : null,
    histogram: counts.map((count, i) => ({ lt_ms: i < LATENCY_EDGES_MS.length ? LATENCY_EDGES_MS[i] : null, count })),
    slow_top: slow.map((x) => ({ qname: x.qname, count: x.count, avg_ms: ms(x.avgUs), max_ms: ms(x.maxUs) })),
  };
}

/** stats/latency: summary, percentiles, histogram and the slowest names. */
export function latency(db: Db, f: Filter, slowLimit: number): object {
  const sum = collect(db, sources(f, [OUTCOMES], (r) => `SELECT sum(count), sum(elapsed_sum_us), max(elapsed_max_us) FROM ${r.table} WHERE bucket BETWEEN ? AND ?`, (w) => `SELECT count(*), sum(r.elapsed_us), max(r.elapsed_us) FROM ${RECORDS} WHERE ${w}`), 0, ["sum", "sum", "max"]).get("")?.vals ?? [0, 0, 0];
  const hist = [...latencyHistogram(db, f, [LATENCY_HOURS, LATENCY_MINUTES]).values()].map(({ key, vals }): [number, number] => [key[0], vals[0]]);
  const names = collect(db, sources(f, [NAMES], (r) => `SELECT name_id, sum(count), sum(elapsed_sum_us), max(elapsed_max_us) FROM ${r.table} WHERE bucket BETWEEN ? AND ? GROUP BY name_id`, (w) => `SELECT r.name_id, count(*), sum(r.elapsed_us), max(r.elapsed_us) FROM ${RECORDS} WHERE ${w} GROUP BY r.name_id`), 1, ["sum", "sum", "max"]);
  const lookup = db.prepare<[number], string>("SELECT name FROM names_v2 WHERE id = ?").pluck();
  const slow = [...names.values()]
    .map(({ key, vals }) => ({ id: key[0], count: vals[0], avg: vals[1] / vals[0], max: vals[2] }))
    .sort((a, b) => b.avg - a.avg || b.count - a.count || a.id - b.id)
    .slice(0, slowLimit)
    .map((x) => ({ qname: lookup.get(x.id) ?? `#${x.id}`, count: x.count, avgUs: x.avg, maxUs: x.max }));
  return latencyBody(sum[0], sum[1], sum[2], hist, slow);
}

export const KIND_CODE: Record<Exclude<PluginKind, "all">, number> = { matcher: 0, executor: 1, builtin: 2 };

/** stats/plugins: per plugin, how often it was checked, matched, executed, and by how many records. */
export function plugins(db: Db, f: Filter, kind: PluginKind): object {
  const k = kind === "all" ? "" : ` AND kind = ${KIND_CODE[kind]}`;
  const m = collect(
    db,
    sources(
      f,
      [PLUGINS],
      (r) => `SELECT kind, tag, sum(checked), sum(matched), sum(executed), sum(queries) FROM ${r.table} WHERE bucket BETWEEN ? AND ?${k} GROUP BY kind, tag`,
      (w) => `SELECT ${PLUGINS.keys.map((x) => x.expr).join(", ")}, ${PLUGINS.values.map((v) => v.expr).join(", ")} FROM ${RECORDS} CROSS JOIN steps_v2 s ON s.record_id = r.id WHERE ${w}${k.replace("kind", "s.kind")} GROUP BY s.kind, s.tag`,
    ),
    2,
    ["sum", "sum", "sum", "sum"],
  );
  const tag = db.prepare<[number], string>("SELECT tag FROM tags_v2 WHERE id = ?").pluck();
  return pluginsBody(
    [...m.values()].map(({ key, vals }) => [key[0], tag.get(key[1]) ?? `#${key[1]}`, vals[0], vals[1], vals[2], vals[3]]),
    sampleSize(db, f),
  );
}

/** The body of stats/plugins from rows [kind code, tag, checked, matched, executed, records]. */
export function pluginsBody(rows: [number, string, number, number, number, number][], total: number): object {
  const out = rows
    .map(([kind, tag, checked, matched, executed, queries]) => ({ kind: KIND_NAMES[kind] ?? `kind${kind}`, tag, checked, matched, executed, query_total: queries, query_share: share(queries, total) }))
    .sort((a, b) => (a.kind < b.kind ? -1 : a.kind > b.kind ? 1 : b.query_total - a.query_total || (a.tag < b.tag ? -1 : a.tag > b.tag ? 1 : 0)));
  return { ok: true, sample_size: total, rows: out };
}

/** The points of stats/timeseries: `buckets` of `bucketMs` ending with the one that holds until_ms (default now), and the ms window they cover. */
export function timeseriesWindow(f: Filter, bucketMs: number, buckets: number, nowMs: number): { first: number; window: [number, number] } {
  const last = Math.floor((f.untilMs ?? nowMs) / bucketMs);
  const first = last - buckets + 1;
  return { first, window: [first * bucketMs, f.untilMs ?? (last + 1) * bucketMs - 1] };
}

/** The body of stats/timeseries from rows [point, outcome, count, sum µs] and [point, latency bucket µs, count]. */
export function timeseriesBody(first: number, buckets: number, bucketMs: number, counts: Iterable<number[]>, hist: Iterable<number[]>): object {
  const points = Array.from({ length: buckets }, (_, i) => ({ p: first + i, total: 0, error: 0, none: 0, sumUs: 0, hist: [] as [number, number][] }));
  const at = (p: number): (typeof points)[number] | undefined => points[p - first];
  let sample = 0;
  for (const [point, outcome, count, sumUs] of counts) {
    const pt = at(point);
    if (!pt) continue;
    pt.total += count;
    pt.sumUs += sumUs;
    if (outcome === OUTCOME_ERROR) pt.error += count;
    if (outcome === OUTCOME_NO_RESPONSE) pt.none += count;
    sample += count;
  }
  for (const [point, bucket, count] of hist) at(point)?.hist.push([bucket, count]);
  return {
    ok: true,
    sample_size: sample,
    bucket_ms: bucketMs,
    points: points.map((pt) => ({
      bucket_ms: pt.p * bucketMs,
      total: pt.total,
      error_count: pt.error,
      no_response_count: pt.none,
      avg_ms: pt.total > 0 ? ms(pt.sumUs / pt.total) : 0,
      p95_ms: pt.total > 0 ? ms(percentile(pt.hist.sort((a, b) => a[0] - b[0]), pt.total, 0.95)) : 0,
    })),
  };
}

/** stats/timeseries: `buckets` points ending with the one that holds until_ms (default now), oldest first, empty ones as zeros. */
export function timeseries(db: Db, f: Filter, bucketMs: number, buckets: number, nowMs: number): object {
  const { first, window } = timeseriesWindow(f, bucketMs, buckets, nowMs);
  const pointOf = (r: Rollup | null): string => (r === null ? `r.created_at_ms / ${bucketMs}` : `bucket / ${bucketMs / r.bucketMs}`);
  const counts = collect(
    db,
    sources(f, [OUTCOMES], (r) => `SELECT ${pointOf(r)}, outcome, sum(count), sum(elapsed_sum_us) FROM ${r.table} WHERE bucket BETWEEN ? AND ? GROUP BY 1, 2`, (w) => `SELECT ${pointOf(null)}, r.outcome, count(*), sum(r.elapsed_us) FROM ${RECORDS} WHERE ${w} GROUP BY 1, 2`, [], window),
    2,
    ["sum", "sum"],
  );
  const levels = bucketMs >= LATENCY_HOURS.bucketMs ? [LATENCY_HOURS, LATENCY_MINUTES] : [LATENCY_MINUTES];
  const hist = latencyHistogram(db, f, levels, window, bucketMs);
  const rows = (m: Map<string, { key: number[]; vals: number[] }>): number[][] => [...m.values()].map(({ key, vals }) => [...key, ...vals]);
  return timeseriesBody(first, buckets, bucketMs, rows(counts), rows(hist));
}
