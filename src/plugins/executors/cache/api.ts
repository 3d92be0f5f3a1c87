// What the cache's API routes return: entry rows and cursor paging in insertion order.

import { createHmac, timingSafeEqual } from "node:crypto";
import { className, rcodeName, typeName } from "../../../dns/constants.js";
import { decodeMessage } from "../../../dns/message.js";
import { rrJson, type RrJson } from "../../../dns/rr-json.js";
import { InvalidQueryError } from "./errors.js";
import { entryId, KEY_CD, KEY_DO, keyString, parseKey } from "./key.js";
import type { Entry } from "./store.js";

export interface CacheEntryRow {
  /** Names the entry in DELETE entries/<id>. */
  id: string;
  domain: string;
  qtype: string;
  qclass: string;
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
  cached_at_ms: number;
  expires_at_ms: number;
  last_access_ms: number;
  do_bit: boolean;
  cd_bit: boolean;
  ecs: null | { family: 1 | 2; source_prefix: number; address: string };
  /** The answer section as stored (TTLs as stored, capped at `ttl`). */
  answers: RrJson[];
  /** With data-plane workers: the worker whose cache holds the entry. */
  worker?: number;
}

/** Cursors are opaque: a stamp and a MAC (see cursorFor), behind `w<worker>.` with workers (workers.ts); their longest form. */
export const CURSOR_MAX_LENGTH = 32;

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

function answers(wire: Buffer): RrJson[] {
  try {
    return decodeMessage(wire).answers.map(rrJson);
  } catch {
    // Stored answers were validated when cached; a dump from elsewhere might not be.
    return [];
  }
}

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
    qtype: typeName(e.qtype),
    qclass: className(e.qclass),
    // Only NOERROR and NXDOMAIN are ever stored, so the header's low rcode bits are the whole rcode.
    rcode: rcodeName(w[3] & 0x0f),
    answer_count: an,
    authority_count: ns,
    additional_count: ar - hasOpt,
    ttl: e.ttl,
    remaining_ttl: Math.max(0, Math.ceil((e.expireAt - now) / 1000)),
    fresh: now < e.freshUntil,
    stale: now >= e.freshUntil && now < e.expireAt,
    cached_at_ms: unixMs(e.cachedAt),
    expires_at_ms: unixMs(e.expireAt),
    last_access_ms: unixMs(e.lastAccess),
    do_bit: (e.bits & KEY_DO) !== 0,
    cd_bit: (e.bits & KEY_CD) !== 0,
    ecs: subnet && { family: subnet.family, source_prefix: subnet.sourcePrefix, address: subnet.address },
    answers: answers(w),
  };
}

function pageLimit(limit: number | undefined): number {
  if (limit === undefined) return DEFAULT_PAGE;
  if (!Number.isInteger(limit)) throw new InvalidQueryError("limit must be a positive integer");
  return Math.min(MAX_PAGE, Math.max(1, limit));
}

/** A cursor's MAC: 12 bytes of HMAC-SHA256 under the cache's own key, base64url. */
const cursorMac = (key: Buffer, stamp: string): string => createHmac("sha256", key).update(stamp).digest().subarray(0, 12).toString("base64url");

/**
 * Cursors name the insertion stamp of the last row shown ("b" + base 36) and carry a MAC under
 * the cache's key, so a cursor this cache never handed out (however well-formed) is refused.
 */
function cursorFor(born: number, key: Buffer): string {
  const stamp = `b${born.toString(36)}`;
  return `${stamp}.${cursorMac(key, stamp)}`;
}

function cursorBorn(cursor: string | null | undefined, key: Buffer): number {
  if (cursor === undefined || cursor === null || cursor === "") return Infinity;
  const m = /^(b[0-9a-z]{1,10})\.([A-Za-z0-9_-]{16})$/.exec(cursor);
  if (!m || !timingSafeEqual(Buffer.from(m[2]), Buffer.from(cursorMac(key, m[1])))) throw new InvalidQueryError("cursor is not one this cache handed out");
  return parseInt(m[1].slice(1), 36);
}

function nameFilter(qname: string | undefined): string {
  let f = (qname ?? "").trim().toLowerCase();
  if (f.endsWith(".") && !f.endsWith("\\.")) f = f.slice(0, -1);
  return f;
}

/**
 * Live entries, newest first. A page continues below the insertion stamp of the previous page's
 * last row, so paging visits every entry that lives through it exactly once, however entries are
 * used meanwhile; entries stored after the first page was read are not visited.
 */
export function listEntries(all: Iterable<Entry>, query: CacheEntriesQuery, now: number, cursorKey: Buffer): CacheEntriesPage {
  const limit = pageLimit(query.limit);
  const below = cursorBorn(query.cursor, cursorKey);
  const filter = nameFilter(query.qname);
  // The `limit + 1` newest below the cursor, kept sorted by insertion stamp, newest first.
  const page: Entry[] = [];
  let total = 0;
  for (const e of all) {
    if (e.expireAt <= now) continue;
    if (filter !== "" && !e.qname.includes(filter)) continue;
    total++;
    if (e.born >= below) continue;
    if (page.length > limit && e.born <= page[limit].born) continue;
    let lo = 0;
    let hi = page.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (page[mid].born > e.born) lo = mid + 1;
      else hi = mid;
    }
    page.splice(lo, 0, e);
    if (page.length > limit + 1) page.pop();
  }
  const more = page.length > limit;
  const rows = page.slice(0, limit);
  const last = rows[rows.length - 1];
  return { entries: rows.map((e) => entryRow(e, now)), next_cursor: more && last ? cursorFor(last.born, cursorKey) : null, total_entries: total };
}
