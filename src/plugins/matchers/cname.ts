// `cname`: true when a CNAME target in the response's answer section matches a domain rule or provider.

import { QTYPE } from "../../dns/constants.js";
import { normalizeName, readName } from "../../dns/name.js";
import { SECTION_ANSWER } from "../../dns/view.js";
import { compileDomainRuleList, namePredicate, ruleListArgs, ruleListDependencies, ruleListProblems, type RuleListArgs } from "../../engine/rules/rule-list.js";
import { definePlugin } from "../../registry/types.js";

export const cnameMatcher = definePlugin<RuleListArgs, "matcher">({
  type: "cname",
  kind: "matcher",
  feature: "core",
  summary: "Matches CNAME targets in the response against domain rules, rule files and domain providers.",
  ...ruleListArgs,
  check: (args) => ruleListProblems(args, "domain"),
  dependencies: (args) => ruleListDependencies(args),
  async create(args, ctx) {
    const { table, providers } = await compileDomainRuleList(args, ctx);
    const matches = namePredicate(table, providers);
    return {
      match(dns) {
        const resp = dns.response;
        if (resp === null || resp.answerCount === 0) return false;
        // Read targets straight from the wire: no full decode of the response.
        try {
          const wire = resp.toWire();
          const records = resp.index.records;
          for (let i = 0; i < records.length; i++) {
            const r = records[i];
            if (r.section !== SECTION_ANSWER) break;
            if (r.type === QTYPE.CNAME && matches(normalizeName(readName(wire, r.fixed + 10).name))) return true;
          }
        } catch {
          return false; // a malformed response matches nothing
        }
        return false;
      },
    };
  },
});
