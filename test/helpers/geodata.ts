// Writers for small but real-format geo data files, for tests: v2ray geosite.dat / geoip.dat
// (protocol buffers, schema app/router/config.proto) and MaxMind DB country databases (.mmdb,
// MaxMind DB format 2.0). Independent of the readers in src/ (their own encoders).

import { parseIP } from "../../src/dns/ip.js";

// ---------------------------------------------------------------------------------------------
// Protocol buffers.

function varint(n: number): number[] {
  const out: number[] = [];
  while (n >= 0x80) {
    out.push((n % 0x80) | 0x80);
    n = Math.floor(n / 0x80);
  }
  out.push(n);
  return out;
}

const key = (field: number, wire: number): number[] => varint(field * 8 + wire);
const varintField = (field: number, n: number): Buffer => Buffer.from([...key(field, 0), ...varint(n)]);
const lenField = (field: number, bytes: Uint8Array): Buffer => Buffer.concat([Buffer.from([...key(field, 2), ...varint(bytes.length)]), bytes]);
const strField = (field: number, s: string): Buffer => lenField(field, Buffer.from(s, "utf8"));
/** Fields no reader knows (numbers 13–15, every wire type): a reader must skip them. */
const noise = (): Buffer => Buffer.concat([varintField(15, 300), Buffer.from([...key(14, 5), 1, 2, 3, 4]), Buffer.from([...key(13, 1), 1, 2, 3, 4, 5, 6, 7, 8]), strField(12, "ignored")]);

export type SiteDomainType = "plain" | "regex" | "domain" | "full";
export interface SiteDomain {
  type: SiteDomainType;
  value: string;
  /** Attribute keys (bool_value true), as `@ads` in domain-list-community. */
  attrs?: string[];
}
const TYPE_NUMBER: Record<SiteDomainType, number> = { plain: 0, regex: 1, domain: 2, full: 3 };

/** A geosite.dat with one list per key (codes written upper case, as v2ray's tools do). */
export function geositeDat(lists: Record<string, SiteDomain[]>, withNoise = true): Buffer {
  const entries = Object.entries(lists).map(([code, domains]) => {
    const ds = domains.map((d) => {
      const parts = [d.type === "plain" ? Buffer.alloc(0) : varintField(1, TYPE_NUMBER[d.type]), strField(2, d.value)];
      for (const a of d.attrs ?? []) parts.push(lenField(3, Buffer.concat([strField(1, a), varintField(2, 1)])));
      if (withNoise) parts.push(noise());
      return lenField(2, Buffer.concat(parts));
    });
    // The code after the first domain: readers must not rely on field order.
    const body = ds.length > 0 ? [ds[0], strField(1, code.toUpperCase()), ...ds.slice(1)] : [strField(1, code.toUpperCase())];
    if (withNoise) body.push(noise());
    return lenField(1, Buffer.concat(body));
  });
  return Buffer.concat(entries);
}

export interface IpList {
  cidrs: string[];
  reverse?: boolean;
}

/** A geoip.dat with one list per key; CIDRs as `addr/bits`. */
export function geoipDat(lists: Record<string, IpList>): Buffer {
  const entries = Object.entries(lists).map(([code, list]) => {
    const parts: Buffer[] = [];
    for (const c of list.cidrs) {
      const [addr, bits] = c.split("/");
      const ip = parseIP(addr);
      if (!ip) throw new Error(`bad CIDR ${c}`);
      parts.push(lenField(2, Buffer.concat([lenField(1, ip), varintField(2, Number(bits ?? ip.length * 8)), noise()])));
    }
    // reverse_match before the code and the CIDRs after: any order is legal.
    if (list.reverse) parts.unshift(varintField(3, 1));
    parts.push(strField(1, code.toUpperCase()), noise());
    return lenField(1, Buffer.concat(parts));
  });
  return Buffer.concat(entries);
}

// ---------------------------------------------------------------------------------------------
// MaxMind DB.

type MmdbValue = string | number | bigint | boolean | MmdbValue[] | { [k: string]: MmdbValue };

function ctrl(type: number, size: number): Buffer {
  const ext = type > 7;
  let sizeBits: number;
  let extra: number[] = [];
  if (size < 29) sizeBits = size;
  else if (size < 29 + 256) [sizeBits, extra] = [29, [size - 29]];
  else if (size < 285 + 65536) [sizeBits, extra] = [30, [(size - 285) >> 8, (size - 285) & 0xff]];
  else [sizeBits, extra] = [31, [((size - 65821) >> 16) & 0xff, ((size - 65821) >> 8) & 0xff, (size - 65821) & 0xff]];
  const first = ((ext ? 0 : type) << 5) | sizeBits;
  return Buffer.from(ext ? [first, type - 7, ...extra] : [first, ...extra]);
}

function uintBytes(n: bigint): Buffer {
  const out: number[] = [];
  while (n > 0n) {
    out.unshift(Number(n & 0xffn));
    n >>= 8n;
  }
  return Buffer.from(out);
}

function encode(v: MmdbValue): Buffer {
  if (typeof v === "string") {
    const b = Buffer.from(v, "utf8");
    return Buffer.concat([ctrl(2, b.length), b]);
  }
  if (typeof v === "boolean") return ctrl(14, v ? 1 : 0);
  if (typeof v === "number" || typeof v === "bigint") {
    const n = BigInt(v);
    const type = n < 0x10000n ? 5 : n < 0x100000000n ? 6 : 9;
    const b = uintBytes(n);
    return Buffer.concat([ctrl(type, b.length), b]);
  }
  if (Array.isArray(v)) return Buffer.concat([ctrl(11, v.length), ...v.map(encode)]);
  const keys = Object.keys(v);
  return Buffer.concat([ctrl(7, keys.length), ...keys.flatMap((k) => [encode(k), encode(v[k])])]);
}

