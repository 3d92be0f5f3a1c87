// A structural index over a message in wire form: where each record sits, without decoding names.
// Passed-through and cached answers are read and patched through it (ID, TTLs, truncation)
// so the hot path never decodes a whole message.

import { FLAG, QTYPE } from "./constants.js";
import { skipName, WireFormatError } from "./name.js";

export const SECTION_ANSWER = 0;
export const SECTION_AUTHORITY = 1;
export const SECTION_ADDITIONAL = 2;

export interface RecordSlot {
  section: number;
  /** Offset of the owner name. */
  start: number;
  /** Offset of the TYPE field; CLASS at +2, TTL at +4, RDLENGTH at +8, RDATA at +10. */
  fixed: number;
  type: number;
  end: number;
}

export interface WireIndex {
  questionCount: number;
  /** Offset just after the question section. */
  questionEnd: number;
  records: RecordSlot[];
  /** Index into `records` of the OPT record, or -1. */
  opt: number;
  /** Offset where the additional section begins (== length when empty). */
  additionalStart: number;
}

/** Walks every record with bounds and name checks; throws WireFormatError on anything unsound. */
export function indexMessage(buf: Buffer): WireIndex {
  if (buf.length < 12) throw new WireFormatError("message shorter than a DNS header");
  const qd = (buf[4] << 8) | buf[5];
  const counts = [(buf[6] << 8) | buf[7], (buf[8] << 8) | buf[9], (buf[10] << 8) | buf[11]];
  let pos = 12;
  for (let i = 0; i < qd; i++) {
    pos = skipName(buf, pos) + 4;
    if (pos > buf.length) throw new WireFormatError("question truncated");
  }
  const questionEnd = pos;
  const records: RecordSlot[] = [];
  let opt = -1;
  let additionalStart = buf.length;
  for (let section = 0; section < 3; section++) {
    if (section === SECTION_ADDITIONAL) additionalStart = pos;
    for (let i = 0; i < counts[section]; i++) {
      const start = pos;
      const fixed = skipName(buf, pos);
      if (fixed + 10 > buf.length) throw new WireFormatError("record header truncated");
      const type = (buf[fixed] << 8) | buf[fixed + 1];
      const end = fixed + 10 + ((buf[fixed + 8] << 8) | buf[fixed + 9]);
      if (end > buf.length) throw new WireFormatError("record data runs past the end of the message");
      if (type === QTYPE.OPT) {
        if (section !== SECTION_ADDITIONAL || opt >= 0) throw new WireFormatError("misplaced or repeated OPT record");
        // fitUdp moves OPT; an owner pointer into a dropped record would then point forwards.
        if (fixed !== start + 1) throw new WireFormatError("OPT record not owned by the root");
        opt = records.length;
      }
      records.push({ section, start, fixed, type, end });
      pos = end;
    }
  }
  if (pos !== buf.length) throw new WireFormatError("trailing bytes after the last record");
  return { questionCount: qd, questionEnd, records, opt, additionalStart };
}

/**
 * The same checks as indexMessage without building the index: for answers that are only passed
 * through. Returns the offset of the OPT record's TYPE field, or -1 when there is none.
 */
export function scanMessage(buf: Buffer): number {
  if (buf.length < 12) throw new WireFormatError("message shorter than a DNS header");
  const qd = (buf[4] << 8) | buf[5];
  let pos = 12;
  for (let i = 0; i < qd; i++) {
    pos = skipName(buf, pos) + 4;
    if (pos > buf.length) throw new WireFormatError("question truncated");
  }
  let opt = -1;
  for (let section = 0; section < 3; section++) {
    const count = (buf[6 + section * 2] << 8) | buf[7 + section * 2];
    for (let i = 0; i < count; i++) {
      const start = pos;
      const fixed = skipName(buf, pos);
      if (fixed + 10 > buf.length) throw new WireFormatError("record header truncated");
      const end = fixed + 10 + ((buf[fixed + 8] << 8) | buf[fixed + 9]);
      if (end > buf.length) throw new WireFormatError("record data runs past the end of the message");
      if (((buf[fixed] << 8) | buf[fixed + 1]) === QTYPE.OPT) {
        if (section !== SECTION_ADDITIONAL || opt >= 0) throw new WireFormatError("misplaced or repeated OPT record");
        if (fixed !== start + 1) throw new WireFormatError("OPT record not owned by the root");
        opt = fixed;
      }
      pos = end;
    }
  }
  if (pos !== buf.length) throw new WireFormatError("trailing bytes after the last record");
  return opt;
}

