// Domain rule tables: `full:`, `domain:`, `keyword:` and `regexp:` rules compiled once into
// structures whose lookup cost depends on the name, not on how many rules there are.
//   full    → hash map               (one probe)
//   domain  → hash map of suffixes   (one probe per label, longest suffix first)
//   keyword → Aho–Corasick automaton (one pass over the name)
//   regexp  → compiled once, tested in declaration order
// Lookup priority: full → domain (most specific) → regexp → keyword. A repeated pattern keeps
// its first position but takes the value of its last definition ("last definition wins").

import { KeywordAutomaton } from "./keywords.js";
import { finish, finishSliced, type Slicer, type Steps } from "./slicer.js";

export type DomainRuleKind = "full" | "domain" | "keyword" | "regexp";
/** What a rule without a `kind:` prefix means (providers/matchers: domain; hosts: full). */
export type BareRuleKind = "full" | "domain";

/** A rule that cannot be compiled; the message names the rule. */
export class RuleSyntaxError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "RuleSyntaxError";
  }
}

export type ParsedDomainRule = { kind: "full" | "domain" | "keyword"; pattern: string } | { kind: "regexp"; pattern: string; regexp: RegExp };

const KINDS: ReadonlySet<string> = new Set(["full", "domain", "keyword", "regexp"]);
const PREFIX = /^([A-Za-z][A-Za-z0-9_-]*):/;

/** True when every character is printable ASCII other than space (names on the wire are escaped to this). */
function printableAscii(text: string): boolean {
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c <= 0x20 || c >= 0x7f) return false;
  }
  return true;
}

function namePattern(rule: string, raw: string): string {
  let name = raw.toLowerCase();
  if (name.endsWith(".") && !name.endsWith("\\.")) name = name.slice(0, -1);
  if (name.length === 0) throw new RuleSyntaxError(`rule '${rule}' has an empty domain`);
  if (!printableAscii(name)) {
    throw new RuleSyntaxError(`rule '${rule}' contains a space or a non-ASCII character (write internationalised names in punycode, xn--...)`);
  }
  if (name.startsWith(".") || name.includes("..")) throw new RuleSyntaxError(`rule '${rule}' has an empty label`);
  if (name.length > 253) throw new RuleSyntaxError(`rule '${rule}' is longer than a domain name can be (253 characters)`);
  return name;
}

/**
 * Parses one rule. Names are lower-cased and lose a trailing dot; keywords are only lower-cased
 * (a trailing dot there is part of the substring); regexps are kept as written and compiled
 * case-insensitively, as DNS names are.
 */
export function parseDomainRule(rule: string, bare: BareRuleKind): ParsedDomainRule {
  const m = PREFIX.exec(rule);
  let kind: DomainRuleKind = bare;
  let body = rule;
  if (m) {
    const prefix = m[1].toLowerCase();
    if (!KINDS.has(prefix)) throw new RuleSyntaxError(`rule '${rule}' has an unknown kind '${m[1]}:' (use full:, domain:, keyword: or regexp:)`);
    kind = prefix as DomainRuleKind;
    body = rule.slice(m[0].length);
  }
  switch (kind) {
    case "full":
    case "domain":
      return { kind, pattern: namePattern(rule, body) };
    case "keyword": {
      const pattern = body.toLowerCase();
      if (pattern.length === 0) throw new RuleSyntaxError(`rule '${rule}' has an empty keyword`);
      if (!printableAscii(pattern)) throw new RuleSyntaxError(`rule '${rule}' contains a space or a non-ASCII character`);
      return { kind, pattern };
    }
    case "regexp": {
      if (body.length === 0) throw new RuleSyntaxError(`rule '${rule}' has an empty regular expression`);
      try {
        return { kind, pattern: body, regexp: new RegExp(body, "i") };
      } catch (err) {
        throw new RuleSyntaxError(`rule '${rule}' is not a valid regular expression: ${(err as Error).message}`);
      }
    }
  }
}

/** Collects rules; `build()` freezes them into a DomainTable. Values must not be `undefined`. */
export class DomainTableBuilder<V> {
  private readonly full = new Map<string, V>();
  private readonly domain = new Map<string, V>();
  private readonly regexpAt = new Map<string, number>();
  private readonly regexps: RegExp[] = [];
  private readonly regexpValues: V[] = [];
  private readonly keywordAt = new Map<string, number>();
  private readonly keywords: string[] = [];
  private readonly keywordValues: V[] = [];

  constructor(private readonly bare: BareRuleKind) {}

