// The decoded form of a DNS message, a strict decoder and an encoder with name compression.
// Record data (`data`) is always held uncompressed: names inside RDATA of the types that allow
// compression are expanded on decode, so records can move between messages safely.

import { FLAG, QTYPE } from "./constants.js";
import { readName, skipName, WireFormatError } from "./name.js";
import { WireWriter } from "./writer.js";

export interface Question {
  name: string;
  type: number;
  class: number;
}

export interface EdnsOption {
  code: number;
  data: Buffer;
}

export interface Edns {
  udpSize: number;
  /** Upper 8 bits of the 12-bit rcode. */
  extRcode: number;
  version: number;
  /** The 16 flag bits; EDNS_DO is the DNSSEC OK bit. */
  flags: number;
  options: EdnsOption[];
}

export interface ResourceRecord {
  name: string;
  type: number;
  class: number;
  ttl: number;
  data: Buffer;
}

export interface Message {
  id: number;
  /** Second header word; its low 4 bits are the low bits of the rcode. */
  flags: number;
  questions: Question[];
  answers: ResourceRecord[];
  authorities: ResourceRecord[];
  /** Additional records other than OPT (OPT lives in `edns`). */
  additionals: ResourceRecord[];
  edns: Edns | null;
}

export function messageRcode(m: Message): number {
  return ((m.edns?.extRcode ?? 0) << 4) | (m.flags & 0x0f);
}

/** Sets the full rcode, spreading the upper bits into OPT when there is one. */
export function setMessageRcode(m: Message, rcode: number): void {
  m.flags = (m.flags & ~0x0f) | (rcode & 0x0f);
  if (m.edns) m.edns.extRcode = rcode >> 4;
}

/** RDATA layouts whose embedded names may be compressed and so are expanded on decode. */
type RdataPart = "name" | "u16" | "fixed20";
const NAME_LAYOUTS: ReadonlyMap<number, readonly RdataPart[]> = new Map<number, readonly RdataPart[]>([
  [QTYPE.NS, ["name"]], [QTYPE.MD, ["name"]], [QTYPE.MF, ["name"]], [QTYPE.CNAME, ["name"]],
  [QTYPE.MB, ["name"]], [QTYPE.MG, ["name"]], [QTYPE.MR, ["name"]], [QTYPE.PTR, ["name"]],
  [QTYPE.DNAME, ["name"]], [QTYPE.SOA, ["name", "name", "fixed20"]], [QTYPE.MINFO, ["name", "name"]],
  [QTYPE.RP, ["name", "name"]], [QTYPE.MX, ["u16", "name"]], [QTYPE.AFSDB, ["u16", "name"]],
  [QTYPE.RT, ["u16", "name"]], [QTYPE.KX, ["u16", "name"]], [QTYPE.PX, ["u16", "name", "name"]],
  [QTYPE.SRV, ["u16", "u16", "u16", "name"]],
]);

const FIXED_RDLENGTH: ReadonlyMap<number, number> = new Map([[QTYPE.A, 4], [QTYPE.AAAA, 16]]);

/** Expands an RDATA with embedded names into its uncompressed form, checking its layout. */
function expandRdata(buf: Buffer, start: number, end: number, layout: readonly RdataPart[], w: WireWriter): Buffer {
  w.reset(false);
  let pos = start;
  for (const part of layout) {
    if (part === "name") {
      const read = readName(buf, pos, end);
      w.name(read.name);
      pos = read.end;
    } else {
      const size = part === "u16" ? 2 : 20;
      if (pos + size > end) throw new WireFormatError("record data shorter than its type requires");
      w.bytes(buf.subarray(pos, pos + size));
      pos += size;
    }
  }
  if (pos !== end) throw new WireFormatError("record data longer than its type allows");
  return w.finish();
}

const scratch = new WireWriter();

interface Cursor {
  pos: number;
}

function readU16(buf: Buffer, c: Cursor): number {
  if (c.pos + 2 > buf.length) throw new WireFormatError("message truncated");
  const v = (buf[c.pos] << 8) | buf[c.pos + 1];
  c.pos += 2;
  return v;
}

function readRecord(buf: Buffer, c: Cursor): ResourceRecord {
  const owner = readName(buf, c.pos);
  c.pos = owner.end;
  if (c.pos + 10 > buf.length) throw new WireFormatError("record header truncated");
  const type = (buf[c.pos] << 8) | buf[c.pos + 1];
  const klass = (buf[c.pos + 2] << 8) | buf[c.pos + 3];
  const ttl = buf.readUInt32BE(c.pos + 4);
  const rdlength = (buf[c.pos + 8] << 8) | buf[c.pos + 9];
  const start = c.pos + 10;
  const end = start + rdlength;
  if (end > buf.length) throw new WireFormatError("record data runs past the end of the message");
  const fixed = FIXED_RDLENGTH.get(type);
  if (fixed !== undefined && klass === 1 && rdlength !== fixed) {
    throw new WireFormatError(`${type === QTYPE.A ? "A" : "AAAA"} record data must be ${fixed} bytes`);
  }
  const layout = NAME_LAYOUTS.get(type);
  const data = layout ? expandRdata(buf, start, end, layout, scratch) : Buffer.from(buf.subarray(start, end));
  c.pos = end;
  return { name: owner.name, type, class: klass, ttl, data };
}