export function wireRcode(buf: Buffer, index: WireIndex): number {
  const low = buf[3] & 0x0f;
  if (index.opt < 0) return low;
  return (buf[index.records[index.opt].fixed + 4] << 4) | low;
}

/** Smallest TTL among answer records (or all records when `section` is -1); -1 when none. */
export function minTtl(buf: Buffer, index: WireIndex, section: number): number {
  let min = -1;
  for (const r of index.records) {
    if (r.type === QTYPE.OPT || (section >= 0 && r.section !== section)) continue;
    const ttl = buf.readUInt32BE(r.fixed + 4);
    if (min < 0 || ttl < min) min = ttl;
  }
  return min;
}

export function setId(buf: Buffer, id: number): void {
  buf[0] = (id >>> 8) & 0xff;
  buf[1] = id & 0xff;
}

/**
 * Largest UDP answer to send: the client's EDNS size (at least 512; 512 without EDNS), capped by
 * the server's `max` (≥ 512) so a small query cannot draw a large answer (amplification).
 */
export function udpLimit(ednsUdpSize: number | null, max: number): number {
  if (ednsUdpSize === null) return 512;
  return Math.max(512, Math.min(ednsUdpSize, max));
}

/**
 * Fits a message into `limit` bytes for UDP. Sections are dropped whole, from the back: first the
 * additional records (OPT is kept; no TC, they are optional), then answer and authority together
 * with TC set so the client retries over TCP.
 */
export function fitUdp(buf: Buffer, limit: number): Buffer {
  if (buf.length <= limit) return buf;
  const index = indexMessage(buf);
  const opt = index.opt >= 0 ? buf.subarray(index.records[index.opt].start, index.records[index.opt].end) : null;
  const optLen = opt ? opt.length : 0;
  if (index.additionalStart + optLen <= limit) {
    const out = Buffer.allocUnsafe(index.additionalStart + optLen);
    buf.copy(out, 0, 0, index.additionalStart);
    if (opt) opt.copy(out, index.additionalStart);
    out.writeUInt16BE(opt ? 1 : 0, 10);
    return out;
  }
  const keep = index.questionEnd + optLen <= limit ? index.questionEnd : 12;
  const withOpt = keep + optLen <= limit && opt !== null;
  const out = Buffer.allocUnsafe(keep + (withOpt ? optLen : 0));
  buf.copy(out, 0, 0, keep);
  if (withOpt && opt) opt.copy(out, keep);
  out.writeUInt16BE(keep === 12 ? 0 : index.questionCount, 4);
  out.writeUInt16BE(0, 6);
  out.writeUInt16BE(0, 8);
  out.writeUInt16BE(withOpt ? 1 : 0, 10);
  out.writeUInt16BE(out.readUInt16BE(2) | FLAG.TC, 2);
  return out;
}

/**
 * The freshness lifetime of an answer for HTTP caches (RFC 8484 §5.1): the smallest TTL of the
 * answer and authority records, an SOA's MINIMUM included (RFC 2308); -1 when there is no record
 * or the message cannot be walked.
 */
export function freshnessTtl(buf: Buffer): number {
  if (buf.length < 12) return -1;
  try {
    let pos = 12;
    const qd = (buf[4] << 8) | buf[5];
    for (let i = 0; i < qd; i++) pos = skipName(buf, pos) + 4;
    const count = ((buf[6] << 8) | buf[7]) + ((buf[8] << 8) | buf[9]);
    let min = -1;
    for (let i = 0; i < count; i++) {
      const fixed = skipName(buf, pos);
      if (fixed + 10 > buf.length) return -1;
      const type = (buf[fixed] << 8) | buf[fixed + 1];
      const end = fixed + 10 + ((buf[fixed + 8] << 8) | buf[fixed + 9]);
      if (end > buf.length) return -1;
      let ttl = buf.readUInt32BE(fixed + 4);
      if (type === QTYPE.SOA && end - 4 >= fixed + 10) ttl = Math.min(ttl, buf.readUInt32BE(end - 4));
      if (type !== QTYPE.OPT && (min < 0 || ttl < min)) min = ttl;
      pos = end;
    }
    return min;
  } catch {
    return -1;
  }
}
