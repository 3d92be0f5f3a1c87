// RFC 1035 master-file text → ResourceRecords (RDATA uncompressed). Every problem, on any input,
// surfaces as a ZoneError naming the file (or snippet) and line.

import { readFileSync } from "node:fs";
import { dirname, isAbsolute, resolve } from "node:path";
import { QCLASS } from "../constants.js";
import type { ResourceRecord } from "../message.js";
import { WireFormatError } from "../name.js";
import { isDirective, runDirective, type DirectiveHost, type ZoneState } from "./directives.js";
import { EntryError, ZoneError } from "./errors.js";
import { looksLikeTtl, lookupType, parseClassName, ROOT, ttlField, zoneName, type ZoneName } from "./fields.js";
import { lexEntries, type Entry } from "./lexer.js";
import { encodeRdata } from "./rdata.js";

export const DEFAULT_TTL = 3600;
export const MAX_INCLUDE_DEPTH = 8;

export interface ZoneOptions {
  /** Origin at the start (presentation text); default the root. */
  origin?: string;
  /** Name of the text's file, used in errors; undefined for an inline snippet. */
  source?: string;
  /** Directory relative $INCLUDE paths resolve against; default the current directory. */
  baseDir?: string;
  /** When false, $INCLUDE is checked but not read (for `check`, which must not touch files). */
  followIncludes?: boolean;
  /** TTL for records with none when no $TTL was given. */
  defaultTtl?: number;
  readFile?: (path: string) => string;
}

interface FileFrame {
  source: string | undefined;
  dir: string;
  depth: number;
  /** Absolute paths of the files being read, outermost first (to refuse include cycles). */
  chain: readonly string[];
}

const readUtf8 = (path: string): string => readFileSync(path, "utf8");

class ZoneParser implements DirectiveHost {
  readonly records: ResourceRecord[] = [];
  private frame: FileFrame;
  private readonly followIncludes: boolean;
  private readonly defaultTtl: number;
  private readonly readFile: (path: string) => string;

  constructor(options: ZoneOptions, frame: FileFrame) {
    this.frame = frame;
    this.followIncludes = options.followIncludes !== false;
    this.defaultTtl = options.defaultTtl ?? DEFAULT_TTL;
    this.readFile = options.readFile ?? readUtf8;
  }

  parseText(text: string, state: ZoneState): void {
    let line = 1;
    try {
      for (const entry of lexEntries(text)) {
        line = entry.line;
        if (isDirective(entry)) runDirective(entry, state, this);
        else this.record(entry, state);
      }
    } catch (err) {
      throw this.located(err, line);
    }
  }

  private located(err: unknown, line: number): ZoneError {
    const source = this.frame.source;
    if (err instanceof ZoneError) return err;
    if (err instanceof EntryError) return new ZoneError(err.message, err.line ?? line, source);
    if (err instanceof WireFormatError) return new ZoneError(err.message, line, source);
    return new ZoneError(`unexpected error: ${err instanceof Error ? err.message : String(err)}`, line, source);
  }

