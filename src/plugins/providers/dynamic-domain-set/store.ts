// The rules of a dynamic_domain_set as queries read them. `full:` and `domain:` rules live in hash
// maps changed in place (a learned name is one Map.set and a counter bump, nothing else on the query
// path); `keyword:` and `regexp:` rules are compiled into a DomainTable that is rebuilt (in slices)
// and swapped whole when they change. Every rule may carry an expiry: an expired rule is absent to
// lookups and listings at once (the clock is read only when a hit has an expiry), and the sweep
// removes it. `version` counts changes; the file is behind while it differs from `savedVersion`.

import { DomainTable, DomainTableBuilder, parseDomainRule, suffixesOf, type BareRuleKind, type DomainRuleKind } from "../../../engine/rules/domain.js";
import { Slicer } from "../../../engine/rules/slicer.js";
import type { LearnedRule } from "./learned.js";

export type RuleSource = "api" | "learned" | "bootstrap" | "file";
export const RULE_SOURCES: readonly RuleSource[] = ["api", "learned", "bootstrap", "file"];

export interface RuleEntry {
  /** Canonical text: `<kind>:<pattern>` (names lower-cased without a trailing dot; regexps as written). */
  readonly key: string;
  readonly kind: DomainRuleKind;
  readonly pattern: string;
  /** Only for regexp rules: the compiled expression (the slow path after an expired hit). */
  readonly regexp: RegExp | null;
  /** Insertion order: the listing's cursor. */
  readonly seq: number;
  addedAt: number;
  /** Unix ms on the set's clock; 0: never. */
  expiresAt: number;
  source: RuleSource;
  /** Set when removed, so a compiled table still holding it (until its rebuild) skips it. */
  removed: boolean;
}

/** A rule as parsed from text: its canonical key, or why it is not a rule. */
export type ParsedRule = { ok: true; key: string; kind: DomainRuleKind; pattern: string; regexp: RegExp | null } | { ok: false; message: string };

// eslint-disable-next-line no-control-regex -- control characters are what it looks for
const CONTROL = /[\u0000-\u001f\u007f]/;

/**
 * Parses one rule (bare names mean `bare`); never throws. Beyond domain_set's syntax, a rule may not
 * hold a control character, nor a comma outside a regexp: the file keeps one rule a line, and rule
 * files split on commas.
 */
export function parseRule(text: string, bare: BareRuleKind = "domain"): ParsedRule {
  const rule = text.trim();
  if (CONTROL.test(rule)) return { ok: false, message: `rule '${JSON.stringify(rule).slice(1, -1)}' contains a control character` };
  try {
    const r = parseDomainRule(rule, bare);
    if (r.kind !== "regexp" && r.pattern.includes(",")) return { ok: false, message: `rule '${rule}' contains a comma (rule lists split on commas)` };
    return { ok: true, key: `${r.kind}:${r.pattern}`, kind: r.kind, pattern: r.pattern, regexp: r.kind === "regexp" ? r.regexp : null };
  } catch (err) {
    return { ok: false, message: (err as Error).message };
  }
}

/** The outcome of one learned name. */
export type LearnOutcome = "added" | "refreshed" | "known" | "full" | "invalid";

/** A rule as the API lists it. */
export interface RuleView {
  rule: string;
  expires_at_ms: number | null;
  ttl_left_ms: number | null;
  added_at_ms: number;
  source: RuleSource;
}

export interface RulePage {
  rules: RuleView[];
  next_cursor: string | null;
  total: number;
}

const isPattern = (kind: DomainRuleKind): boolean => kind === "keyword" || kind === "regexp";

export class DynamicRules {
  /** Every rule, in insertion order (listing, file). */
  private readonly entries = new Map<string, RuleEntry>();
  private readonly full = new Map<string, RuleEntry>();
  private readonly domain = new Map<string, RuleEntry>();
  private readonly patternEntries = new Map<string, RuleEntry>();
  /** Read by queries; replaced whole by a rebuild. */
  private patterns: DomainTable<RuleEntry> = DomainTable.empty();
  private patternsStale = false;
  private rebuilding: Promise<void> | null = null;
  private seq = 0;
  /** The earliest expiry of any rule (a lower bound: it may have been removed since); Infinity when none expires. */
  private nextExpiry = Infinity;
  /** Bumped by every change. */
  version = 0;
  /** `version` as of the last complete write (or read) of the file. */
  savedVersion = 0;

