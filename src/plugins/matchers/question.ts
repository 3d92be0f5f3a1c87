// `question`: true when any question satisfies any of the referenced providers (whole-question matching).

import type { Question } from "../../dns/message.js";
import { normalizeName } from "../../dns/name.js";
import { ArgError, argProblems, definePlugin } from "../../registry/types.js";
import { parseProviderRefs, providerRefDependencies, type ProviderRef } from "../provider-refs.js";

type QuestionArgs = string | string[];

const parseRefs = (args: QuestionArgs): ProviderRef[] =>
  parseProviderRefs(args, () => "only $provider references are accepted (declare rules in a domain_set)");

export const questionMatcher = definePlugin<QuestionArgs, "matcher">({
  type: "question",
  kind: "matcher",
  feature: "core",
  summary: "Matches when any question satisfies any referenced provider (by whole question where the provider supports it).",
  schema: { type: ["string", "array"], items: { type: "string" } },
  shorthand: (raw) => (raw === null || raw === undefined ? [] : raw),
  quickSetup: (param) => param,
  check: (args) => argProblems(() => parseRefs(args)),
  dependencies: (args) => providerRefDependencies(() => parseRefs(args)),
  create(args, ctx) {
    const tests = parseRefs(args).map((r): ((q: Question) => boolean) => {
      const p = ctx.provider(r.tag);
      if (typeof p.containsQuestion === "function") return p.containsQuestion.bind(p);
      const containsName = p.containsName;
      if (typeof containsName !== "function") throw new ArgError(`provider '${r.tag}' cannot match questions or domain names`, r.at);
      return (q) => containsName.call(p, normalizeName(q.name));
    });
    return {
      match(dns) {
        const qs = dns.query.questions;
        for (let i = 0; i < qs.length; i++) {
          for (let j = 0; j < tests.length; j++) if (tests[j](qs[i])) return true;
        }
        return false;
      },
    };
  },
});
