// The rule file of a dynamic_domain_set, and the stores shared by file path.
//
// Format: a rule file any domain_set can read (one rule a line, `#` comments), written by Sluice
// with one `#@ <added ms> <expires ms or -> <source>` line above each rule that says when it came,
// when it leaves and where from. A rule without such a line was written by hand (source `file`,
// never expires). Every write replaces the whole file atomically (src/config/atomic-file.ts).
//
// A configuration reload creates the new generation's set beside the old one; both hold the same
// store (the one for that path), so nothing learned or added while the reload runs is lost, and the
// file is read again only when someone else changed it. Reads and writes of one path take turns.

import { mkdir, stat } from "node:fs/promises";
import { dirname } from "node:path";
import { replaceFileAtomically } from "../../../config/atomic-file.js";
import { Slicer } from "../../../engine/rules/slicer.js";
import { ruleLineBatches, splitRules } from "../../../engine/rules/source.js";
import { DynamicRules, parseRule, RULE_SOURCES, type ParsedRule, type RuleSource } from "./store.js";

/** Identity of the file as last read or written: a change by anyone else shows in one of these. */
export interface FileStamp {
  ino: number;
  size: number;
  mtimeMs: number;
}

export interface SharedStore {
  readonly path: string;
  readonly store: DynamicRules;
  /** Live instances using it (two during a configuration reload). */
  refs: number;
  /** The file has been read (or created) once. */
  loaded: boolean;
  stamp: FileStamp | null;
  /** The tail of the chain of reads and writes of this path. */
  lock: Promise<unknown>;
}

const stores = new Map<string, SharedStore>();

/** The store of `path` (absolute): the live one, or a new empty one that its concern will load. */
export function acquireStore(path: string, clock: () => number): SharedStore {
  let s = stores.get(path);
  if (s === undefined) {
    s = { path, store: new DynamicRules(clock), refs: 0, loaded: false, stamp: null, lock: Promise.resolve() };
    stores.set(path, s);
  }
  s.refs++;
  return s;
}

/** Lets go of a store; the last user's going forgets it (the next start reads the file). */
export function releaseStore(s: SharedStore): void {
  s.refs--;
  if (s.refs <= 0 && stores.get(s.path) === s) stores.delete(s.path);
}

/** Runs `work` after every earlier read or write of the same path has finished. */
export function withFileLock<T>(s: SharedStore, work: () => Promise<T>): Promise<T> {
  const run = s.lock.then(work, work);
  s.lock = run.catch(() => undefined);
  return run;
}

const stampFrom = (st: { ino: number; size: number; mtimeMs: number }): FileStamp => ({ ino: st.ino, size: st.size, mtimeMs: st.mtimeMs });

export async function stampOf(path: string): Promise<FileStamp | null> {
  try {
    return stampFrom(await stat(path));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return null;
    throw err;
  }
}

export const sameStamp = (a: FileStamp | null, b: FileStamp | null): boolean =>
  a !== null && b !== null && a.ino === b.ino && a.size === b.size && a.mtimeMs === b.mtimeMs;

/** One rule of the file with what its `#@` line said. */
export interface FileRule {
  parsed: Extract<ParsedRule, { ok: true }>;
  addedAt: number;
  expiresAt: number;
  source: RuleSource;
}

const META = /^#@\s+(\d{1,16})\s+(\d{1,16}|-)\s+([a-z]+)\s*$/;

/**
 * The rules of the file in order, with its stamp from before the read (a change made during it shows
 * later), or null when there is no file. A line that is not a rule throws `<shown>:<line>: <why>`; a `#@`
 * line that cannot be read is a comment (the rule under it counts as hand-written).
 */
export async function readRulesFile(path: string, shown: string, now: number): Promise<{ rules: FileRule[]; stamp: FileStamp } | null> {
  const stamp = await stampOf(path);
  if (stamp === null) return null;
  const out: FileRule[] = [];
  const slicer = new Slicer();
  let n = 0;
  let meta: { addedAt: number; expiresAt: number; source: RuleSource } | null = null;
  for await (const lines of ruleLineBatches(path, shown, [])) {
    for (const raw of lines) {
      n++;
      if (slicer.due()) await slicer.pause();
      const line = raw.trim();
      if (line.startsWith("#@")) {
        const m = META.exec(line);
        meta = m && (RULE_SOURCES as readonly string[]).includes(m[3]) ? { addedAt: Number(m[1]), expiresAt: m[2] === "-" ? 0 : Number(m[2]), source: m[3] as RuleSource } : null;
        continue;
      }
      if (line === "" || line.startsWith("#")) continue;
      for (const token of splitRules(line, true)) {
        const parsed = parseRule(token);
        if (!parsed.ok) throw new Error(`${shown}:${n}: ${parsed.message}`);
        out.push({ parsed, ...(meta ?? { addedAt: now, expiresAt: 0, source: "file" }) });
        meta = null;
      }
    }
  }
  return { rules: out, stamp };
}

const header = (tag: string): string =>
  `# dynamic_domain_set '${tag}': written by Sluice, one rule a line. The "#@ <added, Unix ms> <expires, Unix ms or -> <source>"\n` +
  `# line above a rule describes it; a rule without one was written by hand. Change it through the API (or reload after editing).\n`;

/** Bytes gathered before each write to the temp file. */
const CHUNK = 64 * 1024;

/**
 * Writes every live rule (in slices); returns how many, and the stamp the file has once in place (taken
 * from the written file itself, so an edit right after the rename is not mistaken for ours). The
 * directory is created when missing.
 */
export async function writeRulesFile(path: string, tag: string, store: DynamicRules): Promise<{ count: number; stamp: FileStamp }> {
  await mkdir(dirname(path), { recursive: true });
  let count = 0;
  let stamp: FileStamp | null = null;
  await replaceFileAtomically(
    path,
    async (handle) => {
      const slicer = new Slicer();
      let chunk = header(tag);
      for (const e of store.liveEntries()) {
        chunk += `#@ ${e.addedAt} ${e.expiresAt === 0 ? "-" : e.expiresAt} ${e.source}\n${e.key}\n`;
        count++;
        if (chunk.length >= CHUNK) {
          await handle.write(chunk);
          chunk = "";
        }
        if (slicer.due()) await slicer.pause();
      }
      if (chunk.length > 0) await handle.write(chunk);
      stamp = stampFrom(await handle.stat());
    },
    "dynamic-set",
  );
  if (stamp === null) throw new Error(`writing ${path} ended without its contents`);
  return { count, stamp };
}
