// Replies synthesized on the hot path (hosts, black_hole, reject, empty and SERVFAIL answers) are
// built from the request's own bytes: header and question copied (the client's letter case comes
// back exactly), then record blocks prepared once whose owner is a pointer to the question name
// (offset 12 in every message), then OPT when the client sent one. No name is encoded per query.

import { FLAG, QTYPE } from "./constants.js";
import type { Message } from "./message.js";
import { WireWriter } from "./writer.js";

/** Resource records with owner = the question name, in wire form, ready to append. */
export interface RecordBlock {
  bytes: Buffer;
  count: number;
}

export const EMPTY_BLOCK: RecordBlock = { bytes: Buffer.alloc(0), count: 0 };

/** Builds a block: each record owned by the question name, with the given type, TTL and data. */
export function recordBlock(records: { type: number; class?: number; ttl: number; data: Uint8Array }[]): RecordBlock {
  let size = 0;
  for (const r of records) size += 12 + r.data.length;
  const out = Buffer.allocUnsafe(size);
  let p = 0;
  for (const r of records) {
    out[p] = 0xc0;
    out[p + 1] = 0x0c;
    out.writeUInt16BE(r.type, p + 2);
    out.writeUInt16BE(r.class ?? 1, p + 4);
    out.writeUInt32BE(r.ttl >>> 0, p + 6);
    out.writeUInt16BE(r.data.length, p + 10);
    out.set(r.data, p + 12);
    p += 12 + r.data.length;
  }
  return { bytes: out, count: records.length };
}

const questionWriter = new WireWriter();

/** The question section of `query` as bytes: copied from the request when unchanged, else encoded. */
function questionBytes(query: Message, queryWire: Buffer | null, questionEnd: number): Buffer {
  if (queryWire !== null && questionEnd > 12) return queryWire.subarray(12, questionEnd);
  questionWriter.reset(false);
  for (const q of query.questions) {
    questionWriter.name(q.name);
    questionWriter.u16(q.type);
    questionWriter.u16(q.class);
  }
  return questionWriter.finish();
}

const OPT_LENGTH = 11;

/**
 * A reply to `query` with `rcode`, the answer and authority blocks, and OPT (UDP size 1232, the
 * client's DO bit) when the query had EDNS. Flags: QR, RA, and the query's opcode, RD and CD.
 */
export function buildReply(query: Message, queryWire: Buffer | null, questionEnd: number, rcode: number, answers: RecordBlock = EMPTY_BLOCK, authority: RecordBlock = EMPTY_BLOCK): Buffer {
  const question = query.questions.length > 0 ? questionBytes(query, queryWire, questionEnd) : null;
  const qlen = question === null ? 0 : question.length;
  const edns = query.edns;
  const size = 12 + qlen + answers.bytes.length + authority.bytes.length + (edns ? OPT_LENGTH : 0);
  const out = Buffer.allocUnsafe(size);
  const flags = FLAG.QR | (query.flags & (0x7800 | FLAG.RD | FLAG.CD)) | FLAG.RA | (rcode & 0x0f);
  out[0] = query.id >>> 8;
  out[1] = query.id & 0xff;
  out[2] = flags >>> 8;
  out[3] = flags & 0xff;
  out[4] = 0;
  out[5] = question === null ? 0 : query.questions.length;
  out[6] = answers.count >>> 8;
  out[7] = answers.count & 0xff;
  out[8] = authority.count >>> 8;
  out[9] = authority.count & 0xff;
  out[10] = 0;
  out[11] = edns ? 1 : 0;
  let p = 12;
  if (question !== null) {
    question.copy(out, p);
    p += qlen;
  }
  answers.bytes.copy(out, p);
  p += answers.bytes.length;
  authority.bytes.copy(out, p);
  p += authority.bytes.length;
  if (edns) {
    out[p] = 0; // root owner
    out[p + 1] = QTYPE.OPT >>> 8;
    out[p + 2] = QTYPE.OPT & 0xff;
    out[p + 3] = 1232 >>> 8;
    out[p + 4] = 1232 & 0xff;
    out[p + 5] = (rcode >>> 4) & 0xff; // extended rcode
    out[p + 6] = 0; // version
    out[p + 7] = (edns.flags & 0x8000) !== 0 ? 0x80 : 0; // DO echoed (the top bit of the flags)
    out[p + 8] = 0;
    out[p + 9] = 0;
    out[p + 10] = 0;
  }
  return out;
}
