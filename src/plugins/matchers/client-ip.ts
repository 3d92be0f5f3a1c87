// `client_ip`: true when the client's address matches an IP/CIDR rule, a rule from a &file, or a $provider.

import { parseIP, unmapIPv4 } from "../../dns/ip.js";
import { compileIpRuleList, ruleListArgs, ruleListDependencies, ruleListProblems, type RuleListArgs } from "../../engine/rules/rule-list.js";
import { definePlugin } from "../../registry/types.js";

/** Peer address text without a zone id (`fe80::1%eth0`). */
function withoutZone(ip: string): string {
  const pct = ip.indexOf("%");
  return pct < 0 ? ip : ip.slice(0, pct);
}

export const clientIpMatcher = definePlugin<RuleListArgs, "matcher">({
  type: "client_ip",
  kind: "matcher",
  feature: "core",
  summary: "Matches the client address against IP/CIDR rules, rule files and IP providers.",
  ...ruleListArgs,
  check: (args) => ruleListProblems(args, "ip"),
  dependencies: (args) => ruleListDependencies(args),
  async create(args, ctx) {
    const { set, providers } = await compileIpRuleList(args, ctx);
    if (providers.length === 0) return { match: (dns) => set.containsText(withoutZone(dns.clientIp)) };
    return {
      match(dns) {
        const text = withoutZone(dns.clientIp);
        if (set.size > 0 && set.containsText(text)) return true;
        const ip = parseIP(text);
        if (ip === null) return false;
        const plain = unmapIPv4(ip);
        for (let i = 0; i < providers.length; i++) if (providers[i].containsIp(plain)) return true;
        return false;
      },
    };
  },
});