interface TreeNode {
  children: [TreeRef, TreeRef];
}
type TreeRef = TreeNode | { data: number } | null;

const isNode = (r: TreeRef): r is TreeNode => r !== null && "children" in r;

function bitsOf(ip: Uint8Array, width: number): number[] {
  const out: number[] = [];
  for (let i = 0; i < width; i++) out.push((ip[i >> 3] >> (7 - (i & 7))) & 1);
  return out;
}

/** Walks (creating nodes) along `bits` and returns the parent node and the side of the last step. */
function descend(root: TreeNode, bits: number[]): [TreeNode, number] {
  let node = root;
  for (let i = 0; i < bits.length - 1; i++) {
    const next = node.children[bits[i]];
    if (isNode(next)) node = next;
    else {
      const fresh: TreeNode = { children: [next, next] };
      node.children[bits[i]] = fresh;
      node = fresh;
    }
  }
  return [node, bits[bits.length - 1]];
}

export interface MmdbNetwork {
  cidr: string;
  /** ISO code for `country`; use `registered` for a record with only `registered_country`. */
  country?: string;
  registered?: string;
}

/**
 * A country database: IPv6 tree (IPv4 under ::/96, aliased at ::ffff:0:0/96 as MaxMind does) or
 * an IPv4-only tree. Records: { country: { iso_code, geoname_id }, registered_country: {...} }.
 */
export function countryMmdb(networks: MmdbNetwork[], opts: { ipVersion?: 4 | 6; recordSize?: 24 | 28 | 32 } = {}): Buffer {
  const ipVersion = opts.ipVersion ?? 6;
  const recordSize = opts.recordSize ?? 28;
  const dataParts: Buffer[] = [];
  const offsets = new Map<string, number>();
  let dataLength = 0;
  const dataFor = (n: MmdbNetwork): number => {
    const k = `${n.country ?? ""}/${n.registered ?? ""}`;
    let at = offsets.get(k);
    if (at === undefined) {
      const rec: Record<string, MmdbValue> = {};
      if (n.country) rec.country = { iso_code: n.country, geoname_id: 1000 + n.country.charCodeAt(0), names: { en: `Country ${n.country}` } };
      if (n.registered) rec.registered_country = { iso_code: n.registered, geoname_id: 2000 };
      const b = encode(rec);
      at = dataLength;
      offsets.set(k, at);
      dataParts.push(b);
      dataLength += b.length;
    }
    return at;
  };
  const root: TreeNode = { children: [null, null] };
  for (const n of networks) {
    const [addr, bitsText] = n.cidr.split("/");
    const ip = parseIP(addr);
    if (!ip) throw new Error(`bad network ${n.cidr}`);
    let bits = Number(bitsText);
    let full = ip;
    if (ipVersion === 6 && ip.length === 4) {
      full = new Uint8Array(16);
      full.set(ip, 12);
      bits += 96;
    }
    if (ipVersion === 4 && ip.length !== 4) throw new Error("IPv6 network in an IPv4 database");
    const [parent, side] = descend(root, bitsOf(full, bits));
    parent.children[side] = { data: dataFor(n) };
  }
  if (ipVersion === 6) {
    // The IPv4 subtree root (at ::/96) and its alias at ::ffff:0:0/96.
    const [p4, s4] = descend(root, bitsOf(new Uint8Array(16), 97));
    const v4root = p4;
    void s4;
    const mapped = new Uint8Array(16);
    mapped[10] = 0xff;
    mapped[11] = 0xff;
    const [pm, sm] = descend(root, bitsOf(mapped, 96));
    pm.children[sm] = v4root;
  }
  // Number the nodes breadth-first, each once (the alias shares the IPv4 subtree).
  const order: TreeNode[] = [];
  const index = new Map<TreeNode, number>();
  const queue: TreeNode[] = [root];
  index.set(root, 0);
  while (queue.length > 0) {
    const n = queue.shift() as TreeNode;
    order.push(n);
    for (const c of n.children) {
      if (isNode(c) && !index.has(c)) {
        index.set(c, index.size);
        queue.push(c);
      }
    }
  }
  const nodeCount = order.length;
  const value = (r: TreeRef): number => (r === null ? nodeCount : isNode(r) ? (index.get(r) as number) : nodeCount + 16 + r.data);
  const nodeBytes = recordSize / 4;
  const tree = Buffer.alloc(nodeCount * nodeBytes);
  order.forEach((n, i) => {
    const o = i * nodeBytes;
    const [l, r] = [value(n.children[0]), value(n.children[1])];
    if (recordSize === 24) {
      tree.writeUIntBE(l, o, 3);
      tree.writeUIntBE(r, o + 3, 3);
    } else if (recordSize === 28) {
      tree.writeUIntBE(l & 0xffffff, o, 3);
      tree[o + 3] = ((l >>> 24) << 4) | (r >>> 24);
      tree.writeUIntBE(r & 0xffffff, o + 4, 3);
    } else {
      tree.writeUInt32BE(l, o);
      tree.writeUInt32BE(r, o + 4);
    }
  });
  const metadata = encode({
    node_count: nodeCount,
    record_size: recordSize,
    ip_version: ipVersion,
    database_type: "Sluice-Test-Country",
    languages: ["en"],
    binary_format_major_version: 2,
    binary_format_minor_version: 0,
    build_epoch: 1_700_000_000n,
    description: { en: "test country database" },
  });
  return Buffer.concat([tree, Buffer.alloc(16), ...dataParts, Buffer.from("abcdef4d61784d696e642e636f6d", "hex"), metadata]);
}
