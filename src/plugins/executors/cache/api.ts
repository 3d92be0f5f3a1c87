// What the cache's API routes return: entry rows and cursor paging over the recency list.

import { className, rcodeName, typeName } from "../../../dns/constants.js";
import { InvalidQueryError } from "./errors.js";
import { entryId, KEY_CD, KEY_DO, keyString, parseKey } from "./key.js";
import type { Entry } from "./store.js";

export interface CacheEntryRow {
  id: string;
  domain: string;
  record_type: string;
  dns_class: string;
  rcode: string;
  answer_count: number;
  authority_count: number;
  /** OPT not counted. */
  additional_count: number;
  /** The entry's TTL in seconds when it was stored (after the max_*_ttl caps). */
  ttl: number;
  /** Seconds until the entry is dropped (end of the stale window when serve-stale applies). */
  remaining_ttl: number;
  fresh: boolean;
  stale: boolean;
  cache_time_unix_ms: number;
  expire_at_unix_ms: number;
  last_access_unix_ms: number;
  do_bit: boolean;
  cd_bit: boolean;
  ecs: null | { family: 1 | 2; source_prefix: number; address: string };
}

export interface CacheEntriesQuery {
  limit?: number;
  cursor?: string | null;
  qname?: string;
}

export interface CacheEntriesPage {
  entries: CacheEntryRow[];
  /** Pass back as `cursor` for the next page; null on the last page. */
  next_cursor: string | null;
  /** Live entries matching the filter (all pages). */
  total_entries: number;
}

export const DEFAULT_PAGE = 100;
export const MAX_PAGE = 500;

/** Monotonic ms (performance.now()) → unix ms. */
const unixMs = (mono: number): number => Math.round(performance.timeOrigin + mono);

export function entryRow(e: Entry, now: number): CacheEntryRow {
  const key = keyString(e);
  const subnet = parseKey(key)?.subnet ?? null;
  const w = e.wire;
  const an = (w[6] << 8) | w[7];
  const ns = (w[8] << 8) | w[9];
  const ar = (w[10] << 8) | w[11];
  const hasOpt = an + ns + ar - e.ttls.length / 2;
  return {
    id: entryId(key),
    domain: e.qname,
    record_type: typeName(e.qtype),
    dns_class: className(e.qclass),
    // Only NOERROR and NXDOMAIN are ever stored, so the header's low rcode bits are the whole rcode.
    rcode: rcodeName(w[3] & 0x0f),
    answer_count: an,
    authority_count: ns,
    additional_count: ar - hasOpt,
    ttl: e.ttl,
    remaining_ttl: Math.max(0, Math.ceil((e.expireAt - now) / 1000)),
    fresh: now < e.freshUntil,
    stale: now >= e.freshUntil && now < e.expireAt,
    cache_time_unix_ms: unixMs(e.cachedAt),
    expire_at_unix_ms: unixMs(e.expireAt),
    last_access_unix_ms: unixMs(e.lastAccess),
    do_bit: (e.bits & KEY_DO) !== 0,
    cd_bit: (e.bits & KEY_CD) !== 0,
    ecs: subnet && { family: subnet.family, source_prefix: subnet.sourcePrefix, address: subnet.address },
  };
}

function pageLimit(limit: number | undefined): number {
  if (limit === undefined) return DEFAULT_PAGE;
  if (!Number.isInteger(limit)) throw new InvalidQueryError("limit must be a positive integer");
  return Math.min(MAX_PAGE, Math.max(1, limit));
}

/** Cursors name the recency stamp of the last row shown: "c" + base 36. */
function cursorStamp(cursor: string | null | undefined): number {
  if (cursor === undefined || cursor === null || cursor === "") return Infinity;
  if (!/^c[0-9a-z]{1,10}$/.test(cursor)) throw new InvalidQueryError("cursor is not one this cache handed out");
  return parseInt(cursor.slice(1), 36);
}

function nameFilter(qname: string | undefined): string {
  let f = (qname ?? "").trim().toLowerCase();
  if (f.endsWith(".") && !f.endsWith("\\.")) f = f.slice(0, -1);
  return f;
}

/**
 * Live entries, most recently used first. A page continues after the last row of the previous
 * one; entries used in between move to the front (they are on the next first page, not repeated).
 */
export function listEntries(all: Iterable<Entry>, query: CacheEntriesQuery, now: number): CacheEntriesPage {
  const limit = pageLimit(query.limit);
  const after = cursorStamp(query.cursor);
  const filter = nameFilter(query.qname);
  const rows: CacheEntryRow[] = [];
  let total = 0;
  let more = false;
  let lastSeq = 0;
  for (const e of all) {
    if (e.expireAt <= now) continue;
    if (filter !== "" && !e.qname.includes(filter)) continue;
    total++;
    if (e.seq >= after) continue;
    if (rows.length < limit) {
      rows.push(entryRow(e, now));
      lastSeq = e.seq;
    } else more = true;
  }
  return { entries: rows, next_cursor: more ? `c${lastSeq.toString(36)}` : null, total_entries: total };
}
