// Splits master-file text (RFC 1035 §5.1) into entries: one per logical line, with comments
// dropped, parentheses joining physical lines and quoted strings kept whole.

import { EntryError } from "./errors.js";

export interface Token {
  /** The text as written, escapes kept; for a quoted token, what is between the quotes. */
  text: string;
  quoted: boolean;
  /** Written directly after the previous token with no blank between (`alpn="h2"`). */
  glued: boolean;
  line: number;
}

export interface Entry {
  tokens: Token[];
  /** The entry's first line began with a blank, so its owner is the previous one. */
  inheritsOwner: boolean;
  line: number;
}

const SPACE = 0x20;
const TAB = 0x09;
const CR = 0x0d;
const LF = 0x0a;
const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const SEMICOLON = 0x3b;
const OPEN = 0x28;
const CLOSE = 0x29;

function isBlank(c: number): boolean {
  return c === SPACE || c === TAB || c === CR;
}

function endsBareToken(c: number): boolean {
  return isBlank(c) || c === LF || c === SEMICOLON || c === OPEN || c === CLOSE || c === QUOTE;
}

/** Yields the entries of `text` in order; a lexical problem is thrown when it is reached. */
export function* lexEntries(text: string): Generator<Entry> {
  let line = 1;
  let depth = 0;
  let openedOn = 0;
  let tokens: Token[] = [];
  let entryLine = 1;
  let inheritsOwner = false;
  let atLineStart = true;
  let glued = false;
  const n = text.length;
  let i = 0;
  while (i < n) {
    const c = text.charCodeAt(i);
    if (atLineStart) {
      atLineStart = false;
      if (depth === 0) {
        entryLine = line;
        inheritsOwner = isBlank(c);
      }
    }
    if (c === LF) {
      line++;
      i++;
      atLineStart = true;
      glued = false;
      if (depth === 0 && tokens.length > 0) {
        yield { tokens, inheritsOwner, line: entryLine };
        tokens = [];
      }
      continue;
    }
    if (isBlank(c)) {
      glued = false;
      i++;
      continue;
    }
    if (c === SEMICOLON) {
      while (i < n && text.charCodeAt(i) !== LF) i++;
      glued = false;
      continue;
    }
    if (c === OPEN) {
      if (depth === 0) openedOn = line;
      depth++;
      glued = false;
      i++;
      continue;
    }
    if (c === CLOSE) {
      if (depth === 0) throw new EntryError("')' without a matching '('", line);
      depth--;
      glued = false;
      i++;
      continue;
    }
    if (c === QUOTE) {
      let j = i + 1;
      for (;;) {
        if (j >= n || text.charCodeAt(j) === LF) throw new EntryError("quoted string not closed on its line", line);
        const d = text.charCodeAt(j);
        if (d === QUOTE) break;
        if (d === BACKSLASH) {
          if (j + 1 >= n || text.charCodeAt(j + 1) === LF) throw new EntryError("'\\' at the end of a line escapes nothing", line);
          j += 2;
        } else j++;
      }
      tokens.push({ text: text.slice(i + 1, j), quoted: true, glued, line });
      glued = true;
      i = j + 1;
      continue;
    }
    let j = i;
    while (j < n) {
      const d = text.charCodeAt(j);
      if (d === BACKSLASH) {
        if (j + 1 >= n || text.charCodeAt(j + 1) === LF) throw new EntryError("'\\' at the end of a line escapes nothing", line);
        j += 2;
        continue;
      }
      if (endsBareToken(d)) break;
      j++;
    }
    tokens.push({ text: text.slice(i, j), quoted: false, glued, line });
    glued = true;
    i = j;
  }
  if (depth > 0) throw new EntryError(`'(' opened on line ${openedOn} is never closed`, openedOn);
  if (tokens.length > 0) yield { tokens, inheritsOwner, line: entryLine };
}

/**
 * Decodes a character-string as written (escapes `\X` and `\DDD`) into bytes; other characters
 * are taken as UTF-8.
 */
export function decodeText(raw: string): Buffer {
  if (!raw.includes("\\")) return Buffer.from(raw, "utf8");
  const out: number[] = [];
  for (let i = 0; i < raw.length; i++) {
    const c = raw.charCodeAt(i);
    if (c !== BACKSLASH) {
      if (c < 0x80) out.push(c);
      else {
        const cp = raw.codePointAt(i) ?? c;
        for (const b of Buffer.from(String.fromCodePoint(cp), "utf8")) out.push(b);
        if (cp > 0xffff) i++;
      }
      continue;
    }
    if (i + 1 >= raw.length) throw new EntryError("'\\' at the end of a string escapes nothing");
    const digits = raw.slice(i + 1, i + 4);
    if (/^\d/.test(digits)) {
      if (!/^\d{3}$/.test(digits) || Number(digits) > 255) throw new EntryError(`bad escape '\\${digits}': use \\DDD with a value 0-255`);
      out.push(Number(digits));
      i += 3;
    } else {
      const cp = raw.codePointAt(i + 1) ?? 0;
      for (const b of Buffer.from(String.fromCodePoint(cp), "utf8")) out.push(b);
      i += cp > 0xffff ? 2 : 1;
    }
  }
  return Buffer.from(out);
}
