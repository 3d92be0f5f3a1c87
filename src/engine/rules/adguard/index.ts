// The compiled AdGuard rule set: one structure for all four precedence tiers, so a lookup costs
// what a domain_set lookup does whatever the list size:
//   names        → one hash map probed with the name and each parent domain (one probe per label):
//                  ||x^ and masks ending in `…x.domain.tld^` apply at any level, exact rules
//                  (plain domains, |x^, hosts lines) only to the name itself
//   literals     → Aho–Corasick over a literal each other mask or /regex/ must contain: one pass,
//                  then only the rules whose literal occurs in the name are tested
//   the rest     → rules with no literal (`*$denyallow=…`, /.*/): tested on every name (few)
// Each key holds a chain of entries (tier, conditions, and the pattern test when the key alone
// does not decide); the answer is the highest tier among the entries that apply:
// important exception > important block > exception > block.

import { suffixesOf } from "../domain.js";
import { KeywordAutomaton } from "../keywords.js";
import { finish, finishSliced, type Slicer, type Steps } from "../slicer.js";
import { Tier, type ParsedRule, type RuleConditions } from "./parse.js";

class Entry {
  constructor(
    /** Applies only when the key is the whole name (exact rules), not a parent domain of it. */
    readonly exact: boolean,
    readonly tier: number,
    readonly conditions: RuleConditions | null,
    /** Must match too (masks, /regex/); null when the key decides alone. */
    readonly regexp: RegExp | null,
    readonly next: Entry | null,
  ) {}
}

/** Unconditional entries are shared: 150 000 plain blocks cost a few objects, not 150 000. */
const PLAIN: readonly Entry[] = [0, 1, 2, 3, 4].map((tier) => new Entry(false, tier, null, null, null));
const PLAIN_EXACT: readonly Entry[] = [0, 1, 2, 3, 4].map((tier) => new Entry(true, tier, null, null, null));

function chain(existing: Entry | undefined, rule: ParsedRule, exact = false): Entry {
  if (rule.conditions === null && rule.regexp === null) {
    // A second unconditional rule of the same tier and reach changes nothing.
    for (let e: Entry | null = existing ?? null; e !== null; e = e.next) {
      if (e.conditions === null && e.regexp === null && e.tier === rule.tier && e.exact === exact) return existing as Entry;
    }
    if (existing === undefined) return (exact ? PLAIN_EXACT : PLAIN)[rule.tier];
  }
  return new Entry(exact, rule.tier, rule.conditions, rule.regexp, existing ?? null);
}

/** True when `name` is `domain` or one of its subdomains. */
function withinDomain(name: string, domain: string): boolean {
  if (name.length === domain.length) return name === domain;
  return name.length > domain.length && name.charCodeAt(name.length - domain.length - 1) === 0x2e && name.endsWith(domain);
}

/** Whether a rule's conditions let it apply; `qtype` < 0 asks by name only (rules with $dnstype never apply). */
function applies(c: RuleConditions, name: string, qtype: number): boolean {
  if (c.types !== null || c.notTypes !== null) {
    if (qtype < 0) return false;
    if (c.types !== null ? !c.types.has(qtype) : (c.notTypes as ReadonlySet<number>).has(qtype)) return false;
  }
  const deny = c.denyallow;
  if (deny !== null) for (let i = 0; i < deny.length; i++) if (withinDomain(name, deny[i])) return false;
  return true;
}

/** The highest tier in `e`'s chain that applies and beats `best` (cheap checks first); `parent`: the key is a parent domain of `name`. */
function bestOf(e: Entry | null, name: string, qtype: number, best: number, parent = false): number {
  for (; e !== null; e = e.next) {
    if (e.tier <= best || (parent && e.exact)) continue;
    if (e.conditions !== null && !applies(e.conditions, name, qtype)) continue;
    if (e.regexp !== null && !e.regexp.test(name)) continue;
    best = e.tier;
  }
  return best;
}

