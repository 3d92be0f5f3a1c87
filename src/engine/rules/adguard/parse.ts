// One line of an AdGuard DNS filter list → rules, a comment, or an unsupported rule to skip.
// Written from AdGuard's published DNS filtering syntax: adblock-style masks (`||x^`, `|x|`, `*`),
// `@@` exceptions, `/regex/`, the modifiers $important, $badfilter, $denyallow and $dnstype,
// hosts-style lines (blocks) and plain domain names (exact). Browser-only rules (URL paths,
// cosmetic filters) and the modifiers we do not implement ($client, $ctag, $dnsrewrite, unknown
// ones) are "unsupported": skipped and counted, never guessed at (AdGuard ignores a rule with a
// modifier it does not know, to avoid false positives from browser lists). A rule we do support
// but cannot compile is a RuleSyntaxError.

import { parseIP } from "../../../dns/ip.js";
import { parseType } from "../../../dns/constants.js";
import { RuleSyntaxError } from "../domain.js";
import { regexpLiteral } from "./literal.js";

/** Precedence, higher wins: important exception > important block > exception > block. */
export const Tier = { block: 1, exception: 2, importantBlock: 3, importantException: 4 } as const;

/** What a rule applies to beyond its pattern; shared and immutable. */
export interface RuleConditions {
  /** $dnstype: only these query types (null: no inclusion list). */
  readonly types: ReadonlySet<number> | null;
  /** $dnstype=~X: every type but these (ignored when `types` is set). */
  readonly notTypes: ReadonlySet<number> | null;
  /** $denyallow: the rule does not apply to these domains and their subdomains. */
  readonly denyallow: readonly string[] | null;
}

/**
 * How a rule is found: by the exact name, by a suffix of the name (label boundary), by a literal
 * the name must contain, or by nothing (tested on every name). `regexp`, when set, must match too.
 */
export type IndexKind = "exact" | "suffix" | "literal" | "scan";

/** One compiled rule (a class, so every rule has the same shape for V8). */
export class ParsedRule {
  constructor(
    readonly index: IndexKind,
    /** exact/suffix: a name; literal: a substring every matching name contains; scan: "". */
    readonly key: string,
    /** The full test when the key alone does not decide (masks, /regex/); null: the key decides. */
    readonly regexp: RegExp | null,
    readonly tier: number,
    readonly conditions: RuleConditions | null,
    /** $badfilter: disables the rule whose text is `badfilterKey`, matches nothing itself. */
    readonly badfilter: boolean,
    /** Canonical text for $badfilter matching (null: hosts lines cannot be disabled). */
    readonly badfilterKey: string | null,
  ) {}
}

const KNOWN_UNSUPPORTED = new Set(["client", "ctag", "dnsrewrite"]);
const SUPPORTED = new Set(["important", "badfilter", "denyallow", "dnstype"]);
/** Cosmetic, HTML and scriptlet rules of browser lists: `##`, `#@#`, `#?#`, `#$#`, `#%#`, `$$`, `$@$`. */
const COSMETIC = /#[@?$%]{0,2}#|\$@?\$/;
/** Automaton keys are cut to this many characters: enough to be selective, few automaton states. */
const LITERAL_WINDOW = 12;

const isLower = (c: number): boolean => c >= 0x61 && c <= 0x7a;
const isDigit = (c: number): boolean => c >= 0x30 && c <= 0x39;
/** Letters (either case), digits, `-`, `_`: the characters of a label. */
const isLabelChar = (c: number): boolean => isLower(c | 0x20) || isDigit(c) || c === 0x2d || c === 0x5f;

/** Hostname characters of a mask (lower case), `*`, and the anchors `|` and `^`. */
function isMaskChar(c: number): boolean {
  return isLower(c) || isDigit(c) || c === 0x2e || c === 0x2d || c === 0x5f || c === 0x2a || c === 0x7c || c === 0x5e;
}

