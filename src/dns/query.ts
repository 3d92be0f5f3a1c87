// Decoding a request on the hot path. Nearly every query has one question, no answer or authority
// records and at most an OPT record; that shape is decoded in one pass, building the question name
// (and its lower-case form) from a single string slice. Anything else goes through the general
// strict decoder. Both paths accept and reject exactly the same packets, including the bounds
// below, which keep the work a hostile packet costs close to that of a normal query.

import { QTYPE } from "./constants.js";
import { decodeMessage, type Edns, type EdnsOption, type Message, type ResourceRecord } from "./message.js";
import { normalizeName, skipName, WireFormatError } from "./name.js";

/** Largest query accepted over any transport; a bigger one is refused before its body is read. */
export const MAX_QUERY_BYTES = 4096;
/** Most EDNS options a query may carry; scanning stops at the first one past it. */
export const MAX_EDNS_OPTIONS = 32;

export interface DecodedQuery {
  message: Message;
  /** Lower-case first question name without trailing dot ("" without a question). */
  qname: string;
  /** Offset just after the question section in the wire form. */
  questionEnd: number;
}

/** A request's record sections are empty; frozen, so a plugin that tried to add to them would fail loudly. */
const NO_RECORDS: ResourceRecord[] = Object.freeze([]) as unknown as ResourceRecord[];
/** An OPT record without options (the common case), shared the same way: plugins replace a query's options list, never change it. */
const NO_OPTIONS: EdnsOption[] = Object.freeze([]) as unknown as EdnsOption[];

/** A result for `decodeQuery(buf, into)` to fill; its message is a placeholder until then. */
export function emptyDecodedQuery(): DecodedQuery {
  return { message: { id: 0, flags: 0, questions: [], answers: NO_RECORDS, authorities: NO_RECORDS, additionals: NO_RECORDS, edns: null }, qname: "", questionEnd: 0 };
}

/** Question name bytes with dots in place of the label lengths, sliced into a string once. */
const scratch = Buffer.allocUnsafe(256);

function lowerAscii(name: string, hasUpper: boolean): string {
  return hasUpper ? name.toLowerCase() : name;
}

function slowPath(buf: Buffer, out: DecodedQuery | undefined): DecodedQuery {
  const message = decodeMessage(buf, MAX_EDNS_OPTIONS);
  let pos = 12;
  for (let i = 0; i < message.questions.length; i++) pos = skipName(buf, pos) + 4;
  const q = message.questions[0];
  return fill(out, message, q ? normalizeName(q.name) : "", pos);
}

function fill(out: DecodedQuery | undefined, message: Message, qname: string, questionEnd: number): DecodedQuery {
  if (out === undefined) return { message, qname, questionEnd };
  out.message = message;
  out.qname = qname;
  out.questionEnd = questionEnd;
  return out;
}

/**
 * Decodes a request. With `into` (a server's, reused for every query it reads before anything can
 * await) the result is written there instead of into a new object: one allocation less per query.
 */
export function decodeQuery(buf: Buffer, into?: DecodedQuery): DecodedQuery {
  const len = buf.length;
  if (len < 12) throw new WireFormatError("message shorter than a DNS header");
  if (len > MAX_QUERY_BYTES) throw new WireFormatError(`query larger than ${MAX_QUERY_BYTES} bytes`);
  // One question, no answers or authority, at most one additional record.
  if (buf[4] !== 0 || buf[5] !== 1 || buf[6] !== 0 || buf[7] !== 0 || buf[8] !== 0 || buf[9] !== 0 || buf[10] !== 0 || buf[11] > 1) return slowPath(buf, into);

  // Question name: plain labels only (a pointer or an escape-worthy byte takes the slow path).
  let pos = 12;
  let out = 0;
  let hasUpper = false;
  for (;;) {
    if (pos >= len) throw new WireFormatError("name runs past the end of the message");
    const l = buf[pos];
    if (l === 0) break;
    if (l > 63) return slowPath(buf, into);
    if (pos + 1 + l > len) throw new WireFormatError("label runs past the end of the message");
    if (out + l + 1 > 254) return slowPath(buf, into);
    if (out > 0) scratch[out++] = 0x2e;
    for (let i = pos + 1, end = pos + 1 + l; i < end; i++) {
      const c = buf[i];
      if (c <= 0x20 || c >= 0x7f || c === 0x2e || c === 0x5c) return slowPath(buf, into);
      if (c >= 0x41 && c <= 0x5a) hasUpper = true;
      scratch[out++] = c;
    }
    pos += 1 + l;
  }
  pos += 1;
  if (pos + 4 > len) throw new WireFormatError("question truncated");
  const name = scratch.toString("latin1", 0, out);
  const type = (buf[pos] << 8) | buf[pos + 1];
  const klass = (buf[pos + 2] << 8) | buf[pos + 3];
  pos += 4;
  const questionEnd = pos;

  let edns: Edns | null = null;
  if (buf[11] === 1) {
    // Only a root-owned OPT is decoded here; any other additional record takes the slow path.
    if (pos + 11 > len || buf[pos] !== 0 || ((buf[pos + 1] << 8) | buf[pos + 2]) !== QTYPE.OPT) return slowPath(buf, into);
    const udpSize = (buf[pos + 3] << 8) | buf[pos + 4];
    const extRcode = buf[pos + 5];
    const version = buf[pos + 6];
    const flags = (buf[pos + 7] << 8) | buf[pos + 8];
    const rdlen = (buf[pos + 9] << 8) | buf[pos + 10];
    let p = pos + 11;
    const end = p + rdlen;
    if (end > len) throw new WireFormatError("record data runs past the end of the message");
    let options = NO_OPTIONS;
    if (p < end) options = [];
    while (p < end) {
      if (options.length === MAX_EDNS_OPTIONS) throw new WireFormatError(`more than ${MAX_EDNS_OPTIONS} EDNS options`);
      if (p + 4 > end) throw new WireFormatError("EDNS option header truncated");
      const code = (buf[p] << 8) | buf[p + 1];
      const olen = (buf[p + 2] << 8) | buf[p + 3];
      p += 4;
      if (p + olen > end) throw new WireFormatError("EDNS option runs past its record");
      options.push({ code, data: Buffer.from(buf.subarray(p, p + olen)) });
      p += olen;
    }
    pos = end;
    edns = { udpSize, extRcode, version, flags, options };
  }
  if (pos !== len) throw new WireFormatError("trailing bytes after the last record");

  const message: Message = {
    id: (buf[0] << 8) | buf[1],
    flags: (buf[2] << 8) | buf[3],
    questions: [{ name, type, class: klass }],
    answers: NO_RECORDS,
    authorities: NO_RECORDS,
    additionals: NO_RECORDS,
    edns,
  };
  return fill(into, message, lowerAscii(name, hasUpper), questionEnd);
}
