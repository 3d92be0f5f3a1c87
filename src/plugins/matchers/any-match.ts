// `any_match`: OR over matcher expressions ($tag, !$tag, quick setup, !quick setup), first true wins.

import { matchExprDeps, parseMatchExpr, type MatchExpr } from "../../engine/expr.js";
import type { Matcher } from "../../engine/types.js";
import { argProblems, definePlugin, type ArgProblem, type CheckEnv, type DependencySpec } from "../../registry/types.js";

type AnyMatchArgs = string[];

function parse(args: AnyMatchArgs): { expr: MatchExpr; path: (string | number)[] }[] {
  return args.map((text, i) => ({ expr: parseMatchExpr(text, [i]), path: [i] }));
}

function analyse(args: AnyMatchArgs, env: CheckEnv): { deps: DependencySpec[]; problems: ArgProblem[] } {
  const deps: DependencySpec[] = [];
  const problems: ArgProblem[] = [];
  const parseProblems = argProblems(() => parse(args));
  if (parseProblems.length > 0) return { deps, problems: parseProblems };
  const exprs = parse(args);
  for (const e of exprs) {
    const out = matchExprDeps(e.expr, e.path, env);
    deps.push(...out.deps);
    problems.push(...out.problems);
  }
  return { deps, problems };
}

export const anyMatch = definePlugin<AnyMatchArgs, "matcher">({
  type: "any_match",
  kind: "matcher",
  feature: "core",
  summary: "Matches when any of its matcher expressions matches.",
  schema: { type: "array", minItems: 1, items: { type: "string", minLength: 1 } },
  // A block string holds one expression per line.
  shorthand: (raw) => (typeof raw === "string" ? raw.split("\n").map((l) => l.trim()).filter((l) => l.length > 0) : raw),
  check: (args, env) => analyse(args, env).problems,
  dependencies: (args, env) => analyse(args, env).deps,
  async create(args, ctx) {
    const matchers: Matcher[] = [];
    for (const [i, e] of parse(args).entries()) {
      if ("ref" in e.expr) matchers.push(ctx.matcher(e.expr.ref, e.expr.negate));
      else {
        const type = e.expr.quick.split(/\s/)[0];
        matchers.push(await ctx.quickMatcher(e.expr.quick, `qs.match.${ctx.tag}.${i}.${type}`, e.expr.negate));
      }
    }
    return {
      match(dnsCtx) {
        for (const m of matchers) if (m.match(dnsCtx)) return true;
        return false;
      },
    };
  },
});