  record(entry: Entry, state: ZoneState): void {
    const tokens = entry.tokens;
    let i = 0;
    let owner: ZoneName;
    if (entry.inheritsOwner) {
      if (state.lastOwner === null) throw new EntryError("line starts with a blank but there is no previous owner to repeat", entry.line);
      owner = state.lastOwner;
    } else {
      owner = zoneName(tokens[0], state.origin);
      i = 1;
    }
    let ttl: number | undefined;
    let klass: number | undefined;
    for (; i < tokens.length; i++) {
      const t = tokens[i];
      if (looksLikeTtl(t) && ttl === undefined) ttl = ttlField(t);
      else if (!t.quoted && klass === undefined && parseClassName(t.text) !== undefined) klass = parseClassName(t.text);
      else break;
    }
    const typeToken = tokens[i];
    if (typeToken === undefined) throw new EntryError("record has no type", entry.line);
    const found = typeToken.quoted ? null : lookupType(typeToken.text);
    if (found === null) {
      if (/^CLASS\d+$/i.test(typeToken.text) && parseClassName(typeToken.text) === undefined) {
        throw new EntryError(`'${typeToken.text}' is not a class a record can have`, typeToken.line);
      }
      const again = looksLikeTtl(typeToken) ? " (the TTL is already given)" : parseClassName(typeToken.text) !== undefined ? " (the class is already given)" : "";
      throw new EntryError(`unknown record type '${typeToken.text}'${again}`, typeToken.line);
    }
    if ("error" in found) throw new EntryError(found.error, typeToken.line);
    const cls = klass ?? QCLASS.IN;
    const data = encodeRdata(found.type, cls, tokens.slice(i + 1), state.origin, entry.line);
    this.records.push({ name: owner.text, type: found.type, class: cls, ttl: ttl ?? state.ttl ?? this.defaultTtl, data });
    state.lastOwner = owner;
  }

  include(path: string, origin: ZoneName, state: ZoneState, line: number): void {
    const outer = this.frame;
    if (!this.followIncludes) return;
    const full = isAbsolute(path) ? path : resolve(outer.dir, path);
    if (outer.depth >= MAX_INCLUDE_DEPTH) throw new EntryError(`$INCLUDE '${path}' is nested deeper than ${MAX_INCLUDE_DEPTH} levels`, line);
    if (outer.chain.includes(full)) throw new EntryError(`$INCLUDE '${path}' includes a file that is already being read (a cycle)`, line);
    let text: string;
    try {
      text = this.readFile(full);
    } catch (err) {
      throw new EntryError(`cannot read included file '${path}': ${readProblem(err)}`, line);
    }
    this.frame = { source: path, dir: dirname(full), depth: outer.depth + 1, chain: [...outer.chain, full] };
    try {
      this.parseText(text, { origin, ttl: state.ttl, lastOwner: state.lastOwner });
    } finally {
      this.frame = outer;
    }
  }
}

function readProblem(err: unknown): string {
  const code = (err as NodeJS.ErrnoException | null)?.code;
  if (code === "ENOENT") return "no such file";
  if (code === "EISDIR") return "it is a directory";
  if (code === "EACCES") return "permission denied";
  return err instanceof Error ? err.message : String(err);
}

function initialState(options: ZoneOptions): ZoneState {
  let origin = ROOT;
  if (options.origin !== undefined && options.origin !== "" && options.origin !== ".") {
    try {
      origin = zoneName({ text: options.origin.endsWith(".") ? options.origin : `${options.origin}.`, quoted: false, glued: false, line: 0 }, ROOT);
    } catch (err) {
      throw new ZoneError(`bad origin: ${err instanceof Error ? err.message : String(err)}`, 0, options.source);
    }
  }
  return { origin, ttl: undefined, lastOwner: null };
}

/** Parses master-file text; throws only ZoneError. */
export function parseZone(text: string, options: ZoneOptions = {}): ResourceRecord[] {
  const dir = options.baseDir ?? process.cwd();
  const parser = new ZoneParser(options, { source: options.source, dir, depth: 0, chain: [] });
  parser.parseText(text, initialState(options));
  return parser.records;
}

/** Reads and parses a zone file; `options.source` (default: the path) names it in errors. */
export function parseZoneFile(path: string, options: ZoneOptions = {}): ResourceRecord[] {
  const source = options.source ?? path;
  const full = resolve(options.baseDir ?? process.cwd(), path);
  let text: string;
  try {
    text = (options.readFile ?? readUtf8)(full);
  } catch (err) {
    throw new ZoneError(`cannot read zone file: ${readProblem(err)}`, 0, source);
  }
  const parser = new ZoneParser(options, { source, dir: dirname(full), depth: 0, chain: [full] });
  parser.parseText(text, initialState({ ...options, source }));
  return parser.records;
}
