// `ptr_ip`: true when a PTR question's reverse name (in-addr.arpa / ip6.arpa) is an address that matches.

import { QTYPE } from "../../dns/constants.js";
import { normalizeName } from "../../dns/name.js";
import { reverseNameToIp } from "../../engine/rules/reverse-name.js";
import { compileIpRuleList, ipPredicate, ruleListArgs, ruleListDependencies, ruleListProblems, type RuleListArgs } from "../../engine/rules/rule-list.js";
import { definePlugin } from "../../registry/types.js";

export const ptrIpMatcher = definePlugin<RuleListArgs, "matcher">({
  type: "ptr_ip",
  kind: "matcher",
  feature: "core",
  summary: "Matches the address named by a PTR question against IP/CIDR rules, rule files and IP providers.",
  ...ruleListArgs,
  check: (args) => ruleListProblems(args, "ip"),
  dependencies: (args) => ruleListDependencies(args),
  async create(args, ctx) {
    const { set, providers } = await compileIpRuleList(args, ctx);
    const matches = ipPredicate(set, providers);
    return {
      match(dns) {
        const qs = dns.query.questions;
        for (let i = 0; i < qs.length; i++) {
          if (qs[i].type !== QTYPE.PTR) continue;
          const ip = reverseNameToIp(i === 0 ? dns.qname : normalizeName(qs[i].name));
          if (ip !== null && matches(ip)) return true;
        }
        return false;
      },
    };
  },
});
