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
import type { Logger } from "../../../observability/logger.js";
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

/** What a worker's cache is asked (`op`); it answers with the result, or with a `failure`. */
type Question =
  /** `cursor` is worker `cursorOf`'s own; the others list from their newest. */
  | { op: "entries"; limit: number; cursor: string | null; cursorOf: number; qname: string | undefined }
  | { op: "delete"; id: string }
  | { op: "dump" }
  | { op: "load"; bytes: Uint8Array };

/** A worker's failure as it travels: a refusal of its cache actor (mapped by the API's guard table), or an error with its code. */
type Failure = { refused: { actor: string; guard: string | null; event: string } } | { gone: string } | { error: { code: string; message: string } };

/** What the worker's cache needs to answer: its listing (what changes it goes through its actor). */
export interface AnsweringCache {
  entries(query: CacheEntriesQuery): CacheEntriesPage;
}

function failureOf(err: unknown): Failure {
  if (err instanceof RefusedError) return { refused: { actor: err.actor, guard: err.guard, event: err.event } };
  if (err instanceof ActorGoneError) return { gone: err.actor };
  if (err instanceof RouteError) return { error: { code: err.code, message: err.message } };
  return { error: { code: "internal_error", message: err instanceof Error ? err.message : String(err) } };
}

/** The error a worker's failure stands for, here (null: it did not fail). */
function errorOf(answer: ChannelMessage): Error | null {
  const f = answer.failure as Failure | undefined;
  if (f === undefined) return null;
  if ("refused" in f) return new RefusedError(f.refused.actor, f.refused.guard, f.refused.event);
  if ("gone" in f) return new ActorGoneError(f.gone);
  return new RouteError(f.error.code, f.error.message);
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
      (err: unknown) => answer(m, reply, { failure: failureOf(err) }),
    );
  });
}

/** The first failure among the answers, thrown (a failure with one of the `tolerated` codes is none). */
function throwFailures(answers: readonly WorkerAnswer[], tolerated: readonly string[] = []): void {
  for (const a of answers) {
    const err = errorOf(a.answer);
    if (err !== null && !(err instanceof RouteError && tolerated.includes(err.code))) throw err;
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
    private readonly log: Logger,
  ) {}

  private ask(question: Question, timeoutMs: number): Promise<WorkerAnswer[]> {
    const message: ChannelMessage = { t: CACHE_QUESTION, key: this.tag, question };
    return this.role.askWorkers(message, timeoutMs);
  }

  private async askSome(question: Question, timeoutMs: number): Promise<WorkerAnswer[]> {
    const answers = await this.ask(question, timeoutMs);
    // No worker serves (all are starting or restarting): as for an actor that is gone (the API's guard table).
    if (answers.length === 0) throw new ActorGoneError("workers");
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
    // A worker that did not answer is restarting: it starts empty (worker 1 from dump_file), as after any restart.
    if (answers.length < this.role.workers) this.log.warn({ plugin: this.tag, loaded_by: answers.map((a) => a.worker) }, "a dump was loaded by the workers that answered; the others are restarting");
    return entries.length;
  }
}