export class AdguardIndexBuilder {
  private readonly names = new Map<string, Entry>();
  private readonly literal = new Map<string, Entry>();
  private scan: Entry | null = null;
  private rules = 0;

  /** Adds one rule (not a $badfilter one: the caller applies those). */
  add(rule: ParsedRule): void {
    this.rules++;
    switch (rule.index) {
      case "exact":
      case "suffix":
        this.names.set(rule.key, chain(this.names.get(rule.key), rule, rule.index === "exact"));
        return;
      case "literal":
        this.literal.set(rule.key, chain(this.literal.get(rule.key), rule));
        return;
      case "scan":
        this.scan = chain(this.scan ?? undefined, rule);
        return;
    }
  }

  get size(): number {
    return this.rules;
  }

  build(skipped: number, disabled: number): AdguardIndex {
    return finish(this.steps(skipped, disabled));
  }

  /** `build()` in slices that yield to the event loop (provider snapshots). */
  buildSliced(skipped: number, disabled: number, slicer: Slicer): Promise<AdguardIndex> {
    return finishSliced(this.steps(skipped, disabled), slicer);
  }

  private *steps(skipped: number, disabled: number): Steps<AdguardIndex> {
    const literals = [...this.literal.keys()];
    const automaton = literals.length > 0 ? yield* KeywordAutomaton.steps(literals) : null;
    const byLiteral = literals.map((k) => this.literal.get(k) as Entry);
    return new AdguardIndex(this.names, automaton, byLiteral, this.scan, { rules: this.rules, skipped, disabled });
  }
}

export interface AdguardCounts {
  /** Rules in force (after $badfilter). */
  rules: number;
  /** Lines skipped as unsupported (browser-only syntax, $client/$ctag/$dnsrewrite, unknown modifiers). */
  skipped: number;
  /** Rules disabled by a $badfilter rule. */
  disabled: number;
}

/** Immutable once built; one instance is one provider snapshot. */
export class AdguardIndex {
  readonly size: number;
  readonly skipped: number;
  readonly disabled: number;
  // Per-lookup state for the automaton callback (one lookup at a time: the event loop is single-threaded).
  private name = "";
  private qtype = -1;
  private best = 0;
  private readonly onLiteral: (k: number) => boolean;

  constructor(
    private readonly names: ReadonlyMap<string, Entry>,
    private readonly automaton: KeywordAutomaton | null,
    private readonly byLiteral: readonly Entry[],
    private readonly scan: Entry | null,
    counts: AdguardCounts,
  ) {
    this.size = counts.rules;
    this.skipped = counts.skipped;
    this.disabled = counts.disabled;
    this.onLiteral = (k) => {
      this.best = bestOf(this.byLiteral[k], this.name, this.qtype, this.best);
      return this.best === Tier.importantException;
    };
  }

  static empty(): AdguardIndex {
    return new AdguardIndexBuilder().build(0, 0);
  }

  /** True when the rules block `name` (lower case, no trailing dot) for a query of `qtype` (-1: by name only). */
  blocks(name: string, qtype: number): boolean {
    return (this.verdict(name, qtype) & 1) === 1;
  }

  /** The winning tier (0: no rule applies). Blocks are the odd tiers. */
  verdict(name: string, qtype: number): number {
    let best = 0;
    const names = this.names;
    if (names.size > 0) {
      const own = names.get(name);
      if (own !== undefined) best = bestOf(own, name, qtype, best);
      const parents = suffixesOf(name);
      for (let i = 0; i < parents.length; i++) {
        const e = names.get(parents[i]);
        if (e !== undefined) best = bestOf(e, name, qtype, best, true);
      }
    }
    if (best === Tier.importantException) return best;
    if (this.automaton !== null) {
      this.name = name;
      this.qtype = qtype;
      this.best = best;
      this.automaton.forEachMatch(name, this.onLiteral);
      best = this.best;
    }
    return this.scan === null ? best : bestOf(this.scan, name, qtype, best);
  }
}
