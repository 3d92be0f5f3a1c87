// The JSON form of DoH that Google (dns.google/resolve) and Cloudflare (cloudflare-dns.com/dns-query with
// `accept: application/dns-json`) serve: `GET <path>?name=&type=` (also `do`, `cd`, `ct`) becomes a query
// put through the same pipeline as any DoH request, and its answer is written as
// `{Status, TC, RD, RA, AD, CD, Question, Answer?, Authority?, Additional?}`. Off the hot path of the
// wire-format endpoints: the answer is decoded in full here.

import { domainToASCII } from "node:url";
import { EDNS_DO, FLAG, parseType, QTYPE } from "../../dns/constants.js";
import { decodeMessage, encodeMessage, messageRcode, type Message, type ResourceRecord } from "../../dns/message.js";
import { checkName, fqdn } from "../../dns/name.js";
import { rrJson } from "../../dns/rr-json.js";

export const DNS_JSON = "application/dns-json";
const JSON_TYPES = [DNS_JSON, "application/json", "application/x-javascript"];
const DNS_MESSAGE = "application/dns-message";

/** A JSON API request read from its query string: the query to ask and how to answer it. */
export interface JsonQuery {
  wire: Buffer;
  /** The answer's content type; application/dns-message asks for the wire answer instead of JSON. */
  contentType: string;
}

/** `1`/`true` and `0`/`false` (or empty): Google's and Cloudflare's forms. */
function flag(params: URLSearchParams, key: string): boolean | string {
  const v = params.get(key);
  if (v === null || v === "" || v === "0" || v === "false") return false;
  if (v === "1" || v === "true") return true;
  return `${key} must be 0, 1, true or false, not '${v}'`;
}

/** The content type asked for by `ct`, else by Accept (application/json only when dns-json is not accepted). */
function answerType(ct: string | null, accept: string | undefined): string | null {
  if (ct !== null && ct !== "") {
    const t = ct.toLowerCase();
    return JSON_TYPES.includes(t) || t === DNS_MESSAGE ? t : null;
  }
  const a = (accept ?? "").toLowerCase();
  return !a.includes(DNS_JSON) && a.includes("application/json") ? "application/json" : DNS_JSON;
}

/** Reads `name`, `type`, `do`, `cd`, `ct` (other parameters are ignored); a message saying what is wrong otherwise. */
export function parseJsonQuery(query: string, accept: string | undefined): JsonQuery | string {
  const params = new URLSearchParams(query);
  let name = params.get("name") ?? "";
  if (name === "") return "the JSON API needs a name parameter (?name=example.com&type=A)";
  // An internationalised name is asked in its ASCII (punycode) form, as the public JSON APIs do.
  if (/[\u0080-\uffff]/.test(name)) {
    const ascii = domainToASCII(name);
    if (ascii === "") return `name '${name}' is not a domain name`;
    name = ascii;
  }
  const bad = checkName(name);
  if (bad !== null) return `name '${name}' is not a domain name: ${bad}`;
  const typeText = params.get("type") ?? "";
  const type = typeText === "" ? QTYPE.A : parseType(typeText);
  if (type === undefined || type === 0 || type === QTYPE.OPT) return `type '${typeText}' is not a record type (a mnemonic such as AAAA, or a number 1-65535)`;
  const dnssecOk = flag(params, "do");
  if (typeof dnssecOk === "string") return dnssecOk;
  const checkingDisabled = flag(params, "cd");
  if (typeof checkingDisabled === "string") return checkingDisabled;
  const contentType = answerType(params.get("ct"), accept);
  if (contentType === null) return `ct must be one of ${[...JSON_TYPES, DNS_MESSAGE].join(", ")}`;
  const message: Message = {
    id: 0,
    flags: FLAG.RD | (checkingDisabled ? FLAG.CD : 0),
    questions: [{ name, type, class: 1 }],
    answers: [],
    authorities: [],
    additionals: [],
    // Asked with EDNS, as dig and the public resolvers ask: the same cache entries serve both forms.
    edns: { udpSize: 4096, extRcode: 0, version: 0, flags: dnssecOk ? EDNS_DO : 0, options: [] },
  };
  return { wire: encodeMessage(message), contentType };
}

interface JsonRecord {
  name: string;
  type: number;
  TTL: number;
  data: string;
}

const records = (rrs: ResourceRecord[]): JsonRecord[] => rrs.map((rr) => ({ name: fqdn(rr.name), type: rr.type, TTL: rr.ttl, data: rrJson(rr).payload_text }));

/** The JSON body for a wire answer; a SERVFAIL-shaped body when the answer cannot be decoded. */
export function renderJson(answer: Buffer, question: Buffer): Buffer {
  let m: Message;
  try {
    m = decodeMessage(answer);
  } catch {
    const q = decodeMessage(question);
    m = { ...q, flags: FLAG.QR | FLAG.RD | FLAG.RA | 2 };
  }
  const f = m.flags;
  const body: Record<string, unknown> = {
    Status: messageRcode(m),
    TC: (f & FLAG.TC) !== 0,
    RD: (f & FLAG.RD) !== 0,
    RA: (f & FLAG.RA) !== 0,
    AD: (f & FLAG.AD) !== 0,
    CD: (f & FLAG.CD) !== 0,
    Question: m.questions.map((q) => ({ name: fqdn(q.name), type: q.type })),
  };
  if (m.answers.length > 0) body.Answer = records(m.answers);
  if (m.authorities.length > 0) body.Authority = records(m.authorities);
  if (m.additionals.length > 0) body.Additional = records(m.additionals);
  return Buffer.from(JSON.stringify(body));
}