  constructor(
    /** Unix ms, moved by services.clockShift in tests. */
    readonly clock: () => number,
  ) {}

  get size(): number {
    return this.entries.size;
  }

  get unsaved(): boolean {
    return this.version !== this.savedVersion;
  }

  /** True when a live rule matches `name` (lower-case, no trailing dot). The query path. */
  has(name: string): boolean {
    if (this.full.size > 0) {
      const e = this.full.get(name);
      if (e !== undefined && this.live(e)) return true;
    }
    if (this.domain.size > 0) {
      const own = this.domain.get(name);
      if (own !== undefined && this.live(own)) return true;
      const suffixes = suffixesOf(name);
      for (let i = 0; i < suffixes.length; i++) {
        const e = this.domain.get(suffixes[i]);
        if (e !== undefined && this.live(e)) return true;
      }
    }
    if (this.patterns.size > 0) {
      const e = this.patterns.lookup(name);
      // The compiled table names one matching rule; when that one is gone, the others are asked one by one.
      if (e !== undefined) return this.live(e) || this.patternsMatchSlowly(name);
    }
    return false;
  }

  private live(e: RuleEntry): boolean {
    return !e.removed && (e.expiresAt === 0 || e.expiresAt > this.clock());
  }

  private patternsMatchSlowly(name: string): boolean {
    for (const e of this.patternEntries.values()) {
      if (!this.live(e)) continue;
      if (e.regexp !== null ? e.regexp.test(name) : name.includes(e.pattern)) return true;
    }
    return false;
  }

  /**
   * A name learned by `learn_domain`: inserted at once (the next query sees it), or its expiry moved on
   * once less than half of `ttlMs` is left (so a popular name does not rewrite the file on every query).
   * A rule that the API or the file put there is left alone. No room under `max`: nothing changes.
   */
  learn(name: string, kind: "full" | "domain", ttlMs: number | null, max: number): LearnOutcome {
    const e = (kind === "full" ? this.full : this.domain).get(name);
    if (e !== undefined) {
      const now = this.clock();
      if (e.expiresAt !== 0 && e.expiresAt <= now) {
        // Expired but not swept yet: learned again, as new.
        e.addedAt = now;
        e.source = "learned";
        this.setExpiry(e, ttlMs === null ? 0 : now + ttlMs);
        this.version++;
        return "added";
      }
      if (e.source !== "learned" || ttlMs === null || e.expiresAt === 0 || e.expiresAt - now >= ttlMs / 2) return "known";
      this.setExpiry(e, now + ttlMs);
      this.version++;
      return "refreshed";
    }
    if (this.entries.size >= max) return "full";
    const parsed = parseRule(`${kind}:${name}`);
    if (!parsed.ok) return "invalid";
    const now = this.clock();
    this.insert(parsed, "learned", now, ttlMs === null ? 0 : now + ttlMs);
    this.version++;
    return "added";
  }

  /** The learned rule with this key as it stands now; null when it is gone, expired or no longer a learned one. */
  learnedRule(key: string): LearnedRule | null {
    const e = this.entries.get(key);
    if (e === undefined || e.source !== "learned" || !this.live(e)) return null;
    return { rule: e.key, added_at_ms: e.addedAt, expires_at_ms: e.expiresAt };
  }

