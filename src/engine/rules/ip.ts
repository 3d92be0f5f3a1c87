// IP prefix sets: IPv4/IPv6 addresses and CIDRs merged into sorted, non-overlapping ranges and
// searched by binary search, so a lookup costs O(log n) whatever the list size. Immutable once built.
// IPv4-mapped IPv6 (::ffff:a.b.c.d) is an IPv4 address here, both in rules and in lookups.

import { parseIP, parseIPv6 } from "../../dns/ip.js";
import { RuleSyntaxError } from "./domain.js";
import { finish, finishSliced, sortSteps, STEP, type Slicer, type Steps } from "./slicer.js";

const V6_ALL = (1n << 128n) - 1n;
const MAPPED_START = 0xffffn << 32n;
const MAPPED_END = MAPPED_START | 0xffffffffn;

function isMapped(b: Uint8Array): boolean {
  for (let i = 0; i < 10; i++) if (b[i] !== 0) return false;
  return b[10] === 0xff && b[11] === 0xff;
}

function u32At(b: Uint8Array, at: number): number {
  return ((b[at] << 24) | (b[at + 1] << 16) | (b[at + 2] << 8) | b[at + 3]) >>> 0;
}

function toBigInt(b: Uint8Array): bigint {
  let v = 0n;
  for (let i = 0; i < 16; i++) v = (v << 8n) | BigInt(b[i]);
  return v;
}

/** Dotted-quad text → unsigned 32-bit value without allocating; -1 when `text` is not one. */
export function ipv4Value(text: string, from = 0): number {
  let value = 0;
  let part = -1;
  let dots = 0;
  for (let i = from; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x2e) {
      if (part < 0 || dots === 3) return -1;
      value = value * 256 + part;
      part = -1;
      dots++;
    } else if (c >= 0x30 && c <= 0x39) {
      part = part < 0 ? c - 0x30 : part * 10 + (c - 0x30);
      if (part > 255) return -1;
    } else return -1;
  }
  if (part < 0 || dots !== 3) return -1;
  return value * 256 + part;
}

/** A rule `addr` or `addr/bits` as an address and prefix length; throws RuleSyntaxError. */
export function parseIpRule(rule: string): { ip: Uint8Array; bits: number } {
  const slash = rule.indexOf("/");
  const addr = slash < 0 ? rule : rule.slice(0, slash);
  const ip = parseIP(addr);
  if (!ip) throw new RuleSyntaxError(`'${rule}' is not an IP address or CIDR`);
  const max = ip.length * 8;
  if (slash < 0) return { ip, bits: max };
  const text = rule.slice(slash + 1);
  if (!/^\d{1,3}$/.test(text) || Number(text) > max) throw new RuleSyntaxError(`'${rule}' has a bad prefix length (0-${max} for IPv${max === 32 ? 4 : 6})`);
  return { ip, bits: Number(text) };
}

export class IpPrefixSetBuilder {
  private readonly v4: [number, number][] = [];
  private readonly v6: [bigint, bigint][] = [];
  private rules = 0;

  /** Adds `addr` or `addr/bits` (host bits are ignored); throws RuleSyntaxError. */
  add(rule: string): void {
    const { ip, bits } = parseIpRule(rule);
    this.addPrefix(ip, bits);
  }

  addPrefix(ip: Uint8Array, bits: number): void {
    this.rules++;
    if (ip.length === 4) {
      this.addV4(u32At(ip, 0), bits);
      return;
    }
    if (bits >= 96 && isMapped(ip)) {
      this.addV4(u32At(ip, 12), bits - 96);
      return;
    }
    const mask = bits === 0 ? 0n : ((1n << BigInt(bits)) - 1n) << BigInt(128 - bits);
    const start = toBigInt(ip) & mask;
    const end = start | (V6_ALL ^ mask);
    this.v6.push([start, end]);
    // A wide IPv6 prefix that covers ::ffff:0:0/96 covers every IPv4 address as well.
    if (start <= MAPPED_START && end >= MAPPED_END) this.v4.push([0, 0xffffffff]);
  }

  private addV4(ip: number, bits: number): void {
    const mask = bits === 0 ? 0 : (0xffffffff << (32 - bits)) >>> 0;
    const start = (ip & mask) >>> 0;
    this.v4.push([start, (start | ~mask) >>> 0]);
  }

  get size(): number {
    return this.rules;
  }

  build(): IpPrefixSet {
    return finish(this.steps());
  }

  /** `build()` in slices that yield to the event loop (provider snapshots). */
  buildSliced(slicer: Slicer): Promise<IpPrefixSet> {
    return finishSliced(this.steps(), slicer);
  }

