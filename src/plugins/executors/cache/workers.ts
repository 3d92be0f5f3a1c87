// A cache with data-plane workers (docs/operations.md, "Using several cores"): each worker fills a
// memory cache of its own, and the primary's, which answers no query, stays empty. So the primary's
// routes ask the workers, which run each question through their own cache actor, one operation at a
// time, as their routes would:
// - entries: worker 1's entries page by page, then worker 2's, and so on; each row names its worker,
//   and a cursor names the worker and that worker's own cursor;
// - delete: the entry goes from every worker that holds it;
// - dump: every worker's entries in one dump (an entry several workers hold, once: the one used last);
// - load_dump: the dump is decoded here (its `size` most recently used live entries) and every
//   worker loads those.
// flush needs none of this: it reaches every worker as a shared change (control.ts).

import { ActorGoneError } from "../../../../actors/ask.js";
import { Slicer } from "../../../engine/rules/slicer.js";
import { RefusedError, RouteError } from "../../../registry/control.js";
import type { ControlHandle } from "../../../registry/types.js";
import { answer, type ChannelMessage, type ProcessRole, type WorkerAnswer } from "../../../registry/process-role.js";
import { DEFAULT_PAGE, type CacheEntriesPage, type CacheEntriesQuery, type CacheEntryRow } from "./api.js";
import { decodeDump, decodeDumpStream, encodeDump } from "./dump.js";
import { InvalidEntryIdError, InvalidQueryError } from "./errors.js";
import { keyFromId, keyString } from "./key.js";
import type { Entry } from "./store.js";

export const CACHE_QUESTION = "cache?";

/** How long the primary waits for a worker's page or deletion, and for its dump or load. */
const QUICK_MS = 5_000;
const BULK_MS = 60_000;

/** What a worker's cache is asked (`op`) and answers (`error`, or the op's result). */
type Question =
  /** `cursor` is worker `cursorOf`'s own; the others list from their newest. */
  | { op: "entries"; limit: number; cursor: string | null; cursorOf: number; qname: string | undefined }
  | { op: "delete"; id: string }
  | { op: "dump" }
  | { op: "load"; bytes: Uint8Array };

interface Failure {
  code: string;
  message: string;
}

/** What the worker's cache needs to answer: its listing, and its actor for what changes it. */
export interface AnsweringCache {
  entries(query: CacheEntriesQuery): CacheEntriesPage;
}

/** An error of a worker's cache as it travels: its API code and message. */
function failureOf(err: unknown, worker: number): Failure {
  if (err instanceof RouteError) return { code: err.code, message: err.message };
  if (err instanceof RefusedError) return { code: err.guard === "cacheIdle" ? "cache_busy" : "plugin_unavailable", message: `worker ${worker}'s cache is busy with another operation or not running` };
  if (err instanceof ActorGoneError) return { code: "plugin_unavailable", message: `worker ${worker}'s cache is being replaced` };
  return { code: "plugin_unavailable", message: `worker ${worker}: ${err instanceof Error ? err.message : String(err)}` };
}

async function* once(bytes: Uint8Array): AsyncGenerator<Uint8Array> {
  yield bytes;
}

/** A worker's side: answers the primary's questions for the cache `tag`; returns the removal. */
export function answerCacheQuestions(tag: string, role: Extract<ProcessRole, { kind: "worker" }>, cache: AnsweringCache, self: ControlHandle): () => void {
  const run = async (q: Question): Promise<Record<string, unknown>> => {
    switch (q.op) {
      case "entries":
        return { page: cache.entries({ limit: q.limit, cursor: q.cursorOf === role.index ? q.cursor : null, qname: q.qname }) };
      case "delete":
        await self.ask({ type: "CACHE.DELETE", id: q.id });
        return { deleted: true };
      case "dump":
        return { bytes: await self.ask({ type: "CACHE.DUMP" }) };
      case "load":
        return { loaded: await self.ask({ type: "CACHE.LOAD", source: once(q.bytes) }) };
    }
  };
  return role.channel.listen(CACHE_QUESTION, tag, (m, reply) => {
    run(m.question as Question).then(
      (payload) => answer(m, reply, payload),
      (err: unknown) => answer(m, reply, { error: failureOf(err, role.index) }),
    );
  });
}

/** The answers' failures, thrown as the route's error (the first one; `tolerated` codes are not failures). */
function throwFailures(answers: readonly WorkerAnswer[], tolerated: readonly string[] = []): void {
  for (const a of answers) {
    const f = a.answer.error as Failure | undefined;
    if (f !== undefined && !tolerated.includes(f.code)) throw new RouteError(f.code, f.message);
  }
}

