// `sequence`: the rule engine. Each rule is `{matches?, exec}`; see docs/plugins.md#sequence.

import { execExprDeps, matchExprDeps, parseExecExpr, parseMatchExpr, type ExecExpr, type MatchExpr } from "../../engine/expr.js";
import { builtinAction, CompiledSequence, compiledMatcher, executorAction, type CompiledMatcher, type CompiledRule } from "../../engine/sequence.js";
import { argProblems, definePlugin, type ArgProblem, type CheckEnv, type DependencySpec } from "../../registry/types.js";

interface RuleArgs {
  matches?: string | string[];
  exec: string;
}
type SequenceArgs = RuleArgs[];

interface ParsedRule {
  matches: { expr: MatchExpr; path: (string | number)[] }[];
  exec: ExecExpr;
  execPath: (string | number)[];
}

function parseRules(args: SequenceArgs): ParsedRule[] {
  return args.map((rule, i) => {
    const list = rule.matches === undefined ? [] : Array.isArray(rule.matches) ? rule.matches : [rule.matches];
    const matches = list.map((m, j) => {
      const path = Array.isArray(rule.matches) ? [i, "matches", j] : [i, "matches"];
      return { expr: parseMatchExpr(m, path), path };
    });
    const execPath = [i, "exec"];
    return { matches, exec: parseExecExpr(rule.exec, execPath), execPath };
  });
}

function analyse(args: SequenceArgs, env: CheckEnv): { deps: DependencySpec[]; problems: ArgProblem[] } {
  const deps: DependencySpec[] = [];
  const problems: ArgProblem[] = [];
  const parseProblems = argProblems(() => parseRules(args));
  if (parseProblems.length > 0) return { deps, problems: parseProblems };
  const rules = parseRules(args);
  for (const r of rules) {
    for (const m of r.matches) {
      const out = matchExprDeps(m.expr, m.path, env);
      deps.push(...out.deps);
      problems.push(...out.problems);
    }
    const out = execExprDeps(r.exec, r.execPath, env);
    deps.push(...out.deps);
    problems.push(...out.problems);
  }
  return { deps, problems };
}

export const sequence = definePlugin<SequenceArgs, "executor">({
  type: "sequence",
  kind: "executor",
  feature: "core",
  summary: "Runs rules in order: matchers decide, executors act (the pipeline itself).",
  schema: {
    type: "array",
    minItems: 1,
    items: {
      type: "object",
      additionalProperties: false,
      required: ["exec"],
      properties: {
        matches: { type: ["string", "array"], items: { type: "string" } },
        exec: { type: "string", minLength: 1 },
      },
    },
  },
  check: (args, env) => analyse(args, env).problems,
  dependencies: (args, env) => analyse(args, env).deps,
  async create(args, ctx) {
    const rules: CompiledRule[] = [];
    for (const [i, r] of parseRules(args).entries()) {
      const matchers: CompiledMatcher[] = [];
      for (const [j, m] of r.matches.entries()) {
        if ("ref" in m.expr) {
          matchers.push(compiledMatcher(m.expr.ref, ctx.matcher(m.expr.ref, m.expr.negate)));
        } else {
          const type = m.expr.quick.split(/\s/)[0];
          const tag = `qs.match.${ctx.tag}.${i}.${j}.${type}`;
          matchers.push(compiledMatcher(tag, await ctx.quickMatcher(m.expr.quick, tag, m.expr.negate)));
        }
      }
      const e = r.exec;
      if ("ref" in e) {
        const ex = ctx.executor(e.ref);
        rules.push({ matchers, action: executorAction(ex), continuation: ex.continuation === true, kind: "executor", tag: e.ref });
      } else if ("quick" in e) {
        const type = e.quick.split(/\s/)[0];
        const tag = `qs.exec.${ctx.tag}.${i}.${type}`;
        const ex = await ctx.quickExecutor(e.quick, tag);
        rules.push({ matchers, action: executorAction(ex), continuation: ex.continuation === true, kind: "executor", tag });
      } else {
        const target = e.builtin === "jump" || e.builtin === "goto" ? ctx.executor(e.target) : null;
        // goto ends this sequence with the target's result, whatever it is (Next included).
        rules.push({ matchers, action: builtinAction(e, target), continuation: e.builtin === "goto", kind: "builtin", tag: e.builtin });
      }
    }
    return new CompiledSequence(ctx.tag, rules);
  },
});
