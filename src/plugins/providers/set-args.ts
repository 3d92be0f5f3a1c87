// Args shared by the `domain_set` and `ip_set` providers: inline rules, rule files, and other sets.

import { parseDomainRule, RuleSyntaxError } from "../../engine/rules/domain.js";
import { parseIpRule } from "../../engine/rules/ip.js";
import type { RuleFamily } from "../../engine/rules/rule-list.js";
import { parseRuleList, type RuleToken } from "../../engine/rules/source.js";
import { ArgError, type ArgProblem, type DataFile, type DependencySpec } from "../../registry/types.js";

export interface SetArgs {
  /** Inline rules: `exps` for domain_set, `ips` for ip_set. */
  rules: string[];
  files: string[];
  sets: string[];
}

const stringList = { type: "array", items: { type: "string" }, default: [] } as const;

export function setSchema(rulesKey: "exps" | "ips"): object {
  return {
    type: "object",
    additionalProperties: false,
    properties: { [rulesKey]: stringList, files: { type: "array", items: { type: "string", minLength: 1 }, default: [] }, sets: stringList },
  };
}

const TAG = /^[^\s/?#$&]+$/;

/** `sets` entries are bare tags; a leading `$` is tolerated. */
export function setTag(entry: string): string {
  return entry.startsWith("$") ? entry.slice(1) : entry;
}

/** Inline rules then files, in that order (a later definition wins where that matters). */
export function setTokens(args: SetArgs, rulesKey: "exps" | "ips"): RuleToken[] {
  const tokens = parseRuleList(args.rules, [rulesKey], false);
  args.files.forEach((path, i) => tokens.push({ kind: "file", path, at: ["files", i] }));
  return tokens;
}

/** The rule files a set reads (`files` and `&path` items), for `sluice backup`. */
export function setDataFiles(args: SetArgs, rulesKey: "exps" | "ips"): DataFile[] {
  try {
    return setTokens(args, rulesKey).flatMap((t) => (t.kind === "file" ? [{ path: t.path }] : []));
  } catch {
    return args.files.map((path) => ({ path }));
  }
}

export function setProblems(args: SetArgs, rulesKey: "exps" | "ips", family: RuleFamily): ArgProblem[] {
  const problems: ArgProblem[] = [];
  let tokens: RuleToken[] = [];
  try {
    tokens = setTokens(args, rulesKey);
  } catch (err) {
    if (!(err instanceof ArgError)) throw err;
    problems.push({ path: err.path, message: err.message });
  }
  for (const t of tokens) {
    if (t.kind !== "rule") continue;
    try {
      if (family === "domain") parseDomainRule(t.text, "domain");
      else parseIpRule(t.text);
    } catch (err) {
      if (!(err instanceof RuleSyntaxError)) throw err;
      problems.push({ path: t.at, message: err.message });
    }
  }
  args.sets.forEach((entry, i) => {
    if (!TAG.test(setTag(entry))) problems.push({ path: ["sets", i], message: `'${entry}' is not a provider tag` });
  });
  return problems;
}

export function setDependencies(args: SetArgs): DependencySpec[] {
  return args.sets.map((entry, i) => ({ argsPath: ["sets", i], target: setTag(entry), kind: "provider" }));
}
