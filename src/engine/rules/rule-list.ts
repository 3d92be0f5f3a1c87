// Args handling shared by the rule-list matchers (qname, cname, client_ip, resp_ip, ptr_ip) and
// the set providers: schema, checks, dependencies, compilation, and provider capability checks.

import { unmapIPv4 } from "../../dns/ip.js";
import { ArgError, type ArgProblem, type DependencySpec } from "../plugin-args.js";
import type { DomainProvider, IpProvider } from "../types.js";
import { DomainTableBuilder, parseDomainRule, RuleSyntaxError, type DomainTable } from "./domain.js";
import { IpPrefixSetBuilder, parseIpRule, type IpPrefixSet } from "./ip.js";
import { loadRuleTokens, parseRuleList, type ArgPath, type RuleToken } from "./source.js";

/** A rule list: one string or a list of strings, each split into tokens. */
export type RuleListArgs = string | string[];

export type RuleFamily = "domain" | "ip";

/** What compiling a rule list needs from the plugin being created (a part of the registry's CreateContext). */
export interface RuleListContext {
  /** Resolves a &file path from the config against the working directory. */
  resolvePath(path: string): string;
  /** A declared provider; it may match names, addresses, or both. */
  provider(tag: string): Partial<DomainProvider> & Partial<IpProvider>;
}

/** Schema, shorthand and quick setup shared by every rule-list matcher. */
export const ruleListArgs = {
  schema: { type: ["string", "array"], items: { type: "string" } },
  // A bare `qname` with no args gets the "needs at least one rule" message from check.
  shorthand: (raw: unknown): unknown => (raw === null || raw === undefined ? [] : raw),
  quickSetup: (param: string): unknown => param,
} as const;

function validateRule(text: string, family: RuleFamily): void {
  if (family === "domain") parseDomainRule(text, "domain");
  else parseIpRule(text);
}

/** Semantic problems of a rule list: bad tokens, bad inline rules, or nothing at all. */
export function ruleListProblems(args: RuleListArgs, family: RuleFamily): ArgProblem[] {
  let tokens: RuleToken[];
  try {
    tokens = parseRuleList(args);
  } catch (err) {
    if (err instanceof ArgError) return [{ path: err.path, message: err.message }];
    throw err;
  }
  if (tokens.length === 0) return [{ path: [], message: `needs at least one ${family === "domain" ? "domain" : "IP"} rule, &file or $provider` }];
  const problems: ArgProblem[] = [];
  for (const t of tokens) {
    if (t.kind !== "rule") continue;
    try {
      validateRule(t.text, family);
    } catch (err) {
      if (err instanceof RuleSyntaxError) problems.push({ path: t.at, message: err.message });
      else throw err;
    }
  }
  return problems;
}

/** `$tag` references of a rule list, as provider dependencies. */
export function ruleListDependencies(args: RuleListArgs): DependencySpec[] {
  try {
    return providerDeps(parseRuleList(args));
  } catch (err) {
    if (err instanceof ArgError) return [];
    throw err;
  }
}

export function providerDeps(tokens: readonly RuleToken[]): DependencySpec[] {
  const out: DependencySpec[] = [];
  for (const t of tokens) if (t.kind === "provider") out.push({ argsPath: t.at, target: t.tag, kind: "provider" });
  return out;
}

/** A declared provider that must match domain names; an ArgError at `at` when it cannot. */
export function domainProvider(ctx: RuleListContext, tag: string, at: ArgPath): DomainProvider {
  const p = ctx.provider(tag);
  if (typeof p.containsName !== "function") throw new ArgError(`provider '${tag}' cannot match domain names (it is not a domain provider)`, at);
  return p as DomainProvider;
}

/** A declared provider that must match IP addresses; an ArgError at `at` when it cannot. */
export function ipProvider(ctx: RuleListContext, tag: string, at: ArgPath): IpProvider {
  const p = ctx.provider(tag);
  if (typeof p.containsIp !== "function") throw new ArgError(`provider '${tag}' cannot match IP addresses (it is not an IP provider)`, at);
  return p as IpProvider;
}

/** `name` → matched by the local table or by any provider (in order). */
export type NamePredicate = (name: string) => boolean;
/** 4/16-byte address (IPv4-mapped allowed) → matched. */
export type IpPredicate = (ip: Uint8Array) => boolean;

export function namePredicate(table: DomainTable<true>, providers: readonly DomainProvider[]): NamePredicate {
  if (providers.length === 0) return (name) => table.has(name);
  if (table.size === 0 && providers.length === 1) {
    const only = providers[0];
    return (name) => only.containsName(name);
  }
  return (name) => {
    if (table.size > 0 && table.has(name)) return true;
    for (let i = 0; i < providers.length; i++) if (providers[i].containsName(name)) return true;
    return false;
  };
}

export function ipPredicate(set: IpPrefixSet, providers: readonly IpProvider[]): IpPredicate {
  if (providers.length === 0) return (ip) => set.contains(ip);
  return (ip) => {
    if (set.size > 0 && set.contains(ip)) return true;
    const plain = unmapIPv4(ip);
    for (let i = 0; i < providers.length; i++) if (providers[i].containsIp(plain)) return true;
    return false;
  };
}

/** Builds the local table from inline rules and &files, and resolves the $providers. */
export async function compileDomainRuleList(args: RuleListArgs, ctx: RuleListContext): Promise<{ table: DomainTable<true>; providers: DomainProvider[] }> {
  const builder = new DomainTableBuilder<true>("domain");
  const refs = await loadRuleTokens(parseRuleList(args), (p) => ctx.resolvePath(p), (rule) => builder.add(rule, true));
  return { table: builder.build(), providers: refs.map((r) => domainProvider(ctx, r.tag, r.at)) };
}

export async function compileIpRuleList(args: RuleListArgs, ctx: RuleListContext): Promise<{ set: IpPrefixSet; providers: IpProvider[] }> {
  const builder = new IpPrefixSetBuilder();
  const refs = await loadRuleTokens(parseRuleList(args), (p) => ctx.resolvePath(p), (rule) => builder.add(rule));
  return { set: builder.build(), providers: refs.map((r) => ipProvider(ctx, r.tag, r.at)) };
}
