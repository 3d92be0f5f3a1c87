// `geoip`: IP lists from a v2ray geoip.dat, or the countries of a MaxMind DB (.mmdb, found by its
// metadata marker), compiled into the merged-range set ip_set uses: a lookup is a binary search.

import { IpPrefixSetBuilder, type IpPrefixSet } from "../../engine/rules/ip.js";
import type { Slicer } from "../../engine/rules/slicer.js";
import { ArgError, definePlugin } from "../../registry/types.js";
import { geoSchema, ipSelection, readGeoFile, requireCodes, selectorProblems, type GeoArgs } from "./geo/args.js";
import { listCodes, readGeoIp } from "./geo/dat.js";
import { isMmdb, MmdbError, readMmdbCountries } from "./geo/mmdb.js";
import { ProtobufError } from "./geo/protobuf.js";
import { ServingRules } from "./reload.js";

interface GeoIpRules {
  set: IpPrefixSet;
  /** Lists with reverse_match: an address matches when it is NOT in one of them. */
  reverse: IpPrefixSet[];
  size: number;
  skipped: number;
}

async function buildGeoIp(buf: Buffer, args: GeoArgs, slicer: Slicer, warn: (skipped: number, first: string) => void): Promise<GeoIpRules> {
  const selection = ipSelection(args.selectors);
  const main = new IpPrefixSetBuilder();
  if (isMmdb(buf)) {
    let codes: { found: Set<string>; all: Set<string> };
    try {
      codes = await readMmdbCountries(buf, selection, (ip, bits) => main.addPrefix(ip, bits), slicer);
    } catch (err) {
      if (err instanceof MmdbError) throw new ArgError(`'${args.file}': ${err.message}`, ["file"]);
      throw err;
    }
    requireCodes(args.file, selection, codes.found, () => [...codes.all].sort());
    return { set: await main.buildSliced(slicer), reverse: [], size: main.size, skipped: 0 };
  }
  const reverse: IpPrefixSetBuilder[] = [];
  let current = main;
  let skipped = 0;
  let first = "";
  let code = "";
  let found: Set<string>;
  try {
    found = await readGeoIp(
      buf,
      selection,
      (c, rev) => {
        code = c;
        current = rev ? new IpPrefixSetBuilder() : main;
        if (rev) reverse.push(current);
      },
      (ip, prefix) => {
        if ((ip.length === 4 && prefix <= 32) || (ip.length === 16 && prefix <= 128)) current.addPrefix(ip, prefix);
        else if (skipped++ === 0) first = `${code.toLowerCase()}: a CIDR of ${ip.length} bytes with prefix ${prefix}`;
      },
      slicer,
    );
  } catch (err) {
    if (err instanceof ProtobufError) throw new ArgError(`'${args.file}' is neither a MaxMind DB nor a valid geoip.dat: ${err.message}`, ["file"]);
    throw err;
  }
  requireCodes(args.file, selection, found, () => listCodes(buf));
  if (skipped > 0) warn(skipped, first);
  const size = main.size + reverse.reduce((n, b) => n + b.size, 0);
  const set = await main.buildSliced(slicer);
  const built: IpPrefixSet[] = [];
  for (const b of reverse) built.push(await b.buildSliced(slicer));
  return { set, reverse: built, size, skipped };
}

export const geoip = definePlugin<GeoArgs, "provider">({
  type: "geoip",
  kind: "provider",
  feature: "core",
  summary: "IP lists from a v2ray geoip.dat or the countries of a MaxMind .mmdb (selectors: list or ISO country codes), matched like an ip_set.",
  dataFiles: (args) => [{ path: args.file }],
  schema: geoSchema,
  check: (args) => selectorProblems(args.selectors, false),
  async create(args, ctx) {
    const build = async (slicer: Slicer): Promise<GeoIpRules> => {
      const buf = await readGeoFile(ctx.resolvePath(args.file), args.file);
      return buildGeoIp(buf, args, slicer, (skipped, first) => ctx.log.warn({ file: args.file, skipped, first }, `geoip: skipped ${skipped} malformed CIDR(s); first: ${first}`));
    };
    const snapshot = await ServingRules.load("geoip", ctx, build);
    return {
      containsIp(ip: Uint8Array): boolean {
        const s = snapshot.current;
        if (s.set.contains(ip)) return true;
        for (let i = 0; i < s.reverse.length; i++) if (!s.reverse[i].contains(ip)) return true;
        return false;
      },
      reload: () => snapshot.reload(),
      get rules() {
        return snapshot.rules;
      },
    };
  },
});
