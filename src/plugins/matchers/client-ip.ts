// `client_ip`: true when the client's address matches an IP/CIDR rule, a rule from a &file, or a $provider.

import { compileIpRuleList, ruleListArgs, ruleListDependencies, ruleListProblems, type RuleListArgs } from "../../engine/rules/rule-list.js";
import { definePlugin } from "../../registry/types.js";

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
    // The context parses the client address once, however many client_ip rules a query meets.
    if (providers.length === 0) {
      return {
        match(dns) {
          const ip = dns.clientAddress;
          return ip !== null && set.contains(ip);
        },
      };
    }
    return {
      match(dns) {
        const ip = dns.clientAddress;
        if (ip === null) return false;
        if (set.size > 0 && set.contains(ip)) return true;
        for (let i = 0; i < providers.length; i++) if (providers[i].containsIp(ip)) return true;
        return false;
      },
    };
  },
});
