// The control entries of a master file: $ORIGIN, $TTL, $INCLUDE and $GENERATE.

import { EntryError } from "./errors.js";
import { ttlField, zoneName, type ZoneName } from "./fields.js";
import { parseRange, substitute } from "./generate.js";
import { decodeText, type Entry, type Token } from "./lexer.js";

/** What one file's entries see; an included file starts from a copy of its includer's. */
export interface ZoneState {
  origin: ZoneName;
  /** Set by $TTL; records without a TTL use it (or the parser's default). */
  ttl: number | undefined;
  /** Owner of the previous record, inherited by entries starting with a blank. */
  lastOwner: ZoneName | null;
}

/** The parser operations a directive needs. */
export interface DirectiveHost {
  record(entry: Entry, state: ZoneState): void;
  /** Parses another file (path as written) with `origin`, from a copy of `state`. */
  include(path: string, origin: ZoneName, state: ZoneState, line: number): void;
}

export function isDirective(entry: Entry): boolean {
  const first = entry.tokens[0];
  return !first.quoted && first.text.startsWith("$");
}

function args(entry: Entry, min: number, max: number, usage: string): Token[] {
  const rest = entry.tokens.slice(1);
  if (rest.length < min) throw new EntryError(usage, entry.line);
  if (rest.length > max) throw new EntryError(`${usage}; unexpected '${rest[max].text}'`, rest[max].line);
  return rest;
}

export function runDirective(entry: Entry, state: ZoneState, host: DirectiveHost): void {
  const name = entry.tokens[0].text.toUpperCase();
  switch (name) {
    case "$ORIGIN": {
      const [origin] = args(entry, 1, 1, "$ORIGIN needs one domain name");
      state.origin = zoneName(origin, state.origin);
      return;
    }
    case "$TTL": {
      const [ttl] = args(entry, 1, 1, "$TTL needs one TTL");
      state.ttl = ttlField(ttl);
      return;
    }
    case "$INCLUDE": {
      const [file, origin] = args(entry, 1, 2, "$INCLUDE needs a file name and optionally an origin");
      const path = decodeText(file.text).toString("utf8");
      if (path.length === 0 || path.includes("\0")) throw new EntryError("$INCLUDE needs a file name", file.line);
      host.include(path, origin ? zoneName(origin, state.origin) : state.origin, state, entry.line);
      return;
    }
    case "$GENERATE":
      generate(entry, state, host);
      return;
    default:
      throw new EntryError(`unknown directive '${entry.tokens[0].text}' (known: $ORIGIN, $TTL, $INCLUDE, $GENERATE)`, entry.line);
  }
}

function generate(entry: Entry, state: ZoneState, host: DirectiveHost): void {
  const [rangeToken, lhs, ...rest] = args(entry, 4, Infinity, "$GENERATE needs a range, an owner pattern, a type and data");
  const range = parseRange(rangeToken);
  const line = entry.line;
  const at = (t: Token, value: number): Token => ({ ...t, text: substitute(t.text, value, t.line) });
  for (let value = range.start; value <= range.stop; value += range.step) {
    const tokens = [at(lhs, value), ...rest.map((t) => at(t, value))];
    try {
      host.record({ tokens, inheritsOwner: false, line }, state);
    } catch (err) {
      if (err instanceof EntryError) throw new EntryError(`$GENERATE at ${value}: ${err.message}`, err.line);
      throw err;
    }
  }
}
