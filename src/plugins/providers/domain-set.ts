// `domain_set`: a named, reloadable set of domain rules (inline, from files, and other domain sets).

import type { Question } from "../../dns/message.js";
import { normalizeName } from "../../dns/name.js";
import { DomainTableBuilder, type DomainTable } from "../../engine/rules/domain.js";
import { domainProvider } from "../../engine/rules/rule-list.js";
import type { Slicer } from "../../engine/rules/slicer.js";
import { loadRuleTokens } from "../../engine/rules/source.js";
import { definePlugin } from "../../registry/types.js";
import { ServingRules } from "./reload.js";
import { setDataFiles, setDependencies, setProblems, setSchema, setTag, setTokens, type SetArgs } from "./set-args.js";

interface DomainSetArgs {
  exps: string[];
  files: string[];
  sets: string[];
}

const asSet = (a: DomainSetArgs): SetArgs => ({ rules: a.exps, files: a.files, sets: a.sets });

export const domainSet = definePlugin<DomainSetArgs, "provider">({
  type: "domain_set",
  kind: "provider",
  feature: "core",
  summary: "A reloadable set of domain rules (full:, domain:, keyword:, regexp:) from args, files and other sets.",
  schema: setSchema("exps"),
  check: (args) => setProblems(asSet(args), "exps", "domain"),
  dependencies: (args) => setDependencies(asSet(args)),
  dataFiles: (args) => setDataFiles(asSet(args), "exps"),
  async create(args, ctx) {
    const tokens = setTokens(asSet(args), "exps");
    const build = async (slicer: Slicer): Promise<DomainTable<true>> => {
      const builder = new DomainTableBuilder<true>("domain");
      await loadRuleTokens(tokens, (p) => ctx.resolvePath(p), (rule) => builder.add(rule, true), slicer);
      return builder.buildSliced(slicer);
    };
    const snapshot = await ServingRules.load("domain_set", ctx, build);
    const sets = args.sets.map((entry, i) => domainProvider(ctx, setTag(entry), ["sets", i]));
    // A referenced set that understands whole questions is asked with the question, not just the name.
    const setQuestion = args.sets.map((entry, i) => {
      const p = ctx.provider(setTag(entry));
      return p.containsQuestion ? p.containsQuestion.bind(p) : (q: Question) => sets[i].containsName(normalizeName(q.name));
    });
    return {
      containsName(name: string): boolean {
        const local = snapshot.current;
        if (local.size > 0 && local.has(name)) return true;
        for (let i = 0; i < sets.length; i++) if (sets[i].containsName(name)) return true;
        return false;
      },
      containsQuestion(q: Question): boolean {
        const local = snapshot.current;
        if (local.size > 0 && local.has(normalizeName(q.name))) return true;
        for (let i = 0; i < setQuestion.length; i++) if (setQuestion[i](q)) return true;
        return false;
      },
      reload: () => snapshot.reload(),
      get rules() {
        return snapshot.rules;
      },
    };
  },
});
