// Cache keys. The hot path looks entries up by name, then compares qtype, qclass, DO/CD/EDNS
// bits and the ECS part, so no key string is built per query. The printable form below is used
// for entry ids (base64url of it, so an id maps to exactly one key) and in dumps.
//
// Layout: `<qtype>|<qclass>|<bits>|<ecs>|<qname>` where bits = DO | CD<<1 | EDNS<<2 and ecs is
// empty, `-` (unreadable option) or `<family>/<source prefix>/<address hex, prefix bytes only>`.
// The name comes last and is the only part that may contain `|`, so the split is unambiguous.

import { EDNS_DO, FLAG } from "../../../dns/constants.js";
import { decodeEcs, findEcs } from "../../../dns/ecs.js";
import { formatIP, maskIP } from "../../../dns/ip.js";
import type { Message } from "../../../dns/message.js";

export const KEY_DO = 1;
export const KEY_CD = 2;
/** The request carried an OPT record: answers with and without OPT must not be mixed (RFC 6891 §7). */
export const KEY_EDNS = 4;

export interface KeyEcs {
  family: 1 | 2;
  sourcePrefix: number;
  /** Address text with the bits after the source prefix zeroed. */
  address: string;
}

export interface KeyFields extends KeyParts {
  /** The ECS part decoded: null when empty or unreadable ("-"). */
  subnet: KeyEcs | null;
}

/** DO / CD / EDNS-present bits of a request. */
export function requestBits(q: Message): number {
  let bits = (q.flags & FLAG.CD) !== 0 ? KEY_CD : 0;
  const edns = q.edns;
  if (edns !== null) bits |= (edns.flags & EDNS_DO) !== 0 ? KEY_EDNS | KEY_DO : KEY_EDNS;
  return bits;
}

/** The request's ECS as a key part: "" without one, "-" when unreadable, else family/prefix/address hex. */
export function requestEcs(q: Message): string {
  const opt = findEcs(q.edns);
  if (!opt) return "";
  const subnet = decodeEcs(opt.data);
  if (!subnet) return "-";
  const bytes = Math.ceil(subnet.sourcePrefix / 8);
  return `${subnet.family}/${subnet.sourcePrefix}/${Buffer.from(subnet.address.subarray(0, bytes)).toString("hex")}`;
}

/** What identifies an entry. `ecs` is the key part ("" when ECS is not in the key or absent). */
export interface KeyParts {
  qname: string;
  qtype: number;
  qclass: number;
  bits: number;
  ecs: string;
}

export function keyString(k: KeyParts): string {
  return `${k.qtype}|${k.qclass}|${k.bits}|${k.ecs}|${k.qname}`;
}

const KEY_SHAPE = /^(\d{1,5})\|(\d{1,5})\|([0-7])\|(|-|[12]\/\d{1,3}\/(?:[0-9a-f]{2})*)\|([^]*)$/;

/** Splits a key into its fields; null when the text is not a key this module could have built. */
export function parseKey(key: string): KeyFields | null {
  const m = KEY_SHAPE.exec(key);
  if (!m) return null;
  const qtype = Number(m[1]);
  const qclass = Number(m[2]);
  if (qtype > 0xffff || qclass > 0xffff) return null;
  const qname = m[5];
  if (qname !== qname.toLowerCase()) return null;
  let subnet: KeyEcs | null = null;
  if (m[4] !== "" && m[4] !== "-") {
    const [fam, prefixText, hex] = m[4].split("/");
    const family = fam === "1" ? 1 : 2;
    const width = family === 1 ? 4 : 16;
    const sourcePrefix = Number(prefixText);
    if (sourcePrefix > width * 8 || hex.length !== Math.ceil(sourcePrefix / 8) * 2) return null;
    const address = new Uint8Array(width);
    address.set(Buffer.from(hex, "hex"));
    if (!Buffer.from(maskIP(address, sourcePrefix)).equals(Buffer.from(address))) return null;
    subnet = { family, sourcePrefix, address: formatIP(address) };
  }
  // Keys are rebuilt from the same parts so only the canonical spelling of a key is accepted.
  if (`${qtype}|${qclass}|${m[3]}|${m[4]}|${qname}` !== key) return null;
  return { qname, qtype, qclass, bits: Number(m[3]), ecs: m[4], subnet };
}

export function entryId(key: string): string {
  return Buffer.from(key, "utf8").toString("base64url");
}

/** The key an id names, or null when the id is not one this cache hands out. */
export function keyFromId(id: string): KeyFields | null {
  if (id.length === 0 || id.length > 2048 || !/^[A-Za-z0-9_-]+$/.test(id)) return null;
  const key = Buffer.from(id, "base64url").toString("utf8");
  return entryId(key) === id ? parseKey(key) : null;
}