  private *steps(): Steps<IpPrefixSet> {
    const v4 = yield* mergeSteps(this.v4, (x) => x + 1);
    const v6 = yield* mergeSteps(this.v6, (x) => x + 1n);
    const v4Starts = new Uint32Array(v4.length);
    const v4Ends = new Uint32Array(v4.length);
    for (let i = 0; i < v4.length; i++) {
      v4Starts[i] = v4[i][0];
      v4Ends[i] = v4[i][1];
    }
    const v6Starts = new Uint32Array(v6.length * 4);
    const v6Ends = new Uint32Array(v6.length * 4);
    for (let i = 0; i < v6.length; i++) {
      if (i % STEP === STEP - 1) yield;
      const [s, e] = v6[i];
      for (let w = 0; w < 4; w++) {
        const shift = BigInt(96 - w * 32);
        v6Starts[i * 4 + w] = Number((s >> shift) & 0xffffffffn);
        v6Ends[i * 4 + w] = Number((e >> shift) & 0xffffffffn);
      }
    }
    return new IpPrefixSet(v4Starts, v4Ends, v6Starts, v6Ends, this.rules);
  }
}

/** Sorts ranges by start and joins overlapping or adjacent ones. */
function* mergeSteps<T extends number | bigint>(ranges: [T, T][], successor: (x: T) => T): Steps<[T, T][]> {
  const sorted = yield* sortSteps(ranges, (a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
  const out: [T, T][] = [];
  for (let i = 0; i < sorted.length; i++) {
    if (i % (STEP * 8) === STEP * 8 - 1) yield;
    const [s, e] = sorted[i];
    const last = out.length > 0 ? out[out.length - 1] : null;
    if (last && s <= successor(last[1])) {
      if (e > last[1]) last[1] = e;
    } else out.push([s, e]);
  }
  return out;
}

export class IpPrefixSet {
  constructor(
    private readonly v4Starts: Uint32Array,
    private readonly v4Ends: Uint32Array,
    private readonly v6Starts: Uint32Array,
    private readonly v6Ends: Uint32Array,
    /** Rules it was built from. */
    readonly size: number,
  ) {}

  static empty(): IpPrefixSet {
    return new IpPrefixSet(new Uint32Array(0), new Uint32Array(0), new Uint32Array(0), new Uint32Array(0), 0);
  }

  /** Merged ranges held (for diagnostics). */
  get ranges(): number {
    return this.v4Starts.length + this.v6Starts.length / 4;
  }

  /** `ip` is 4 or 16 bytes; IPv4-mapped IPv6 is looked up as IPv4. Other lengths never match. */
  contains(ip: Uint8Array): boolean {
    if (ip.length === 4) return this.containsV4(u32At(ip, 0));
    if (ip.length !== 16) return false;
    if (isMapped(ip)) return this.containsV4(u32At(ip, 12));
    return this.containsV6(u32At(ip, 0), u32At(ip, 4), u32At(ip, 8), u32At(ip, 12));
  }

  /** Address text as Node reports peers ("10.0.0.1", "::ffff:10.0.0.1", "2001:db8::1"); false when unparsable. */
  containsText(text: string): boolean {
    let v = ipv4Value(text);
    if (v < 0 && text.length > 7 && text.charCodeAt(0) === 0x3a && /^::ffff:/i.test(text)) v = ipv4Value(text, 7);
    if (v >= 0) return this.containsV4(v);
    const ip = parseIPv6(text);
    return ip !== null && this.contains(ip);
  }

  containsV4(ip: number): boolean {
    const starts = this.v4Starts;
    let lo = 0;
    let hi = starts.length - 1;
    let at = -1;
    while (lo <= hi) {
      const mid = (lo + hi) >>> 1;
      if (starts[mid] <= ip) {
        at = mid;
        lo = mid + 1;
      } else hi = mid - 1;
    }
    return at >= 0 && ip <= this.v4Ends[at];
  }

  /** The address as four big-endian 32-bit words. */
  containsV6(w0: number, w1: number, w2: number, w3: number): boolean {
    const starts = this.v6Starts;
    let lo = 0;
    let hi = starts.length / 4 - 1;
    let at = -1;
    while (lo <= hi) {
      const mid = (lo + hi) >>> 1;
      if (compareAt(starts, mid * 4, w0, w1, w2, w3) <= 0) {
        at = mid;
        lo = mid + 1;
      } else hi = mid - 1;
    }
    return at >= 0 && compareAt(this.v6Ends, at * 4, w0, w1, w2, w3) >= 0;
  }
}

/** Sign of (words at `off`) − (w0..w3), compared as a 128-bit number. */
function compareAt(a: Uint32Array, off: number, w0: number, w1: number, w2: number, w3: number): number {
  if (a[off] !== w0) return a[off] < w0 ? -1 : 1;
  if (a[off + 1] !== w1) return a[off + 1] < w1 ? -1 : 1;
  if (a[off + 2] !== w2) return a[off + 2] < w2 ? -1 : 1;
  if (a[off + 3] !== w3) return a[off + 3] < w3 ? -1 : 1;
  return 0;
}