  /** Adds one rule; throws RuleSyntaxError when it cannot be compiled. */
  add(rule: string, value: V): void {
    const r = parseDomainRule(rule, this.bare);
    switch (r.kind) {
      case "full":
        this.full.set(r.pattern, value);
        return;
      case "domain":
        this.domain.set(r.pattern, value);
        return;
      case "keyword": {
        const at = this.keywordAt.get(r.pattern);
        if (at !== undefined) this.keywordValues[at] = value;
        else {
          this.keywordAt.set(r.pattern, this.keywords.length);
          this.keywords.push(r.pattern);
          this.keywordValues.push(value);
        }
        return;
      }
      case "regexp": {
        const at = this.regexpAt.get(r.pattern);
        if (at !== undefined) this.regexpValues[at] = value;
        else {
          this.regexpAt.set(r.pattern, this.regexps.length);
          this.regexps.push(r.regexp);
          this.regexpValues.push(value);
        }
        return;
      }
    }
  }

  get size(): number {
    return this.full.size + this.domain.size + this.regexps.length + this.keywords.length;
  }

  build(): DomainTable<V> {
    return finish(this.steps());
  }

  /** `build()` in slices that yield to the event loop (provider snapshots). */
  buildSliced(slicer: Slicer): Promise<DomainTable<V>> {
    return finishSliced(this.steps(), slicer);
  }

  private *steps(): Steps<DomainTable<V>> {
    const automaton = this.keywords.length > 0 ? yield* KeywordAutomaton.steps(this.keywords) : null;
    return new DomainTable(this.full, this.domain, this.regexps, this.regexpValues, automaton, this.keywordValues);
  }
}

/** An immutable, compiled rule table. `name` is lower-case without a trailing dot (DnsContext.qname). */
export class DomainTable<V> {
  readonly size: number;

  constructor(
    private readonly full: ReadonlyMap<string, V>,
    private readonly domain: ReadonlyMap<string, V>,
    private readonly regexps: readonly RegExp[],
    private readonly regexpValues: readonly V[],
    private readonly keywords: KeywordAutomaton | null,
    private readonly keywordValues: readonly V[],
  ) {
    this.size = full.size + domain.size + regexps.length + keywordValues.length;
  }

  static empty<V>(): DomainTable<V> {
    return new DomainTable<V>(new Map(), new Map(), [], [], null, []);
  }

  /** The value of the highest-priority rule matching `name`, or undefined. */
  lookup(name: string): V | undefined {
    if (this.full.size > 0) {
      const v = this.full.get(name);
      if (v !== undefined) return v;
    }
    if (this.domain.size > 0) {
      const v = this.suffix(name);
      if (v !== undefined) return v;
    }
    const regexps = this.regexps;
    for (let i = 0; i < regexps.length; i++) if (regexps[i].test(name)) return this.regexpValues[i];
    if (this.keywords !== null) {
      const k = this.keywords.firstMatch(name);
      if (k >= 0) return this.keywordValues[k];
    }
    return undefined;
  }

  /** True when any rule matches (no priority work). */
  has(name: string): boolean {
    if (this.full.size > 0 && this.full.has(name)) return true;
    if (this.domain.size > 0 && this.suffix(name) !== undefined) return true;
    const regexps = this.regexps;
    for (let i = 0; i < regexps.length; i++) if (regexps[i].test(name)) return true;
    return this.keywords !== null && this.keywords.test(name);
  }

  /** Probes `name`, then each shorter suffix at a label boundary: the first hit is the most specific. */
  private suffix(name: string): V | undefined {
    const domain = this.domain;
    const own = domain.get(name);
    if (own !== undefined) return own;
    const suffixes = suffixesOf(name);
    for (let i = 0; i < suffixes.length; i++) {
      const v = domain.get(suffixes[i]);
      if (v !== undefined) return v;
    }
    return undefined;
  }
}

// Every domain table a query consults sees the same name: its suffixes (and the hashes V8 caches
// on those strings) are computed once, for the most recent name.
let memoName = "";
let memoSuffixes: readonly string[] = [];

/** `a.b.c` → [`b.c`, `c`]; an escaped dot (`\.`) is not a label boundary. Shared memo: do not modify the result. */
export function suffixesOf(name: string): readonly string[] {
  if (name === memoName) return memoSuffixes;
  const out: string[] = [];
  for (let i = 0; i < name.length; i++) {
    const c = name.charCodeAt(i);
    if (c === 0x5c) i++;
    else if (c === 0x2e) out.push(name.slice(i + 1));
  }
  memoName = name;
  memoSuffixes = out;
  return out;
}