  /**
   * Rules another process of this instance learned (checked by learnedRulesOf): inserted, or their
   * expiry moved on when the one here ends sooner. As for `learn`, a rule that the API or the file put
   * here is left alone and one without room under `max` is left out. Returns the rules taken.
   */
  adopt(rules: readonly LearnedRule[], max: number): LearnedRule[] {
    const now = this.clock();
    const taken: LearnedRule[] = [];
    for (const r of rules) {
      if (r.expires_at_ms !== 0 && r.expires_at_ms <= now) continue;
      const e = this.entries.get(r.rule);
      if (e === undefined) {
        const parsed = parseRule(r.rule);
        if (!parsed.ok || this.entries.size >= max) continue;
        this.insert(parsed, "learned", r.added_at_ms, r.expires_at_ms);
      } else if (!this.live(e)) {
        e.addedAt = r.added_at_ms;
        e.source = "learned";
        this.setExpiry(e, r.expires_at_ms);
      } else if (e.source === "learned" && e.expiresAt !== 0 && (r.expires_at_ms === 0 || r.expires_at_ms > e.expiresAt)) {
        this.setExpiry(e, r.expires_at_ms);
      } else continue;
      taken.push(r);
    }
    if (taken.length > 0) this.version++;
    return taken;
  }

  /** How many of `keys` are not rules yet (what an add would grow the set by). */
  newKeys(keys: readonly string[]): number {
    const fresh = new Set<string>();
    for (const k of keys) if (!this.entries.has(k)) fresh.add(k);
    return fresh.size;
  }

  /**
   * Adds rules (or updates the expiry and source of those already there; an expired one is added anew).
   * `ttlMs` null: never expires. Resolves once keyword/regexp rules are compiled in.
   */
  async add(rules: readonly { parsed: Extract<ParsedRule, { ok: true }>; ttlMs: number | null }[], source: RuleSource, at: number): Promise<{ added: number; updated: number }> {
    let added = 0;
    let updated = 0;
    let patterns = false;
    for (const { parsed, ttlMs } of rules) {
      const expiresAt = ttlMs === null ? 0 : at + ttlMs;
      const e = this.entries.get(parsed.key);
      if (e === undefined) {
        this.insert(parsed, source, at, expiresAt);
        added++;
        patterns ||= isPattern(parsed.kind);
        continue;
      }
      if (e.expiresAt !== 0 && e.expiresAt <= at) {
        e.addedAt = at;
        added++;
      } else updated++;
      e.source = source;
      this.setExpiry(e, expiresAt);
    }
    if (rules.length > 0) this.version++;
    if (patterns) await this.rebuildPatterns();
    return { added, updated };
  }

  /** Removes the rules with these keys; the keys that were not there are returned. */
  async remove(keys: readonly string[]): Promise<{ removed: number; missing: string[] }> {
    let removed = 0;
    let patterns = false;
    const missing: string[] = [];
    for (const k of keys) {
      const e = this.entries.get(k);
      if (e === undefined || !this.live(e)) {
        if (e !== undefined) this.drop(e);
        missing.push(k);
        continue;
      }
      this.drop(e);
      removed++;
      patterns ||= isPattern(e.kind);
    }
    if (keys.length > 0) this.version++;
    if (patterns) await this.rebuildPatterns();
    return { removed, missing };
  }

  /** Removes every rule; returns how many lived. */
  clear(): number {
    let live = 0;
    for (const e of this.entries.values()) {
      if (this.live(e)) live++;
      e.removed = true;
    }
    this.entries.clear();
    this.full.clear();
    this.domain.clear();
    this.patternEntries.clear();
    this.patterns = DomainTable.empty();
    // A rebuild under way would swap in what it compiled before the clear: it runs once more.
    if (this.rebuilding !== null) this.patternsStale = true;
    this.nextExpiry = Infinity;
    this.version++;
    return live;
  }

  /** Replaces every rule with those read from the file (in order); marks the store as saved at `version`. */
  async replace(rules: readonly { parsed: Extract<ParsedRule, { ok: true }>; addedAt: number; expiresAt: number; source: RuleSource }[]): Promise<void> {
    this.clear();
    for (const r of rules) {
      const old = this.entries.get(r.parsed.key);
      if (old !== undefined) this.drop(old);
      this.insert(r.parsed, r.source, r.addedAt, r.expiresAt);
    }
    this.version++;
    if (this.patternEntries.size > 0) await this.rebuildPatterns();
  }

