// `resp_ip`: true when an A/AAAA address in the response's answer section matches an IP rule or provider.

import { QTYPE } from "../../dns/constants.js";
import { SECTION_ANSWER } from "../../dns/view.js";
import { compileIpRuleList, ipPredicate, ruleListArgs, ruleListDependencies, ruleListProblems, type RuleListArgs } from "../../engine/rules/rule-list.js";
import { definePlugin } from "../../registry/types.js";

export const respIpMatcher = definePlugin<RuleListArgs, "matcher">({
  type: "resp_ip",
  kind: "matcher",
  feature: "core",
  summary: "Matches answer addresses (A/AAAA) in the response against IP/CIDR rules, rule files and IP providers.",
  ...ruleListArgs,
  check: (args) => ruleListProblems(args, "ip"),
  dependencies: (args) => ruleListDependencies(args),
  async create(args, ctx) {
    const { set, providers } = await compileIpRuleList(args, ctx);
    const matches = ipPredicate(set, providers);
    const localOnly = providers.length === 0;
    return {
      match(dns) {
        const resp = dns.response;
        if (resp === null || resp.answerCount === 0) return false;
        // Addresses are read from the wire through the structural index: no full decode.
        try {
          const wire = resp.toWire();
          const records = resp.index.records;
          for (let i = 0; i < records.length; i++) {
            const r = records[i];
            if (r.section !== SECTION_ANSWER) break;
            const data = r.fixed + 10;
            const len = r.end - data;
            if (r.type === QTYPE.A && len === 4) {
              if (localOnly ? set.containsV4(wire.readUInt32BE(data)) : matches(wire.subarray(data, r.end))) return true;
            } else if (r.type === QTYPE.AAAA && len === 16) {
              if (matches(wire.subarray(data, r.end))) return true;
            }
          }
        } catch {
          return false; // a malformed response matches nothing
        }
        return false;
      },
    };
  },
});
