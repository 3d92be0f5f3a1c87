// `$GENERATE start-stop[/step] lhs [ttl] [class] type rhs...`: the range and the `$` / `${offset,width,base}`
// substitutions applied to each token.

import { EntryError } from "./errors.js";
import type { Token } from "./lexer.js";

/** More would be a typo or an attempt to exhaust memory, not a zone. */
export const MAX_GENERATED = 65536;
const MAX_WIDTH = 255;

export interface GenerateRange {
  start: number;
  stop: number;
  step: number;
}

export function parseRange(token: Token): GenerateRange {
  const m = /^(\d{1,10})-(\d{1,10})(?:\/(\d{1,10}))?$/.exec(token.text);
  if (!m || token.quoted) throw new EntryError(`$GENERATE range must be start-stop or start-stop/step, got '${token.text}'`, token.line);
  const start = Number(m[1]);
  const stop = Number(m[2]);
  const step = m[3] === undefined ? 1 : Number(m[3]);
  if (stop > 0x7fffffff) throw new EntryError(`$GENERATE range end ${stop} is too large`, token.line);
  if (start > stop) throw new EntryError(`$GENERATE range starts after it ends (${start} > ${stop})`, token.line);
  if (step < 1) throw new EntryError("$GENERATE step must be at least 1", token.line);
  const count = Math.floor((stop - start) / step) + 1;
  if (count > MAX_GENERATED) throw new EntryError(`$GENERATE would make ${count} records; at most ${MAX_GENERATED} are allowed`, token.line);
  return { start, stop, step };
}

function format(value: number, width: number, base: string): string {
  switch (base) {
    case "o":
      return value.toString(8).padStart(width, "0");
    case "x":
      return value.toString(16).padStart(width, "0");
    case "X":
      return value.toString(16).toUpperCase().padStart(width, "0");
    case "n":
    case "N": {
      // Nibble form for ip6.arpa: hex digits (at least `width`), lowest first, dot-separated.
      const hex = value.toString(16).padStart(width, "0");
      const out = [...hex].reverse().join(".");
      return base === "N" ? out.toUpperCase() : out;
    }
    default:
      return value.toString(10).padStart(width, "0");
  }
}

/** Replaces `$` and `${offset[,width[,base]]}` with `value`; escapes (`\$`) are kept for the field parser. */
export function substitute(text: string, value: number, line: number): string {
  if (!text.includes("$")) return text;
  let out = "";
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === "\\") {
      out += text.slice(i, i + 2);
      i++;
    } else if (c !== "$") {
      out += c;
    } else if (text[i + 1] !== "{") {
      out += String(value);
    } else {
      const close = text.indexOf("}", i + 2);
      if (close < 0) throw new EntryError(`$GENERATE modifier '${text.slice(i)}' has no closing '}'`, line);
      const spec = text.slice(i + 2, close);
      const m = /^([+-]?\d{1,10})(?:,(\d{1,3})(?:,([doxXnN]))?)?$/.exec(spec);
      if (!m) throw new EntryError(`$GENERATE modifier '\${${spec}}' must be \${offset[,width[,base]]} with base d, o, x, X, n or N`, line);
      const v = value + Number(m[1]);
      const width = m[2] === undefined ? 0 : Number(m[2]);
      if (v < 0) throw new EntryError(`$GENERATE modifier '\${${spec}}' makes the negative value ${v}`, line);
      if (width > MAX_WIDTH) throw new EntryError(`$GENERATE width ${width} is larger than ${MAX_WIDTH}`, line);
      out += format(v, width, m[3] ?? "d");
      i = close;
    }
  }
  return out;
}
