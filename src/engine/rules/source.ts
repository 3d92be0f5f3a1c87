// Rule lists as written in configuration: items split into tokens (`$tag` provider references,
// `&path` rule files, inline rules), and rule files read asynchronously line by line.
// Parsing is pure (for `check` and `dependencies`); loading reads files at create/reload time.
//
// Tokenising: an item is split on commas and whitespace, except that a token starting with
// `regexp:` takes the whole rest of the item (or file line), so a regular expression may
// contain spaces and commas: "domain:a.com, regexp:^(ads|track)\.[a-z]{2, 3}$" is two rules.

import { createReadStream } from "node:fs";
import { StringDecoder } from "node:string_decoder";
import { ArgError } from "../plugin-args.js";
import { Slicer } from "./slicer.js";

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

/** Bytes read from a rule file at a time; each read is split into lines on its own (no whole-file string). */
const READ_CHUNK = 64 * 1024;

/**
 * A rule file's lines, a read's worth at a time (a leading byte order mark dropped); unreadable →
 * ArgError "cannot read rule file". The file is never held whole, nor split in one go.
 */
export async function* ruleLineBatches(file: string, shown: string, at: ArgPath): AsyncGenerator<string[]> {
  const decoder = new StringDecoder("utf8");
  let partial = "";
  let first = true;
  const stream = createReadStream(file, { highWaterMark: READ_CHUNK });
  try {
    for await (const chunk of stream as AsyncIterable<Buffer>) {
      const lines = (partial + decoder.write(chunk)).split("\n");
      partial = lines.pop() ?? "";
      if (first && lines.length > 0) {
        if (lines[0].charCodeAt(0) === 0xfeff) lines[0] = lines[0].slice(1);
        first = false;
      }
      if (lines.length > 0) yield lines;
    }
  } catch (err) {
    stream.destroy();
    throw new ArgError(`cannot read rule file '${shown}': ${(err as Error).message}`, at);
  }
  const last = partial + decoder.end();
  yield [first && last.charCodeAt(0) === 0xfeff ? last.slice(1) : last];
}

/** A rule file's lines (a leading byte order mark dropped), read in slices; unreadable → ArgError "cannot read rule file". */
export async function readRuleLines(file: string, shown: string, at: ArgPath, slicer = new Slicer()): Promise<string[]> {
  const lines: string[] = [];
  for await (const batch of ruleLineBatches(file, shown, at)) {
    for (const l of batch) lines.push(l);
    if (slicer.dueNow()) await slicer.pause();
  }
  return lines;
}

/**
 * Reads a rule file and calls `onLine` with each line's fields (blank and `#` lines skipped).
 * Any error from `onLine` becomes an ArgError "file:line: message" located at `at`; an
 * unreadable file becomes "cannot read rule file". Runs in slices that yield to the event loop.
 */
export async function readRuleFile(
  file: string,
  shown: string,
  at: ArgPath,
  split: (line: string) => string[],
  onLine: (fields: string[], line: number) => void,
  slicer = new Slicer(),
): Promise<void> {
  let n = 0;
  for await (const lines of ruleLineBatches(file, shown, at)) {
    for (let i = 0; i < lines.length; i++) {
      n++;
      if (slicer.due()) await slicer.pause();
      const fields = split(lines[i]);
      if (fields.length === 0) continue;
      try {
        onLine(fields, n);
      } catch (err) {
        throw new ArgError(`${shown}:${n}: ${(err as Error).message}`, at);
      }
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
  slicer = new Slicer(),
): Promise<Extract<RuleToken, { kind: "provider" }>[]> {
  const providers: Extract<RuleToken, { kind: "provider" }>[] = [];
  for (const t of tokens) {
    if (t.kind === "provider") providers.push(t);
    else if (t.kind === "rule") {
      if (slicer.due()) await slicer.pause();
      try {
        add(t.text);
      } catch (err) {
        throw new ArgError((err as Error).message, t.at);
      }
    } else await loadRuleFile(resolvePath(t.path), t.path, t.at, add, slicer);
  }
  return providers;
}

/** Adds the rules of one file (one or more per line) through `add`. */
export function loadRuleFile(file: string, shown: string, at: ArgPath, add: (rule: string) => void, slicer = new Slicer()): Promise<void> {
  return readRuleFile(
    file,
    shown,
    at,
    (line) => splitRules(line, true),
    (fields) => {
      for (const f of fields) {
        if (f[0] === "$" || f[0] === "&") throw new Error(`'${f}': provider references and file includes are not allowed inside a rule file`);
        add(f);
      }
    },
    slicer,
  );
}
