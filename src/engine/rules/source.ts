// Rule lists as written in configuration: items split into tokens (`$tag` provider references,
// `&path` rule files, inline rules), and rule files read asynchronously line by line.
// Parsing is pure (for `check` and `dependencies`); loading reads files at create/reload time.
//
// Tokenising: an item is split on commas and whitespace, except that a token starting with
// `regexp:` takes the whole rest of the item (or file line), so a regular expression may
// contain spaces and commas: "domain:a.com, regexp:^(ads|track)\.[a-z]{2, 3}$" is two rules.

import { readFile } from "node:fs/promises";
import { ArgError } from "../../registry/types.js";

export type ArgPath = (string | number)[];

export type RuleToken =
  | { kind: "provider"; tag: string; at: ArgPath }
  | { kind: "file"; path: string; at: ArgPath }
  | { kind: "rule"; text: string; at: ArgPath };

/** Comma, ASCII whitespace/control characters, and the Unicode spaces that `\s` knows. */
function isSeparator(c: number): boolean {
  if (c === 0x2c || c <= 0x20) return true;
  if (c < 0xa0) return false;
  return c === 0xa0 || c === 0x1680 || (c >= 0x2000 && c <= 0x200a) || c === 0x2028 || c === 0x2029 || c === 0x202f || c === 0x205f || c === 0x3000 || c === 0xfeff;
}

function startsWithRegexp(item: string, i: number): boolean {
  const c = item.charCodeAt(i);
  return (c === 0x72 || c === 0x52) && REGEXP_PREFIX.test(item.slice(i, i + 7));
}
const TAG = /^[^\s/?#$&]+$/;
const REGEXP_PREFIX = /^regexp:/i;
/** Lines handled between two yields to the event loop while reading a big file. */
export const LINES_PER_SLICE = 20_000;

/**
 * Splits an item into rule tokens (see the file comment). With `comments`, a token starting
 * with `#` ends the line (rule files allow trailing comments).
 */
export function splitRules(item: string, comments = false): string[] {
  const out: string[] = [];
  let i = 0;
  const n = item.length;
  while (i < n) {
    while (i < n && isSeparator(item.charCodeAt(i))) i++;
    if (i >= n) break;
    if (comments && item.charCodeAt(i) === 0x23) break;
    if (startsWithRegexp(item, i)) {
      out.push(item.slice(i).trimEnd());
      break;
    }
    const start = i;
    while (i < n && !isSeparator(item.charCodeAt(i))) i++;
    out.push(item.slice(start, i));
  }
  return out;
}

/** Whitespace-separated fields (hosts lines); a field starting with `#` ends the line. */
export function splitFields(line: string): string[] {
  const out: string[] = [];
  for (const f of line.split(/\s+/)) {
    if (f.length === 0) continue;
    if (f[0] === "#") break;
    out.push(f);
  }
  return out;
}

/**
 * Tokenises a rule list (a string or a list of strings). `at` of each token is `base` plus the
 * item index when the list is an array. With `refs` false, `$tag` and `&path` are errors
 * (providers take `sets` and `files` instead).
 */
export function parseRuleList(list: string | readonly string[] | undefined, base: ArgPath = [], refs = true): RuleToken[] {
  if (list === undefined) return [];
  const items = typeof list === "string" ? [list] : list;
  const out: RuleToken[] = [];
  items.forEach((item, i) => {
    const at = typeof list === "string" ? base : [...base, i];
    for (const token of splitRules(item)) {
      if (token[0] === "$") {
        if (!refs) throw new ArgError(`'${token}': provider references go in 'sets' (without '$')`, at);
        const tag = token.slice(1);
        if (!TAG.test(tag)) throw new ArgError(`'${token}' is not a valid $tag reference`, at);
        out.push({ kind: "provider", tag, at });
      } else if (token[0] === "&") {
        if (!refs) throw new ArgError(`'${token}': rule files go in 'files'`, at);
        const path = token.slice(1);
        if (path.length === 0) throw new ArgError(`'&' needs a file path`, at);
        out.push({ kind: "file", path, at });
      } else {
        out.push({ kind: "rule", text: token, at });
      }
    }
  });
  return out;
}

export const yieldToEventLoop = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/** A rule file's lines (a leading byte order mark dropped); unreadable → ArgError "cannot read rule file". */
export async function readRuleLines(file: string, shown: string, at: ArgPath): Promise<string[]> {
  let text: string;
  try {
    text = await readFile(file, "utf8");
  } catch (err) {
    throw new ArgError(`cannot read rule file '${shown}': ${(err as Error).message}`, at);
  }
  const lines = text.split("\n");
  if (lines[0].charCodeAt(0) === 0xfeff) lines[0] = lines[0].slice(1);
  return lines;
}

/**
 * Reads a rule file and calls `onLine` with each line's fields (blank and `#` lines skipped).
 * Any error from `onLine` becomes an ArgError "file:line: message" located at `at`; an
 * unreadable file becomes "cannot read rule file". Yields to the event loop between slices.
 */
export async function readRuleFile(
  file: string,
  shown: string,
  at: ArgPath,
  split: (line: string) => string[],
  onLine: (fields: string[], line: number) => void,
): Promise<void> {
  const lines = await readRuleLines(file, shown, at);
  for (let i = 0; i < lines.length; i++) {
    if (i > 0 && i % LINES_PER_SLICE === 0) await yieldToEventLoop();
    const fields = split(lines[i]);
    if (fields.length === 0) continue;
    try {
      onLine(fields, i + 1);
    } catch (err) {
      throw new ArgError(`${shown}:${i + 1}: ${(err as Error).message}`, at);
    }
  }
}

/**
 * Adds every inline rule and every rule of every `&file` (in list order) through `add`, which
 * throws on a bad rule. Returns the provider references, for the caller to resolve.
 */
export async function loadRuleTokens(
  tokens: readonly RuleToken[],
  resolvePath: (path: string) => string,
  add: (rule: string) => void,
): Promise<Extract<RuleToken, { kind: "provider" }>[]> {
  const providers: Extract<RuleToken, { kind: "provider" }>[] = [];
  for (const t of tokens) {
    if (t.kind === "provider") providers.push(t);
    else if (t.kind === "rule") {
      try {
        add(t.text);
      } catch (err) {
        throw new ArgError((err as Error).message, t.at);
      }
    } else await loadRuleFile(resolvePath(t.path), t.path, t.at, add);
  }
  return providers;
}

/** Adds the rules of one file (one or more per line) through `add`. */
export function loadRuleFile(file: string, shown: string, at: ArgPath, add: (rule: string) => void): Promise<void> {
  return readRuleFile(file, shown, at, (line) => splitRules(line, true), (fields) => {
    for (const f of fields) {
      if (f[0] === "$" || f[0] === "&") throw new Error(`'${f}': provider references and file includes are not allowed inside a rule file`);
      add(f);
    }
  });
}
