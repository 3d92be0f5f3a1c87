// `qname`: true when the question name matches a domain rule, a rule from a &file, or a $provider.

import { normalizeName } from "../../dns/name.js";
import { compileDomainRuleList, namePredicate, ruleListArgs, ruleListDependencies, ruleListProblems, type RuleListArgs } from "../../engine/rules/rule-list.js";
import { definePlugin } from "../../registry/types.js";

export const qnameMatcher = definePlugin<RuleListArgs, "matcher">({
  type: "qname",
  kind: "matcher",
  feature: "core",
  summary: "Matches the question name against domain rules, rule files and domain providers.",
  ...ruleListArgs,
  check: (args) => ruleListProblems(args, "domain"),
  dependencies: (args) => ruleListDependencies(args),
  async create(args, ctx) {
    const { table, providers } = await compileDomainRuleList(args, ctx);
    const matches = namePredicate(table, providers);
    return {
      match(dns) {
        const qs = dns.query.questions;
        if (qs.length === 0) return false;
        if (matches(dns.qname)) return true;
        for (let i = 1; i < qs.length; i++) if (matches(normalizeName(qs[i].name))) return true;
        return false;
      },
    };
  },
});
