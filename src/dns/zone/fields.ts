// Field syntax shared by entries and RDATA: names against an origin, TTLs with units, class and
// type mnemonics, and bounded integers.

import { QCLASS, QTYPE } from "../constants.js";
import { nameToLabels, readName, WireFormatError } from "../name.js";
import { EntryError } from "./errors.js";
import type { Token } from "./lexer.js";

export interface ZoneName {
  /** Presentation form without the trailing dot, as readName prints it (root = ""). */
  text: string;
  /** Uncompressed wire form. */
  wire: Buffer;
}

export const ROOT: ZoneName = { text: "", wire: Buffer.from([0]) };

/** True when the name text ends with a dot that is not escaped. */
function endsWithDot(text: string): boolean {
  if (!text.endsWith(".")) return false;
  let slashes = 0;
  for (let i = text.length - 2; i >= 0 && text[i] === "\\"; i--) slashes++;
  return slashes % 2 === 0;
}

function toWire(labels: Uint8Array[]): Buffer {
  let size = 1;
  for (const l of labels) size += l.length + 1;
  const out = Buffer.allocUnsafe(size);
  let pos = 0;
  for (const l of labels) {
    out[pos++] = l.length;
    out.set(l, pos);
    pos += l.length;
  }
  out[pos] = 0;
  return out;
}

/** Resolves a name as written (`@`, relative, absolute) against the origin. */
export function zoneName(token: Token, origin: ZoneName): ZoneName {
  const raw = token.text;
  if (raw === "@" && !token.quoted) return origin;
  if (/[^\x20-\x7e]/.test(raw)) {
    throw new EntryError(`name '${raw}' contains a control or non-ASCII character (write it as \\DDD, or use punycode)`, token.line);
  }
  let full: string;
  if (raw === ".") full = "";
  else if (endsWithDot(raw)) full = raw;
  else if (origin.text.length === 0) full = raw;
  else full = `${raw}.${origin.text}`;
  try {
    const wire = toWire(nameToLabels(full));
    return { text: readName(wire, 0).name, wire };
  } catch (err) {
    if (err instanceof WireFormatError) throw new EntryError(`bad name '${raw}': ${err.message}`, token.line);
    throw err;
  }
}

const TTL_UNITS: Readonly<Record<string, number>> = { s: 1, m: 60, h: 3600, d: 86400, w: 604800 };
export const MAX_TTL = 0x7fffffff;

/** `3600`, `1h30m`, `2d`, `1W` → seconds; undefined when the text is not a TTL. */
export function parseTtl(text: string): number | undefined {
  if (/^\d+$/.test(text)) {
    const n = Number(text);
    return n <= MAX_TTL ? n : undefined;
  }
  if (!/^(\d+[smhdwSMHDW])+\d*$/.test(text)) return undefined;
  let total = 0;
  for (const m of text.matchAll(/(\d+)([smhdwSMHDW]?)/g)) {
    total += Number(m[1]) * (m[2] ? TTL_UNITS[m[2].toLowerCase()] : 1);
    if (total > MAX_TTL) return undefined;
  }
  return total;
}

/** Starts with a digit: in the TTL/class slot this can only be meant as a TTL. */
export function looksLikeTtl(token: Token): boolean {
  return !token.quoted && /^\d/.test(token.text);
}

export function ttlField(token: Token, what = "TTL"): number {
  const ttl = parseTtl(token.text);
  if (ttl === undefined) throw new EntryError(`bad ${what} '${token.text}': use seconds or units like 1h30m, 2d, 1w (at most ${MAX_TTL})`, token.line);
  return ttl;
}

/** Classes a record may carry (NONE and ANY only appear in queries and updates). */
export function parseClassName(text: string): number | undefined {
  const upper = text.toUpperCase();
  if (upper === "IN") return QCLASS.IN;
  if (upper === "CH") return QCLASS.CH;
  if (upper === "HS") return QCLASS.HS;
  if (upper === "CS") return QCLASS.CS;
  const m = /^CLASS(\d{1,5})$/.exec(upper);
  if (!m) return undefined;
  const n = Number(m[1]);
  return n >= 1 && n <= 0xffff && n !== QCLASS.NONE && n !== QCLASS.ANY ? n : undefined;
}

const TYPE_BY_NAME = new Map<string, number>(Object.entries(QTYPE).map(([k, v]) => [k.toUpperCase(), v]));
/** Types that exist only in queries or transport, never as stored records. */
const QUERY_ONLY = new Set<number>([0, QTYPE.OPT, QTYPE.TKEY, QTYPE.TSIG, QTYPE.IXFR, QTYPE.AXFR, QTYPE.MAILB, QTYPE.MAILA, QTYPE.ANY]);

export type TypeLookup = { type: number } | { error: string } | null;

/** A type mnemonic or `TYPEnnn`; null when the text is not a type at all. */
export function lookupType(text: string): TypeLookup {
  const upper = text.toUpperCase();
  let type = TYPE_BY_NAME.get(upper);
  if (type === undefined) {
    const m = /^TYPE(\d{1,5})$/.exec(upper);
    if (!m || Number(m[1]) > 0xffff) return null;
    type = Number(m[1]);
  }
  if (QUERY_ONLY.has(type)) return { error: `${text} is a query-only type and cannot be a record` };
  return { type };
}

/** A decimal integer within [0, max], named `what` in the error. */
export function intField(token: Token, max: number, what: string): number {
  const text = token.text;
  if (token.quoted || !/^\d{1,10}$/.test(text) || Number(text) > max) {
    throw new EntryError(`${what} must be an integer 0-${max}, got '${text}'`, token.line);
  }
  return Number(text);
}
