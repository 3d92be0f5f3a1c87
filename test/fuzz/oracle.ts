// What the servers must answer to any packet, per the rules in src/plugins/servers/handle.ts and the
// fuzz configuration (names under blocked.test → NXDOMAIN with its SOA, everything else → REFUSED; udp_server's
// default max_udp_size of 1232).

import { FLAG, QTYPE, RCODE } from "../../src/dns/constants.js";
import { decodeMessage, messageRcode, type Message, type Question } from "../../src/dns/message.js";
import { nameToLabels } from "../../src/dns/name.js";
import { MAX_EDNS_OPTIONS, MAX_QUERY_BYTES } from "../../src/dns/query.js";
import { udpLimit } from "../../src/dns/view.js";

export type Expectation =
  | { reply: false }
  | { reply: true; headerOnly: true; flags: number }
  | { reply: true; headerOnly: false; flags: number; rcode: number; questions: Question[]; edns: { dnssecOk: boolean } | null; udpLimit: number };

/** Label-wise, case-insensitive "is `name` blocked.test or below it". */
export function underBlockedTest(name: string): boolean {
  const labels = nameToLabels(name).map((l) => Buffer.from(l).toString("latin1").toLowerCase());
  const n = labels.length;
  return n >= 2 && labels[n - 2] === "blocked" && labels[n - 1] === "test";
}

/** The server's cap on UDP answers (udp_server `max_udp_size` default). */
export const MAX_UDP_SIZE = 1232;

export function expectationFor(request: Buffer): Expectation {
  if (request.length < 12 || (request[2] & 0x80) !== 0) return { reply: false };
  const formerr = { reply: true, headerOnly: true, flags: FLAG.QR | (((request[2] << 8) | request[3]) & (0x7800 | FLAG.RD)) | RCODE.FORMERR } as const;
  // Too big, or too many EDNS options: refused like an undecodable query, body unread.
  if (request.length > MAX_QUERY_BYTES) return formerr;
  let q: Message;
  try {
    q = decodeMessage(request);
  } catch {
    return formerr;
  }
  if (q.edns !== null && q.edns.options.length > MAX_EDNS_OPTIONS) return formerr;
  const opcode = (q.flags >> 11) & 0x0f;
  let rcode: number;
  if (opcode !== 0) rcode = RCODE.NOTIMP;
  else if (q.questions.length !== 1) rcode = RCODE.FORMERR;
  else if (q.edns !== null && q.edns.version !== 0) rcode = RCODE.BADVERS;
  else rcode = underBlockedTest(q.questions[0].name) ? RCODE.NXDOMAIN : RCODE.REFUSED;
  return {
    reply: true,
    headerOnly: false,
    flags: FLAG.QR | (q.flags & (0x7800 | FLAG.RD | FLAG.CD)) | FLAG.RA | (rcode & 0x0f),
    rcode,
    questions: q.questions.length === 1 ? q.questions : [],
    edns: q.edns ? { dnssecOk: (q.edns.flags & 0x8000) !== 0 } : null,
    udpLimit: udpLimit(q.edns ? q.edns.udpSize : null, MAX_UDP_SIZE),
  };
}

const hex = (b: Buffer): string => (b.length > 80 ? `${b.subarray(0, 80).toString("hex")}…(${b.length} bytes)` : b.toString("hex"));

/** Null when `reply` is what `request` deserves, else a description of the difference. */
export function checkReply(request: Buffer, reply: Buffer, protocol: "udp" | "tcp"): string | null {
  const why = (text: string): string => `${protocol}: ${text}\n  request ${hex(request)}\n  reply   ${hex(reply)}`;
  const exp = expectationFor(request);
  if (!exp.reply) return why("a reply to a packet that must be dropped");
  let m: Message;
  try {
    m = decodeMessage(reply);
  } catch (err) {
    return why(`reply does not decode: ${(err as Error).message}`);
  }
  if (m.id !== request.readUInt16BE(0)) return why(`reply id ${m.id} != request id ${request.readUInt16BE(0)}`);
  if (m.flags !== exp.flags) return why(`flags ${m.flags.toString(16)} != expected ${exp.flags.toString(16)}`);
  if (exp.headerOnly) return reply.length === 12 ? null : why("FORMERR for an undecodable request must be a bare header");
  if (messageRcode(m) !== exp.rcode) return why(`rcode ${messageRcode(m)} != expected ${exp.rcode}`);
  const got = JSON.stringify(m.questions);
  const want = JSON.stringify(exp.questions);
  if (got !== want) return why(`questions ${got.slice(0, 200)} != ${want.slice(0, 200)}`);
  // `reject 3` carries the synthesised SOA (owned by the question name, TTL 300); REFUSED and the rest are bare.
  const soa = exp.rcode === RCODE.NXDOMAIN ? m.authorities : [];
  if (m.answers.length + m.additionals.length + m.authorities.length - soa.length > 0) return why("records in a reject answer");
  if (exp.rcode === RCODE.NXDOMAIN) {
    const r = soa.length === 1 ? soa[0] : null;
    if (r === null || r.type !== QTYPE.SOA || r.ttl !== 300 || r.name !== exp.questions[0].name) return why(`NXDOMAIN without its one SOA: ${JSON.stringify(m.authorities).slice(0, 200)}`);
  }
  if ((m.edns === null) !== (exp.edns === null)) return why(`OPT ${m.edns ? "present" : "missing"} in the reply`);
  if (m.edns && exp.edns && ((m.edns.flags & 0x8000) !== 0) !== exp.edns.dnssecOk) return why("DO bit not mirrored");
  if (protocol === "udp" && reply.length > exp.udpLimit) return why(`UDP reply of ${reply.length} bytes over the limit ${exp.udpLimit}`);
  return null;
}
