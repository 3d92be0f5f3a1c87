// The state file of a `clients` provider: clients named through the API, group pauses (with the time
// each ends) and the clients seen, as one JSON document replaced atomically on every write
// (src/config/atomic-file.ts).
//
// A configuration reload creates the new generation's provider beside the old one. From then on the
// newest one owns the file: the old one refuses changes (503, ask again) and writes nothing more, and
// the new one takes the old one's state from memory (named clients, pauses, and what was seen up to
// that moment) instead of the file, so nothing changed while the reload ran is lost. Writes of one
// path take turns.

import { mkdir, readFile } from "node:fs/promises";
import { dirname } from "node:path";
import type { GroupPause, NamedClient } from "../../../../machines/clients.machine.js";
import { replaceFileAtomically } from "../../../config/atomic-file.js";
import type { SeenClient } from "./directory.js";

export const STATE_FORMAT = "sluice-clients-state/1";

/** The file's content. */
export interface StateDocument {
  format: typeof STATE_FORMAT;
  named: NamedClient[];
  pauses: GroupPause[];
  seen: SeenClient[];
}

/** A generation's state, as the next one takes it over. */
export interface HandedState {
  named: NamedClient[];
  pauses: GroupPause[];
  seen: SeenClient[];
}

/** A live provider using a state file. */
export interface StateHolder {
  handOver(): HandedState;
}

interface SharedPath {
  /** Oldest first: the last one owns the file. */
  holders: StateHolder[];
  /** The tail of the chain of reads and writes of this path. */
  lock: Promise<unknown>;
}

const paths = new Map<string, SharedPath>();

export function attachHolder(path: string, holder: StateHolder): void {
  let shared = paths.get(path);
  if (shared === undefined) {
    shared = { holders: [], lock: Promise.resolve() };
    paths.set(path, shared);
  }
  shared.holders.push(holder);
}

export function detachHolder(path: string, holder: StateHolder): void {
  const shared = paths.get(path);
  if (shared === undefined) return;
  shared.holders = shared.holders.filter((h) => h !== holder);
  if (shared.holders.length === 0) paths.delete(path);
}

/** Whether `holder` is the newest live provider of `path` (it alone changes and writes the state). */
export function ownsState(path: string, holder: StateHolder): boolean {
  return paths.get(path)?.holders.at(-1) === holder;
}

/** The live provider of `path` created before `holder` (the generation a reload replaces), or null. */
export function predecessorOf(path: string, holder: StateHolder): StateHolder | null {
  const holders = paths.get(path)?.holders ?? [];
  const i = holders.indexOf(holder);
  return i > 0 ? holders[i - 1] : null;
}

/** Runs `work` after every earlier read or write of the same path has finished. */
export function withStateLock<T>(path: string, work: () => Promise<T>): Promise<T> {
  const shared = paths.get(path);
  if (shared === undefined) return work();
  const run = shared.lock.then(work, work);
  shared.lock = run.catch(() => undefined);
  return run;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);
const strings = (v: unknown): v is string[] => Array.isArray(v) && v.every((s) => typeof s === "string");
const time = (v: unknown): v is number => typeof v === "number" && Number.isSafeInteger(v) && v >= 0;
const textOrNull = (v: unknown): v is string | null => v === null || typeof v === "string";

function namedOf(v: unknown): NamedClient | null {
  if (!isObject(v) || typeof v.name !== "string") return null;
  const list = (x: unknown): string[] | null => (x === undefined ? [] : strings(x) ? x : null);
  const [addresses, macs, ids, groups] = [list(v.addresses), list(v.macs), list(v.ids), list(v.groups)];
  if (addresses === null || macs === null || ids === null || groups === null) return null;
  return { name: v.name, addresses, macs, ids, groups };
}

function pauseOf(v: unknown): GroupPause | null {
  return isObject(v) && typeof v.group === "string" && time(v.paused_until_ms) ? { group: v.group, paused_until_ms: v.paused_until_ms } : null;
}

function seenOf(v: unknown): SeenClient | null {
  if (!isObject(v) || typeof v.key !== "string" || typeof v.address !== "string") return null;
  if (!textOrNull(v.name) || !textOrNull(v.mac) || !textOrNull(v.id) || !textOrNull(v.hostname)) return null;
  if (!time(v.first_seen_ms) || !time(v.last_seen_ms) || !time(v.queries)) return null;
  return { name: v.name, key: v.key, address: v.address, mac: v.mac, id: v.id, hostname: v.hostname, first_seen_ms: v.first_seen_ms, last_seen_ms: v.last_seen_ms, queries: v.queries };
}

/** Entries of a list that have the wrong shape are left out and counted. */
function entries<T>(v: unknown, of: (x: unknown) => T | null, what: string, skipped: string[]): T[] {
  if (v === undefined) return [];
  if (!Array.isArray(v)) throw new Error(`'${what}' is not a list`);
  const out: T[] = [];
  v.forEach((x, i) => {
    const e = of(x);
    if (e === null) skipped.push(`${what}[${i}]`);
    else out.push(e);
  });
  return out;
}

/**
 * The state in the file, or null when there is none. A file that is not such a document throws
 * `<shown>: …` (the start fails: fix or remove the file); entries of the wrong shape are skipped and named.
 */
export async function readStateFile(path: string, shown: string): Promise<{ state: HandedState; skipped: string[] } | null> {
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return null;
    throw new Error(`${shown}: ${(err as Error).message}`, { cause: err });
  }
  try {
    const doc = JSON.parse(text) as unknown;
    if (!isObject(doc) || doc.format !== STATE_FORMAT) throw new Error(`not a clients state file (no "format": "${STATE_FORMAT}")`);
    const skipped: string[] = [];
    const state = { named: entries(doc.named, namedOf, "named", skipped), pauses: entries(doc.pauses, pauseOf, "pauses", skipped), seen: entries(doc.seen, seenOf, "seen", skipped) };
    return { state, skipped };
  } catch (err) {
    throw new Error(`${shown}: ${(err as Error).message}; fix or remove the file`, { cause: err });
  }
}

/** The document's text (one line per entry, so a diff of two versions reads well). */
export function stateText(state: HandedState): string {
  const list = (items: readonly unknown[]): string => (items.length === 0 ? "[]" : `[\n    ${items.map((i) => JSON.stringify(i)).join(",\n    ")}\n  ]`);
  return `{\n  "format": "${STATE_FORMAT}",\n  "named": ${list(state.named)},\n  "pauses": ${list(state.pauses)},\n  "seen": ${list(state.seen)}\n}\n`;
}

/** Replaces the file atomically (its directory is created when missing). */
export async function writeStateFile(path: string, text: string): Promise<void> {
  await mkdir(dirname(path), { recursive: true });
  await replaceFileAtomically(path, text, "clients");
}
