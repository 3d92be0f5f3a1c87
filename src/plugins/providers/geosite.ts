// `geosite`: domain lists from a v2ray geosite.dat, compiled into the same table domain_set uses
// (Plain → keyword, Regex → regexp, RootDomain → domain, Full → full), so a lookup costs the
// same whatever the lists' size. `selectors` picks lists (`cn`, `category-ads-all@ads`).

import { DomainTableBuilder, RuleSyntaxError, type DomainTable } from "../../engine/rules/domain.js";
import type { Slicer } from "../../engine/rules/slicer.js";
import { ArgError, definePlugin } from "../../registry/types.js";
import { readGeoFile, requireCodes, selectorProblems, siteSelection, geoSchema, type GeoArgs } from "./geo/args.js";
import { listCodes, readGeoSite } from "./geo/dat.js";
import { ProtobufError } from "./geo/protobuf.js";
import { ServingRules } from "./reload.js";

const PREFIX = ["keyword:", "regexp:", "domain:", "full:"];

interface GeoSiteRules {
  table: DomainTable<true>;
  size: number;
  skipped: number;
}

export const geosite = definePlugin<GeoArgs, "provider">({
  type: "geosite",
  kind: "provider",
  feature: "core",
  summary: "Domain lists from a v2ray geosite.dat (selectors: list codes, code@attribute), matched like a domain_set.",
  dataFiles: (args) => [{ path: args.file }],
  schema: geoSchema,
  check: (args) => selectorProblems(args.selectors, true),
  async create(args, ctx) {
    const selection = siteSelection(args.selectors);
    const build = async (slicer: Slicer): Promise<GeoSiteRules> => {
      const buf = await readGeoFile(ctx.resolvePath(args.file), args.file);
      const builder = new DomainTableBuilder<true>("domain");
      let skipped = 0;
      let first = "";
      let found: Set<string>;
      try {
        found = await readGeoSite(buf, selection, (type, value, code) => {
          try {
            if (type >= PREFIX.length) throw new RuleSyntaxError(`unknown domain type ${type}`);
            builder.add(PREFIX[type] + value, true);
          } catch (err) {
            if (!(err instanceof RuleSyntaxError)) throw err;
            if (skipped++ === 0) first = `${code.toLowerCase()}: ${err.message}`;
          }
        }, slicer);
      } catch (err) {
        if (err instanceof ProtobufError) throw new ArgError(`'${args.file}' is not a valid geosite.dat: ${err.message}`, ["file"]);
        throw err;
      }
      requireCodes(args.file, selection?.keys() ?? null, found, () => listCodes(buf));
      // v2ray accepts entries our rule compiler does not (non-ASCII names, RE2-only regexps): skip, count, say so once.
      if (skipped > 0) ctx.log.warn({ file: args.file, skipped, first }, `geosite: skipped ${skipped} entr${skipped === 1 ? "y" : "ies"} that cannot be compiled; first: ${first}`);
      const table = await builder.buildSliced(slicer);
      return { table, size: table.size, skipped };
    };
    const snapshot = await ServingRules.load("geosite", ctx, build);
    return {
      containsName(name: string): boolean {
        return snapshot.current.table.has(name);
      },
      reload: () => snapshot.reload(),
      get rules() {
        return snapshot.rules;
      },
    };
  },
});