/** A plain domain name (labels of letters, digits, `-`, `_`; no empty label; no wildcard or anchor). */
export function isPlainDomain(text: string, from = 0, to = text.length): boolean {
  if (to - from === 0 || to - from > 253) return false;
  let labelStart = true;
  for (let i = from; i < to; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x2e) {
      if (labelStart || text.charCodeAt(i - 1) === 0x2d) return false;
      labelStart = true;
    } else if (isLabelChar(c)) {
      if (labelStart && c === 0x2d) return false;
      labelStart = false;
    } else return false;
  }
  return !labelStart && text.charCodeAt(to - 1) !== 0x2d;
}

/** True when the text has no upper-case ASCII letter (most list lines: no copy needed). */
function isLowerCase(text: string, from: number, to: number): boolean {
  for (let i = from; i < to; i++) {
    const c = text.charCodeAt(i);
    if (c >= 0x41 && c <= 0x5a) return false;
  }
  return true;
}

/**
 * Parses one line (without its line break), appending its rules to `out`. Returns null for rules
 * and comments, or why the line is unsupported. Throws RuleSyntaxError for a supported rule that
 * cannot be compiled; the message quotes the rule.
 */
export function parseAdguardLine(line: string, out: ParsedRule[]): string | null {
  let start = 0;
  let end = line.length;
  while (start < end && line.charCodeAt(start) <= 0x20) start++;
  while (end > start && line.charCodeAt(end - 1) <= 0x20) end--;
  if (start === end) return null;
  const c0 = line.charCodeAt(start);
  if (c0 === 0x21 || c0 === 0x23) return null; // ! and # comments
  // Fast path for most lines of real lists: `||name^`.
  if (c0 === 0x7c && line.charCodeAt(start + 1) === 0x7c && line.charCodeAt(end - 1) === 0x5e && isPlainDomain(line, start + 2, end - 1)) {
    const text = start === 0 && end === line.length ? line : line.slice(start, end);
    const key = isLowerCase(text, 2, text.length - 1) ? text.slice(2, -1) : text.slice(2, -1).toLowerCase();
    out.push(new ParsedRule("suffix", key, null, Tier.block, null, false, isLowerCase(text, 0, text.length) ? text : text.toLowerCase()));
    return null;
  }
  let text = line.slice(start, end);
  if (c0 === 0x5b && text.endsWith("]")) return null; // [Adblock Plus 2.0] headers
  if (COSMETIC.test(text)) return "cosmetic rule";
  // Hosts and domains-only lines may end with "# comment".
  const hash = text.search(/\s#/);
  if (hash >= 0) text = text.slice(0, hash).trimEnd();
  if (/\s/.test(text)) return hostsLine(text, out);
  return adblockRule(text, out);
}

/** The housekeeping entries hosts files start with: loopback and multicast names, not blocks. */
const HOSTS_HOUSEKEEPING = new Set([
  "localhost",
  "localhost.localdomain",
  "local",
  "broadcasthost",
  "ip6-localhost",
  "ip6-loopback",
  "ip6-localnet",
  "ip6-mcastprefix",
  "ip6-allnodes",
  "ip6-allrouters",
  "ip6-allhosts",
  "0.0.0.0",
]);

/** `IP name [aliases...]`: each name is blocked exactly (AdGuard Home's hosts semantics for 0.0.0.0). */
function hostsLine(text: string, out: ParsedRule[]): string | null {
  const fields = text.split(/\s+/);
  const zone = fields[0].indexOf("%");
  if (parseIP(zone < 0 ? fields[0] : fields[0].slice(0, zone)) === null) return "spaces outside a hosts line";
  for (let i = 1; i < fields.length; i++) {
    let name = fields[i].toLowerCase();
    if (name.endsWith(".")) name = name.slice(0, -1);
    if (HOSTS_HOUSEKEEPING.has(name)) continue;
    if (!isPlainDomain(name)) {
      throw new RuleSyntaxError(`hosts line '${text}': '${fields[i]}' is not a host name (letters, digits, '-', '_' and '.'; internationalised names in punycode)`);
    }
    out.push(new ParsedRule("exact", name, null, Tier.block, null, false, null));
  }
  return null;
}

interface Modifier {
  name: string;
  value: string | null;
}

function adblockRule(text: string, out: ParsedRule[]): string | null {
  const exception = text.startsWith("@@");
  const body = exception ? text.slice(2) : text;
  let pattern: string;
  let modifiers: string | null = null;
  let isRegexp = false;
  const lastSlash = body.lastIndexOf("/");
  if (body.charCodeAt(0) === 0x2f && lastSlash > 0 && (lastSlash === body.length - 1 || body.charCodeAt(lastSlash + 1) === 0x24)) {
    isRegexp = true;
    pattern = body.slice(1, lastSlash);
    if (lastSlash < body.length - 1) modifiers = body.slice(lastSlash + 2);
  } else {
    const dollar = body.indexOf("$");
    pattern = dollar < 0 ? body : body.slice(0, dollar);
    if (dollar >= 0) modifiers = body.slice(dollar + 1);
  }
  const mods = modifiers === null ? null : splitModifiers(modifiers);
  if (mods !== null) {
    for (const m of mods) if (!SUPPORTED.has(m.name)) return KNOWN_UNSUPPORTED.has(m.name) ? `$${m.name}` : `unknown modifier '${m.name}'`;
  }
  if (!isRegexp) {
    pattern = pattern.toLowerCase();
    for (let i = 0; i < pattern.length; i++) {
      const c = pattern.charCodeAt(i);
      if (isMaskChar(c)) continue;
      if (c > 0x7f) throw new RuleSyntaxError(`rule '${text}' contains a non-ASCII character (write internationalised names in punycode, xn--...)`);
      return "URL or browser-only pattern";
    }
  }
  let important = false;
  let badfilter = false;
  let types: Set<number> | null = null;
  let notTypes: Set<number> | null = null;
  let denyallow: string[] | null = null;
  if (mods !== null) {
    if (mods.length === 0) throw new RuleSyntaxError(`rule '${text}' has an empty modifier list after '$'`);
    for (const m of mods) {
      if (m.name === "important" || m.name === "badfilter") {
        if (m.value !== null) throw new RuleSyntaxError(`rule '${text}': $${m.name} takes no value`);
        if (m.name === "important") important = true;
        else badfilter = true;
      } else if (m.name === "denyallow") {
        denyallow = parseDenyallow(text, m.value);
      } else {
        [types, notTypes] = parseDnstype(text, m.value);
      }
    }
  }
  const tier = exception ? (important ? Tier.importantException : Tier.exception) : important ? Tier.importantBlock : Tier.block;
  const conditions: RuleConditions | null = types || notTypes || denyallow ? { types, notTypes: types ? null : notTypes, denyallow } : null;
  const key = canonicalText(exception, pattern, isRegexp, mods);
  if (isRegexp) {
    if (pattern.length === 0) throw new RuleSyntaxError(`rule '${text}' has an empty regular expression`);
    let regexp: RegExp;
    try {
      regexp = new RegExp(pattern, "i");
    } catch (err) {
      throw new RuleSyntaxError(`rule '${text}' is not a valid regular expression: ${(err as Error).message}`);
    }
    const literal = regexpLiteral(pattern);
    out.push(new ParsedRule(literal.length > 0 ? "literal" : "scan", window(literal), regexp, tier, conditions, badfilter, key));
    return null;
  }
  const m = maskIndex(text, pattern, mods !== null);
  out.push(new ParsedRule(m.index, m.key, m.regexp, tier, conditions, badfilter, key));
  return null;
}

function splitModifiers(text: string): Modifier[] {
  if (text.length === 0) return [];
  return text.split(",").map((part) => {
    const eq = part.indexOf("=");
    return eq < 0 ? { name: part.trim().toLowerCase(), value: null } : { name: part.slice(0, eq).trim().toLowerCase(), value: part.slice(eq + 1).trim() };
  });
}

function parseDenyallow(rule: string, value: string | null): string[] {
  if (value === null || value.length === 0) throw new RuleSyntaxError(`rule '${rule}': $denyallow needs domains (denyallow=a.com|b.org)`);
  return value.split("|").map((d) => {
    const name = d.toLowerCase();
    if (!isPlainDomain(name)) throw new RuleSyntaxError(`rule '${rule}': $denyallow entry '${d}' is not a plain domain (no wildcards, no '~')`);
    return name;
  });
}

function parseDnstype(rule: string, value: string | null): [Set<number> | null, Set<number> | null] {
  if (value === null || value.length === 0) throw new RuleSyntaxError(`rule '${rule}': $dnstype needs DNS types (dnstype=AAAA|HTTPS or dnstype=~A)`);
  const include = new Set<number>();
  const exclude = new Set<number>();
  for (const raw of value.split("|")) {
    const negated = raw.startsWith("~");
    const name = negated ? raw.slice(1) : raw;
    const type = name.length > 0 && !/^\d+$/.test(name) ? parseType(name) : undefined;
    if (type === undefined) throw new RuleSyntaxError(`rule '${rule}': '${raw}' is not a DNS type name`);
    (negated ? exclude : include).add(type);
  }
  // AdGuard: `~A|AAAA` means `AAAA` (inclusions win).
  return include.size > 0 ? [include, null] : [null, exclude];
}

/** `@@pattern$mods` with the modifiers (but $badfilter) sorted, so `$a,b` and `$b,a` are the same rule. */
function canonicalText(exception: boolean, pattern: string, isRegexp: boolean, mods: Modifier[] | null): string {
  const p = `${exception ? "@@" : ""}${isRegexp ? `/${pattern}/` : pattern}`;
  if (mods === null) return p;
  const rest = mods
    .filter((m) => m.name !== "badfilter")
    .map((m) => (m.value === null ? m.name : `${m.name}=${m.value}`))
    .sort();
  return rest.length === 0 ? p : `${p}$${rest.join(",")}`;
}

/** The last LITERAL_WINDOW characters of a literal (any substring of a required literal is required). */
const window = (literal: string): string => (literal.length > LITERAL_WINDOW ? literal.slice(-LITERAL_WINDOW) : literal);

/** Anchors → index: `||x^` suffix, `|x^`/plain domain exact, anything else a compiled mask. */
function maskIndex(rule: string, pattern: string, hasModifiers: boolean): { index: IndexKind; key: string; regexp: RegExp | null } {
  let body = pattern;
  let start: "" | "|" | "||" = "";
  if (body.startsWith("||")) {
    start = "||";
    body = body.slice(2);
  } else if (body.startsWith("|")) {
    start = "|";
    body = body.slice(1);
  }
  let end = true;
  if (body.endsWith("^|")) body = body.slice(0, -2);
  else if (body.endsWith("^") || body.endsWith("|")) body = body.slice(0, -1);
  else end = false;
  if (start === "" && !end && isPlainDomain(body)) return { index: "exact", key: body, regexp: null };
  if (body.includes("|")) throw new RuleSyntaxError(`rule '${rule}': '|' may only start or end the pattern`);
  if (body.includes("^")) throw new RuleSyntaxError(`rule '${rule}': '^' marks the end of the host name and may only end the pattern`);
  if (body.length === 0) {
    if (start === "" && !end && hasModifiers) return { index: "scan", key: "", regexp: null };
    throw new RuleSyntaxError(`rule '${rule}' has no host name pattern`);
  }
  if (!body.includes("*") && isPlainDomain(body)) {
    if (start === "||" && end) return { index: "suffix", key: body, regexp: null };
    if (start === "|" && end) return { index: "exact", key: body, regexp: null };
  }
  if (/^\**$/.test(body) && start !== "|" && !end) return { index: "scan", key: "", regexp: null };
  const regexp = new RegExp(`${start === "||" ? "(?:^|\\.)" : start === "|" ? "^" : ""}${body.replace(/\./g, "\\.").replace(/\*+/g, ".*")}${end ? "$" : ""}`);
  // An end-anchored mask whose last part is `…x.domain.tld` only matches under domain.tld: found
  // through the suffix map like ||x^ rules (most wildcard rules of real lists look like this).
  if (end) {
    const last = body.slice(body.lastIndexOf("*") + 1);
    const dot = last.indexOf(".");
    if (dot >= 0) {
      const tail = last.slice(dot + 1);
      if (tail.includes(".") && isPlainDomain(tail)) return { index: "suffix", key: tail, regexp };
    }
  }
  let literal = "";
  for (const part of body.split("*")) if (part.length > literal.length) literal = part;
  return { index: literal.length > 0 ? "literal" : "scan", key: window(literal), regexp };
}
