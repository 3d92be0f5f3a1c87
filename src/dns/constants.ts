// IANA DNS parameter tables (types, classes, rcodes, opcodes, EDNS option codes) with mnemonic
// lookups both ways. Unknown values print as the RFC 3597 forms TYPEnnn / CLASSnnn / RCODEnnn.

export const QTYPE = {
  A: 1, NS: 2, MD: 3, MF: 4, CNAME: 5, SOA: 6, MB: 7, MG: 8, MR: 9, NULL: 10, WKS: 11, PTR: 12,
  HINFO: 13, MINFO: 14, MX: 15, TXT: 16, RP: 17, AFSDB: 18, X25: 19, ISDN: 20, RT: 21, NSAP: 22,
  "NSAP-PTR": 23, SIG: 24, KEY: 25, PX: 26, GPOS: 27, AAAA: 28, LOC: 29, NXT: 30, EID: 31,
  NIMLOC: 32, SRV: 33, ATMA: 34, NAPTR: 35, KX: 36, CERT: 37, A6: 38, DNAME: 39, SINK: 40,
  OPT: 41, APL: 42, DS: 43, SSHFP: 44, IPSECKEY: 45, RRSIG: 46, NSEC: 47, DNSKEY: 48, DHCID: 49,
  NSEC3: 50, NSEC3PARAM: 51, TLSA: 52, SMIMEA: 53, HIP: 55, NINFO: 56, RKEY: 57, TALINK: 58,
  CDS: 59, CDNSKEY: 60, OPENPGPKEY: 61, CSYNC: 62, ZONEMD: 63, SVCB: 64, HTTPS: 65, SPF: 99,
  UINFO: 100, UID: 101, GID: 102, UNSPEC: 103, NID: 104, L32: 105, L64: 106, LP: 107, EUI48: 108,
  EUI64: 109, TKEY: 249, TSIG: 250, IXFR: 251, AXFR: 252, MAILB: 253, MAILA: 254, ANY: 255,
  URI: 256, CAA: 257, AVC: 258, DOA: 259, AMTRELAY: 260, TA: 32768, DLV: 32769,
} as const;

export const QCLASS = { IN: 1, CS: 2, CH: 3, HS: 4, NONE: 254, ANY: 255 } as const;

export const RCODE = {
  NOERROR: 0, FORMERR: 1, SERVFAIL: 2, NXDOMAIN: 3, NOTIMP: 4, REFUSED: 5, YXDOMAIN: 6,
  YXRRSET: 7, NXRRSET: 8, NOTAUTH: 9, NOTZONE: 10, DSOTYPENI: 11, BADVERS: 16, BADSIG: 16,
  BADKEY: 17, BADTIME: 18, BADMODE: 19, BADNAME: 20, BADALG: 21, BADTRUNC: 22, BADCOOKIE: 23,
} as const;

export const OPCODE = { QUERY: 0, IQUERY: 1, STATUS: 2, NOTIFY: 4, UPDATE: 5, DSO: 6 } as const;

export const EDNS_OPTION = {
  LLQ: 1, UL: 2, NSID: 3, DAU: 5, DHU: 6, N3U: 7, ECS: 8, EXPIRE: 9, COOKIE: 10,
  TCP_KEEPALIVE: 11, PADDING: 12, CHAIN: 13, KEY_TAG: 14, EDE: 15,
} as const;

/** Header flag bits (second 16-bit word of the header). */
export const FLAG = {
  QR: 0x8000, AA: 0x0400, TC: 0x0200, RD: 0x0100, RA: 0x0080, Z: 0x0040, AD: 0x0020, CD: 0x0010,
} as const;

/** The DO bit inside the OPT record's flags (the low 16 bits of its TTL field). */
export const EDNS_DO = 0x8000;

function invert(table: Readonly<Record<string, number>>): Map<number, string> {
  const out = new Map<number, string>();
  // First name wins, so BADVERS (not BADSIG) names 16 and NSAP-PTR keeps its dash.
  for (const [name, value] of Object.entries(table)) if (!out.has(value)) out.set(value, name);
  return out;
}

function upperMap(table: Readonly<Record<string, number>>): Map<string, number> {
  return new Map(Object.entries(table).map(([k, v]) => [k.toUpperCase(), v]));
}

const TYPE_NAMES = invert(QTYPE);
const CLASS_NAMES = invert(QCLASS);
const RCODE_NAMES = invert(RCODE);
const OPCODE_NAMES = invert(OPCODE);
const TYPE_VALUES = upperMap(QTYPE);
const CLASS_VALUES = upperMap(QCLASS);
const RCODE_VALUES = upperMap(RCODE);

export function typeName(value: number): string {
  return TYPE_NAMES.get(value) ?? `TYPE${value}`;
}
export function className(value: number): string {
  return CLASS_NAMES.get(value) ?? `CLASS${value}`;
}
export function rcodeName(value: number): string {
  return RCODE_NAMES.get(value) ?? `RCODE${value}`;
}
export function opcodeName(value: number): string {
  return OPCODE_NAMES.get(value) ?? `OPCODE${value}`;
}

function parseEnum(text: string, values: Map<string, number>, prefix: string, max: number): number | undefined {
  const upper = text.trim().toUpperCase();
  const known = values.get(upper);
  if (known !== undefined) return known;
  const digits = upper.startsWith(prefix) ? upper.slice(prefix.length) : upper;
  if (!/^\d+$/.test(digits)) return undefined;
  const n = Number(digits);
  return n <= max ? n : undefined;
}

/** `A`, `aaaa`, `TYPE65`, `28` → number; undefined when not a type. */
export function parseType(text: string): number | undefined {
  return parseEnum(text, TYPE_VALUES, "TYPE", 0xffff);
}
export function parseClass(text: string): number | undefined {
  return parseEnum(text, CLASS_VALUES, "CLASS", 0xffff);
}
/** Rcodes are 12 bits wide once EDNS extends them. */
export function parseRcode(text: string): number | undefined {
  return parseEnum(text, RCODE_VALUES, "RCODE", 0xfff);
}
