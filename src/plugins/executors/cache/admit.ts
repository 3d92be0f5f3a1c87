// Decides whether a response may be cached and for how long, and builds the stored entry.
// Works on the wire form through the structural index; nothing beyond the question name is decoded.

import { EDNS_OPTION, FLAG, QTYPE, RCODE } from "../../../dns/constants.js";
import { normalizeName, readName } from "../../../dns/name.js";
import { indexMessage, minTtl, SECTION_ANSWER, SECTION_AUTHORITY, wireRcode, type WireIndex } from "../../../dns/view.js";
import type { KeyParts } from "./key.js";
import type { Entry } from "./store.js";

export interface AdmitPolicy {
  /** Seconds; null = no cap. */
  maxPositiveTtl: number | null;
  /** Seconds a positive answer is kept at least (its records' TTLs raised to it); 0 = off. */
  minPositiveTtl: number;
  cacheNegative: boolean;
  maxNegativeTtl: number;
  /** Seconds for NXDOMAIN/NODATA without an SOA; 0 = do not cache those. */
  negativeTtlWithoutSoa: number;
  /** Serve-stale window after the fresh period, ms; 0 = off. Positive answers only. */
  lazyMs: number;
}

export type SkipReason = "truncated" | "no_ttl" | "uncacheable";

/** End of a name written without compression pointers at `pos`, or -1. */
export function plainNameEnd(buf: Buffer, pos: number): number {
  while (pos < buf.length) {
    const len = buf[pos];
    if (len === 0) return pos + 1;
    if (len > 63) return -1;
    pos += len + 1;
  }
  return -1;
}

/** The question the stored answer carries must be the one the key names, uncompressed at offset 12. */
function questionMatches(wire: Buffer, index: WireIndex, q: KeyParts): number {
  if (index.questionCount !== 1) return -1;
  const end = plainNameEnd(wire, 12);
  if (end < 0 || end + 4 !== index.questionEnd) return -1;
  if (normalizeName(readName(wire, 12).name) !== q.qname) return -1;
  if (((wire[end] << 8) | wire[end + 1]) !== q.qtype || ((wire[end + 2] << 8) | wire[end + 3]) !== q.qclass) return -1;
  return end;
}

/** RFC 2308 §5: the negative TTL is the smaller of the SOA record's TTL and its MINIMUM field; -1 without an SOA. */
function soaNegativeTtl(wire: Buffer, index: WireIndex): number {
  for (const r of index.records) {
    if (r.section !== SECTION_AUTHORITY || r.type !== QTYPE.SOA) continue;
    // MINIMUM is the last 32 bits of the RDATA whatever the (possibly compressed) names before it.
    if (r.end - (r.fixed + 10) < 22) continue;
    return Math.min(wire.readUInt32BE(r.fixed + 4), wire.readUInt32BE(r.end - 4));
  }
  return -1;
}

/** How long an answer may be cached, or why not. */
export function cacheTtl(wire: Buffer, index: WireIndex, policy: AdmitPolicy): { ttl: number; negative: boolean } | SkipReason {
  const flags = (wire[2] << 8) | wire[3];
  if ((flags & FLAG.TC) !== 0) return "truncated";
  if ((flags & 0x7800) !== 0 || (flags & FLAG.QR) === 0) return "uncacheable";
  const rcode = wireRcode(wire, index);
  const answers = (wire[6] << 8) | wire[7];
  if (rcode === RCODE.NOERROR && answers > 0) {
    let ttl = minTtl(wire, index, SECTION_ANSWER);
    // TTL 0 is the owner's "do not cache": min_positive_ttl does not override it.
    if (ttl <= 0) return "no_ttl";
    if (ttl < policy.minPositiveTtl) ttl = policy.minPositiveTtl;
    if (policy.maxPositiveTtl !== null) ttl = Math.min(ttl, policy.maxPositiveTtl);
    return { ttl, negative: false };
  }
  if (rcode !== RCODE.NXDOMAIN && rcode !== RCODE.NOERROR) return "uncacheable";
  if (!policy.cacheNegative) return "uncacheable";
  const soa = soaNegativeTtl(wire, index);
  const ttl = Math.min(soa >= 0 ? soa : policy.negativeTtlWithoutSoa, policy.maxNegativeTtl);
  return ttl > 0 ? { ttl, negative: true } : "no_ttl";
}

/**
 * Builds an entry over a private copy of `wire`; `now` is monotonic ms. EDNS options that belong
 * to the one client asked (COOKIE, PADDING, and ECS when ECS is not part of the key) are dropped
 * from the copy: echoed to another client they would be wrong (a cookie mismatch makes clients
 * discard the answer) or leak the first client's subnet.
 */