  /** Removes every expired rule; returns how many (nothing to do costs one comparison). */
  async sweep(): Promise<number> {
    const now = this.clock();
    if (now < this.nextExpiry) return 0;
    let removed = 0;
    let patterns = false;
    let next = Infinity;
    // Expiries set while the sweep pauses lower this again; the ones it visits are in `next`.
    this.nextExpiry = Infinity;
    const slicer = new Slicer();
    // The live map: rules learned during a pause are visited too, and deleting the visited one is safe.
    for (const e of this.entries.values()) {
      if (slicer.due()) await slicer.pause();
      if (e.expiresAt === 0) continue;
      if (e.expiresAt <= this.clock()) {
        this.drop(e);
        removed++;
        patterns ||= isPattern(e.kind);
      } else if (e.expiresAt < next) next = e.expiresAt;
    }
    this.nextExpiry = Math.min(next, this.nextExpiry);
    if (removed > 0) this.version++;
    if (patterns) await this.rebuildPatterns();
    return removed;
  }

  /** Live rules in insertion order (for writing the file). */
  *liveEntries(): Generator<RuleEntry> {
    for (const e of this.entries.values()) if (this.live(e)) yield e;
  }

  /** Live rules per source (status). */
  countBySource(): Record<RuleSource, number> {
    const out: Record<RuleSource, number> = { api: 0, learned: 0, bootstrap: 0, file: 0 };
    for (const e of this.liveEntries()) out[e.source]++;
    return out;
  }

  /** A page of live rules in the order they were added, after the rule `cursor` named; `q`: substring of the rule text. */
  list(opts: { cursor: number; limit: number; q: string | null }): RulePage {
    const now = this.clock();
    const q = opts.q === null ? null : opts.q.toLowerCase();
    const rules: RuleView[] = [];
    let total = 0;
    let last = -1;
    let more = false;
    for (const e of this.entries.values()) {
      if (e.removed || (e.expiresAt !== 0 && e.expiresAt <= now)) continue;
      if (q !== null && !e.key.toLowerCase().includes(q)) continue;
      total++;
      if (e.seq <= opts.cursor) continue;
      if (rules.length === opts.limit) {
        more = true;
        continue;
      }
      rules.push({ rule: e.key, expires_at_ms: e.expiresAt === 0 ? null : e.expiresAt, ttl_left_ms: e.expiresAt === 0 ? null : e.expiresAt - now, added_at_ms: e.addedAt, source: e.source });
      last = e.seq;
    }
    return { rules, next_cursor: more ? String(last) : null, total };
  }

  private insert(parsed: Extract<ParsedRule, { ok: true }>, source: RuleSource, addedAt: number, expiresAt: number): void {
    const e: RuleEntry = { key: parsed.key, kind: parsed.kind, pattern: parsed.pattern, regexp: parsed.regexp, seq: ++this.seq, addedAt, expiresAt: 0, source, removed: false };
    this.setExpiry(e, expiresAt);
    this.entries.set(e.key, e);
    if (e.kind === "full") this.full.set(e.pattern, e);
    else if (e.kind === "domain") this.domain.set(e.pattern, e);
    else {
      this.patternEntries.set(e.key, e);
      this.patternsStale = true;
    }
  }

  private setExpiry(e: RuleEntry, expiresAt: number): void {
    e.expiresAt = expiresAt;
    if (expiresAt !== 0 && expiresAt < this.nextExpiry) this.nextExpiry = expiresAt;
  }

  private drop(e: RuleEntry): void {
    e.removed = true;
    this.entries.delete(e.key);
    if (e.kind === "full") this.full.delete(e.pattern);
    else if (e.kind === "domain") this.domain.delete(e.pattern);
    else {
      this.patternEntries.delete(e.key);
      this.patternsStale = true;
    }
  }

  /** Compiles the keyword/regexp rules again (in slices) and swaps the table; concurrent calls share one loop that ends current. */
  private rebuildPatterns(): Promise<void> {
    this.patternsStale = true;
    this.rebuilding ??= (async () => {
      try {
        while (this.patternsStale) {
          this.patternsStale = false;
          const builder = new DomainTableBuilder<RuleEntry>("domain");
          for (const e of this.patternEntries.values()) builder.add(e.key, e);
          this.patterns = await builder.buildSliced(new Slicer());
        }
      } finally {
        this.rebuilding = null;
      }
    })();
    return this.rebuilding;
  }
}