function parseEdnsOptions(data: Buffer, maxOptions: number): EdnsOption[] {
  const options: EdnsOption[] = [];
  let pos = 0;
  while (pos < data.length) {
    if (options.length === maxOptions) throw new WireFormatError(`more than ${maxOptions} EDNS options`);
    if (pos + 4 > data.length) throw new WireFormatError("EDNS option header truncated");
    const code = (data[pos] << 8) | data[pos + 1];
    const len = (data[pos + 2] << 8) | data[pos + 3];
    pos += 4;
    if (pos + len > data.length) throw new WireFormatError("EDNS option runs past its record");
    options.push({ code, data: Buffer.from(data.subarray(pos, pos + len)) });
    pos += len;
  }
  return options;
}

/**
 * Strict decode of a whole message: every count must be honoured exactly, names must be sound,
 * at most one OPT (owned by the root, in the additional section), and no bytes may follow.
 * With `maxEdnsOptions`, an OPT record carrying more options fails at the first one too many.
 */
export function decodeMessage(buf: Buffer, maxEdnsOptions = Infinity): Message {
  if (buf.length < 12) throw new WireFormatError("message shorter than a DNS header");
  const c: Cursor = { pos: 12 };
  const id = (buf[0] << 8) | buf[1];
  const flags = (buf[2] << 8) | buf[3];
  const qd = (buf[4] << 8) | buf[5];
  const an = (buf[6] << 8) | buf[7];
  const ns = (buf[8] << 8) | buf[9];
  const ar = (buf[10] << 8) | buf[11];
  const questions: Question[] = [];
  for (let i = 0; i < qd; i++) {
    const q = readName(buf, c.pos);
    c.pos = q.end;
    const type = readU16(buf, c);
    const klass = readU16(buf, c);
    questions.push({ name: q.name, type, class: klass });
  }
  const answers: ResourceRecord[] = [];
  for (let i = 0; i < an; i++) answers.push(readRecord(buf, c));
  const authorities: ResourceRecord[] = [];
  for (let i = 0; i < ns; i++) authorities.push(readRecord(buf, c));
  const additionals: ResourceRecord[] = [];
  let edns: Edns | null = null;
  for (let i = 0; i < ar; i++) {
    const rr = readRecord(buf, c);
    if (rr.type !== QTYPE.OPT) {
      additionals.push(rr);
      continue;
    }
    if (edns) throw new WireFormatError("more than one OPT record");
    if (rr.name !== "") throw new WireFormatError("OPT record not owned by the root");
    edns = {
      udpSize: rr.class,
      extRcode: rr.ttl >>> 24,
      version: (rr.ttl >>> 16) & 0xff,
      flags: rr.ttl & 0xffff,
      options: parseEdnsOptions(rr.data, maxEdnsOptions),
    };
  }
  for (const rr of answers) if (rr.type === QTYPE.OPT) throw new WireFormatError("OPT record outside the additional section");
  for (const rr of authorities) if (rr.type === QTYPE.OPT) throw new WireFormatError("OPT record outside the additional section");
  if (c.pos !== buf.length) throw new WireFormatError("trailing bytes after the last record");
  return { id, flags, questions, answers, authorities, additionals, edns };
}

function writeRecord(w: WireWriter, rr: ResourceRecord): void {
  w.name(rr.name);
  w.u16(rr.type);
  w.u16(rr.class);
  w.u32(rr.ttl >>> 0);
  w.u16(rr.data.length);
  w.bytes(rr.data);
}

export function ednsRecordData(edns: Edns): Buffer {
  let size = 0;
  for (const o of edns.options) size += 4 + o.data.length;
  const out = Buffer.allocUnsafe(size);
  let pos = 0;
  for (const o of edns.options) {
    out.writeUInt16BE(o.code, pos);
    out.writeUInt16BE(o.data.length, pos + 2);
    o.data.copy(out, pos + 4);
    pos += 4 + o.data.length;
  }
  return out;
}

/** Encodes a message, compressing owner and question names. */
export function encodeMessage(m: Message, w: WireWriter = scratch): Buffer {
  w.reset(true);
  w.u16(m.id);
  w.u16(m.flags);
  w.u16(m.questions.length);
  w.u16(m.answers.length);
  w.u16(m.authorities.length);
  w.u16(m.additionals.length + (m.edns ? 1 : 0));
  for (const q of m.questions) {
    w.name(q.name);
    w.u16(q.type);
    w.u16(q.class);
  }
  for (const rr of m.answers) writeRecord(w, rr);
  for (const rr of m.authorities) writeRecord(w, rr);
  for (const rr of m.additionals) writeRecord(w, rr);
  if (m.edns) {
    const e = m.edns;
    w.u8(0);
    w.u16(QTYPE.OPT);
    w.u16(e.udpSize);
    w.u32(((e.extRcode & 0xff) * 0x1000000 + ((e.version & 0xff) << 16) + (e.flags & 0xffff)) >>> 0);
    const data = ednsRecordData(e);
    w.u16(data.length);
    w.bytes(data);
  }
  return w.finish();
}

/** The empty reply to a request: same id, opcode, RD and CD, its questions, RA set, and OPT when asked. */
export function replyTo(request: Message, rcode = 0): Message {
  const flags = FLAG.QR | (request.flags & (0x7800 | FLAG.RD | FLAG.CD)) | FLAG.RA;
  const reply: Message = {
    id: request.id,
    flags,
    questions: request.questions.map((q) => ({ name: q.name, type: q.type, class: q.class })),
    answers: [],
    authorities: [],
    additionals: [],
    edns: request.edns
      ? { udpSize: 1232, extRcode: 0, version: 0, flags: request.edns.flags & 0x8000, options: [] }
      : null,
  };
  setMessageRcode(reply, rcode);
  return reply;
}

export { WireFormatError, skipName };