export function makeEntry(key: KeyParts, wire: Buffer, index: WireIndex | null, policy: AdmitPolicy, now: number, keepEcs: boolean): Entry | SkipReason {
  let idx: WireIndex;
  try {
    idx = index ?? indexMessage(wire);
  } catch {
    return "uncacheable";
  }
  const verdict = cacheTtl(wire, idx, policy);
  if (typeof verdict === "string") return verdict;
  const qnameEnd = questionMatches(wire, idx, key);
  if (qnameEnd < 0) return "uncacheable";
  const stored = withoutClientOptions(wire, idx, keepEcs);
  if (stored === null) return "uncacheable";
  const { ttl, negative } = verdict;
  const fresh = now + ttl * 1000;
  const storedIndex = stored === wire ? idx : indexMessage(stored);
  const own = stored === wire ? Buffer.from(wire) : stored;
  if (!negative && policy.minPositiveTtl > 0) raiseTtls(own, storedIndex, policy.minPositiveTtl);
  return restoreEntry(key, own, storedIndex, ttl, negative, now, fresh, negative ? fresh : fresh + policy.lazyMs, qnameEnd);
}

/**
 * min_positive_ttl: raises every record TTL below `floor` (OPT and TTL 0 excepted) in the entry's own
 * copy, so hits, dumps and the Redis level all carry the raised value.
 */
function raiseTtls(wire: Buffer, index: WireIndex, floor: number): void {
  for (const r of index.records) {
    if (r.type === QTYPE.OPT) continue;
    const at = r.fixed + 4;
    const ttl = wire.readUInt32BE(at);
    if (ttl > 0 && ttl < floor) wire.writeUInt32BE(floor, at);
  }
}

/**
 * `wire` without per-client EDNS options: the same buffer when there are none, a new one when the
 * OPT record is last (nothing after it can hold a pointer that would move), else null.
 */
function withoutClientOptions(wire: Buffer, index: WireIndex, keepEcs: boolean): Buffer | null {
  if (index.opt < 0) return wire;
  const opt = index.records[index.opt];
  const dataStart = opt.fixed + 10;
  const kept: Buffer[] = [];
  let dropped = false;
  for (let pos = dataStart; pos + 4 <= opt.end; ) {
    const code = (wire[pos] << 8) | wire[pos + 1];
    const end = pos + 4 + ((wire[pos + 2] << 8) | wire[pos + 3]);
    if (end > opt.end) return null;
    if (code === EDNS_OPTION.COOKIE || code === EDNS_OPTION.PADDING || (code === EDNS_OPTION.ECS && !keepEcs)) dropped = true;
    else kept.push(wire.subarray(pos, end));
    pos = end;
  }
  if (!dropped) return wire;
  if (opt.end !== wire.length) return null;
  const options = Buffer.concat(kept);
  const out = Buffer.allocUnsafe(dataStart + options.length);
  wire.copy(out, 0, 0, dataStart);
  options.copy(out, dataStart);
  out.writeUInt16BE(options.length, opt.fixed + 8);
  return out;
}

/** Assembles an entry from stored parts (also used when loading a dump). `wire` is owned by the entry. */
export function restoreEntry(
  key: KeyParts,
  wire: Buffer,
  index: WireIndex,
  ttl: number,
  negative: boolean,
  cachedAt: number,
  freshUntil: number,
  expireAt: number,
  qnameEnd: number,
): Entry {
  const ttls: number[] = [];
  for (const r of index.records) {
    if (r.type === QTYPE.OPT) continue;
    const at = r.fixed + 4;
    ttls.push(at, Math.min(wire.readUInt32BE(at), ttl));
  }
  const { qname, qtype, qclass, bits, ecs } = key;
  const name = readName(wire, 12).name;
  const storedName = name === qname ? qname : name;
  // Whole milliseconds: a fraction would make each of these a heap number of its own.
  const at = Math.floor(cachedAt);
  return {
    qname, qtype, qclass, bits, ecs, wire, ttls, qnameEnd, storedName, ttl, negative,
    cachedAt: at, freshUntil: Math.floor(freshUntil), expireAt: Math.floor(expireAt), lastAccess: at,
    seq: 0, born: 0, hits: 0, refreshing: false, prev: null, next: null, sibling: null,
  };
}

/** For dump loading: the question end when the stored answer fits its key, else -1. */
export function storedQuestionEnd(wire: Buffer, index: WireIndex, q: KeyParts): number {
  return questionMatches(wire, index, q);
}