/** A primary's cursor: `w<worker>` to start at a worker, `w<worker>.<its own cursor>` to go on in it. */
function parseCursor(cursor: string | null | undefined): { worker: number; inner: string | null } {
  if (cursor === undefined || cursor === null || cursor === "") return { worker: 0, inner: null };
  const m = /^w(\d{1,2})(?:\.(.+))?$/.exec(cursor);
  if (!m) throw new InvalidQueryError("cursor is not one this cache handed out");
  return { worker: Number(m[1]), inner: m[2] ?? null };
}

/** The primary's side: the routes' work, asked of the workers. */
export class WorkerCaches {
  constructor(
    private readonly tag: string,
    private readonly role: Extract<ProcessRole, { kind: "primary" }>,
    /** The cache's capacity (`size`): what a load keeps. */
    private readonly capacity: number,
    /** The cache's clocks: monotonic ms, and wall-clock ms as the cache sees them. */
    private readonly now: () => number,
    private readonly unixNow: () => number,
  ) {}

  private ask(question: Question, timeoutMs: number): Promise<WorkerAnswer[]> {
    const message: ChannelMessage = { t: CACHE_QUESTION, key: this.tag, question };
    return this.role.askWorkers(message, timeoutMs);
  }

  private async askSome(question: Question, timeoutMs: number): Promise<WorkerAnswer[]> {
    const answers = await this.ask(question, timeoutMs);
    if (answers.length === 0) throw new RouteError("plugin_unavailable", "no data-plane worker answered");
    return answers;
  }

  /** A page of live entries: the workers' in turn, newest first within each; `total_entries` counts all workers'. */
  async entries(query: CacheEntriesQuery): Promise<CacheEntriesPage> {
    const at = parseCursor(query.cursor);
    // Every worker answers (each one's total counts); the page is the first one with rows at or after the cursor's worker.
    const answers = await this.askSome({ op: "entries", limit: query.limit ?? DEFAULT_PAGE, cursor: at.inner, cursorOf: at.worker, qname: query.qname }, QUICK_MS);
    throwFailures(answers);
    const pages = answers.map((a) => ({ worker: a.worker, page: a.answer.page as CacheEntriesPage }));
    const total = pages.reduce((sum, p) => sum + p.page.total_entries, 0);
    const shown = pages.find((p) => p.worker >= at.worker && p.page.entries.length > 0);
    if (shown === undefined) return { entries: [], next_cursor: null, total_entries: total };
    const { worker, page } = shown;
    const later = pages.find((p) => p.worker > worker && p.page.total_entries > 0);
    const next = page.next_cursor !== null ? `w${worker}.${page.next_cursor}` : later ? `w${later.worker}` : null;
    const entries: CacheEntryRow[] = page.entries.map((row) => ({ ...row, worker }));
    return { entries, next_cursor: next, total_entries: total };
  }

  /** Removes the entry from every worker; false when none held it. */
  async deleteEntry(id: string): Promise<boolean> {
    if (keyFromId(id) === null) throw new InvalidEntryIdError();
    const answers = await this.askSome({ op: "delete", id }, QUICK_MS);
    throwFailures(answers, ["cache_entry_not_found"]);
    return answers.some((a) => a.answer.deleted === true);
  }

  /** Every worker's live entries in one dump; an entry held by several, once (the one used last). */
  async dump(): Promise<Buffer> {
    const answers = await this.askSome({ op: "dump" }, BULK_MS);
    throwFailures(answers);
    const now = this.now();
    const unixNow = this.unixNow();
    const byKey = new Map<string, Entry>();
    for (const a of answers) {
      for (const e of decodeDump(Buffer.from(a.answer.bytes as Uint8Array), now, unixNow)) {
        const key = keyString(e);
        const held = byKey.get(key);
        if (held === undefined || e.lastAccess > held.lastAccess) byKey.set(key, e);
      }
    }
    return encodeDump([...byKey.values()].sort((a, b) => b.lastAccess - a.lastAccess), now, unixNow);
  }

  /** Decodes the dump here (undecodable data changes nothing anywhere), then every worker loads its live entries. */
  async load(source: Buffer | AsyncIterable<Uint8Array>): Promise<number> {
    const now = this.now();
    const unixNow = this.unixNow();
    const entries = await decodeDumpStream(Buffer.isBuffer(source) ? [source] : source, this.capacity, new Slicer(), now, unixNow);
    const bytes = encodeDump(entries, now, unixNow);
    const answers = await this.askSome({ op: "load", bytes }, BULK_MS);
    throwFailures(answers);
    if (answers.length < this.role.workers) throw new RouteError("plugin_unavailable", `${answers.length} of ${this.role.workers} workers loaded the dump (the others did not answer: restarting?); load it again`);
    return entries.length;
  }
}
