// Address prefixes owned by clients or groups, looked up by longest match (clients) or all matches
// (groups). A lookup scans the list, so it runs once per new address: the directory remembers results.

import { unmapIPv4 } from "../../../dns/ip.js";
import { parseIpRule } from "../../../engine/rules/ip.js";

interface Prefix<T> {
  ip: Uint8Array;
  bits: number;
  owner: T;
}

function contains(p: Prefix<unknown>, ip: Uint8Array): boolean {
  if (p.ip.length !== ip.length) return false;
  const whole = p.bits >> 3;
  for (let i = 0; i < whole; i++) if (p.ip[i] !== ip[i]) return false;
  const rest = p.bits & 7;
  if (rest === 0) return true;
  const mask = (0xff << (8 - rest)) & 0xff;
  return (p.ip[whole] & mask) === (ip[whole] & mask);
}

export class PrefixTable<T> {
  private readonly list: Prefix<T>[] = [];

  /** `rule`: an address or CIDR (already checked). An IPv4-mapped IPv6 rule counts as IPv4. */
  add(rule: string, owner: T): void {
    const { ip, bits } = parseIpRule(rule);
    const plain = unmapIPv4(ip);
    const entry = { ip: plain, bits: plain === ip ? bits : Math.max(0, bits - 96), owner };
    // Longest prefix first, declaration order among equals: after the last as long or longer (no
    // sort per rule: a directory of a thousand clients is rebuilt whenever the API names one).
    let at = this.list.length;
    while (at > 0 && this.list[at - 1].bits < entry.bits) at--;
    this.list.splice(at, 0, entry);
  }

  get size(): number {
    return this.list.length;
  }

  /** The owner of the longest prefix holding `ip` (4 or 16 bytes, unmapped); undefined when none. */
  longest(ip: Uint8Array): T | undefined {
    for (const p of this.list) if (contains(p, ip)) return p.owner;
    return undefined;
  }

  /** Every owner with a prefix holding `ip`, once each, longest prefix first. */
  all(ip: Uint8Array): T[] {
    const out: T[] = [];
    for (const p of this.list) if (contains(p, ip) && !out.includes(p.owner)) out.push(p.owner);
    return out;
  }
}
