// MaxMind DB (.mmdb) country databases (GeoLite2-Country, DB-IP country lite, ...): every network
// whose country is selected, walked out of the search tree once at build time into the same CIDR
// set geoip.dat fills, so a lookup is a binary search, not a tree walk and a record decode.
// mmdb-lib parses the metadata and decodes data records (reached through its public get() with
// each distinct record's first network); the tree walk itself is ours, as mmdb-lib has none.

import type { CountryResponse, Reader } from "mmdb-lib";
import type * as Mmdb from "mmdb-lib";
import { lazyModule } from "../../../lazy-module.js";

const mmdb = lazyModule<typeof Mmdb>("mmdb-lib");
import { Slicer } from "../../../engine/rules/slicer.js";

const MARKER = Buffer.from("abcdef4d61784d696e642e636f6d", "hex"); // "\xAB\xCD\xEFMaxMind.com"
/** The metadata sits in the last 128 KiB of the file (MaxMind DB spec). */
const METADATA_MAX = 128 * 1024;

/** True when `buf` looks like a MaxMind DB (the metadata marker near its end). */
export function isMmdb(buf: Buffer): boolean {
  return buf.lastIndexOf(MARKER) >= Math.max(0, buf.length - METADATA_MAX);
}

export class MmdbError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "MmdbError";
  }
}

function format(bytes: Uint8Array, v4: boolean): string {
  if (v4) return `${bytes[0]}.${bytes[1]}.${bytes[2]}.${bytes[3]}`;
  const groups: string[] = [];
  for (let i = 0; i < 16; i += 2) groups.push(((bytes[i] << 8) | bytes[i + 1]).toString(16));
  return groups.join(":");
}

/**
 * Calls `onNetwork` for every network whose country (or, lacking one, registered country) ISO code
 * is selected (any code when `selection` is null). Returns the selected codes seen and every code in the file.
 */
export async function readMmdbCountries(
  buf: Buffer,
  selection: ReadonlySet<string> | null,
  onNetwork: (ip: Uint8Array, bits: number) => void,
  slicer = new Slicer(),
): Promise<{ found: Set<string>; all: Set<string> }> {
  let reader: Reader<CountryResponse>;
  try {
    reader = new (mmdb().Reader)<CountryResponse>(buf);
  } catch (err) {
    throw new MmdbError(`not a readable MaxMind DB: ${(err as Error).message}`);
  }
  const { nodeCount, recordSize, ipVersion, searchTreeSize } = reader.metadata;
  if (![24, 28, 32].includes(recordSize) || (ipVersion !== 4 && ipVersion !== 6) || !Number.isInteger(nodeCount) || searchTreeSize + 16 > buf.length) {
    throw new MmdbError(`unsupported MaxMind DB metadata (record size ${recordSize}, IP version ${ipVersion}, ${nodeCount} nodes)`);
  }
  const nodeBytes = recordSize / 4;
  const record = (node: number, right: number): number => {
    const o = node * nodeBytes;
    if (recordSize === 24) {
      const p = o + right * 3;
      return (buf[p] << 16) | (buf[p + 1] << 8) | buf[p + 2];
    }
    if (recordSize === 28) {
      const middle = buf[o + 3];
      const high = right ? middle & 0x0f : middle >>> 4;
      const p = right ? o + 4 : o;
      return high * 0x1000000 + ((buf[p] << 16) | (buf[p + 1] << 8) | buf[p + 2]);
    }
    return buf.readUInt32BE(o + right * 4);
  };

  // Where IPv4 lives in an IPv6 tree: ::/96, 96 steps left from the root.
  let ipv4Start = 0;
  if (ipVersion === 6) for (let i = 0; i < 96 && ipv4Start < nodeCount; i++) ipv4Start = record(ipv4Start, 0);

  const codes = new Map<number, string | null>();
  const found = new Set<string>();
  const all = new Set<string>();
  const codeOf = (pointer: number, bytes: Uint8Array, v4: boolean): string | null => {
    let code = codes.get(pointer);
    if (code === undefined) {
      let data: CountryResponse | null;
      try {
        data = reader.get(format(bytes, v4));
      } catch (err) {
        throw new MmdbError(`cannot decode the record for ${format(bytes, v4)}: ${(err as Error).message}`);
      }
      const iso = data?.country?.iso_code ?? data?.registered_country?.iso_code;
      code = typeof iso === "string" ? iso.toUpperCase() : null;
      codes.set(pointer, code);
      if (code !== null) all.add(code);
    }
    return code;
  };

  // Depth-first over the tree with an explicit stack of (node, depth, address as four 32-bit words),
  // yielding to the event loop between slices. A well-formed tree visits each node once (the IPv4
  // subtree and its aliases, ::ffff:0:0/96 and 2002::/16, are walked once, as IPv4).
  let visits = 0;
  const maxVisits = 2 * nodeCount + 2;
  const leaf = (pointer: number, words: number[], depth: number, v4: boolean): void => {
    const bytes = new Uint8Array(v4 ? 4 : 16);
    for (let i = 0; i < bytes.length; i++) bytes[i] = (words[i >> 2] >>> (24 - 8 * (i & 3))) & 0xff;
    const code = codeOf(pointer, bytes, v4);
    if (code !== null && (selection === null || selection.has(code))) {
      found.add(code);
      onNetwork(bytes, depth);
    }
  };
  const walk = async (root: number, width: number, v4: boolean): Promise<void> => {
    if (root === nodeCount) return;
    // The whole family is one network (a tree whose ::/96 path ends in a record).
    if (root > nodeCount) return leaf(root, [0, 0, 0, 0], 0, v4);
    const stack: number[] = [root, 0, 0, 0, 0, 0];
    const words = [0, 0, 0, 0];
    while (stack.length > 0) {
      const w3 = stack.pop() as number;
      const w2 = stack.pop() as number;
      const w1 = stack.pop() as number;
      const w0 = stack.pop() as number;
      const depth = stack.pop() as number;
      const node = stack.pop() as number;
      if (++visits > maxVisits) throw new MmdbError("the search tree is not a tree (nodes are reached more than once)");
      if (slicer.due()) await slicer.pause();
      // Right first onto the stack, so the left (lower) half comes out first.
      for (let side = 1; side >= 0; side--) {
        words[0] = w0;
        words[1] = w1;
        words[2] = w2;
        words[3] = w3;
        if (side) words[depth >> 5] = (words[depth >> 5] | (1 << (31 - (depth & 31)))) >>> 0;
        const next = record(node, side);
        if (next < nodeCount) {
          if (!v4 && ipVersion === 6 && next === ipv4Start) continue;
          if (depth + 1 >= width) throw new MmdbError(`the search tree is deeper than ${width} bits`);
          stack.push(next, depth + 1, words[0], words[1], words[2], words[3]);
        } else if (next > nodeCount) {
          if (next - nodeCount + searchTreeSize >= buf.length) throw new MmdbError(`a record points past the end of the file (${next})`);
          leaf(next, words, depth + 1, v4);
        }
        // next === nodeCount: no data for this network.
      }
    }
  };
  await walk(ipv4Start, 32, true);
  if (ipVersion === 6) await walk(0, 128, false);
  return { found, all };
}
