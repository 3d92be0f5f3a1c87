// `ip_set`: a named, reloadable set of IP addresses and CIDRs (inline, from files, and other IP sets).

import { IpPrefixSetBuilder, type IpPrefixSet } from "../../engine/rules/ip.js";
import { ipProvider } from "../../engine/rules/rule-list.js";
import type { Slicer } from "../../engine/rules/slicer.js";
import { loadRuleTokens } from "../../engine/rules/source.js";
import { definePlugin } from "../../registry/types.js";
import { ServingRules } from "./reload.js";
import { setDataFiles, setDependencies, setProblems, setSchema, setTag, setTokens, type SetArgs } from "./set-args.js";

interface IpSetArgs {
  ips: string[];
  files: string[];
  sets: string[];
}

const asSet = (a: IpSetArgs): SetArgs => ({ rules: a.ips, files: a.files, sets: a.sets });

export const ipSet = definePlugin<IpSetArgs, "provider">({
  type: "ip_set",
  kind: "provider",
  feature: "core",
  summary: "A reloadable set of IPv4/IPv6 addresses and CIDRs from args, files and other sets.",
  schema: setSchema("ips"),
  check: (args) => setProblems(asSet(args), "ips", "ip"),
  dependencies: (args) => setDependencies(asSet(args)),
  dataFiles: (args) => setDataFiles(asSet(args), "ips"),
  async create(args, ctx) {
    const tokens = setTokens(asSet(args), "ips");
    const build = async (slicer: Slicer): Promise<IpPrefixSet> => {
      const builder = new IpPrefixSetBuilder();
      await loadRuleTokens(tokens, (p) => ctx.resolvePath(p), (rule) => builder.add(rule), slicer);
      return builder.buildSliced(slicer);
    };
    const snapshot = await ServingRules.load("ip_set", ctx, build);
    const sets = args.sets.map((entry, i) => ipProvider(ctx, setTag(entry), ["sets", i]));
    return {
      containsIp(ip: Uint8Array): boolean {
        const local = snapshot.current;
        if (local.size > 0 && local.contains(ip)) return true;
        for (let i = 0; i < sets.length; i++) if (sets[i].containsIp(ip)) return true;
        return false;
      },
      reload: () => snapshot.reload(),
      get rules() {
        return snapshot.rules;
      },
    };
  },
});
