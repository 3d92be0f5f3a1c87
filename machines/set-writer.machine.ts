// The batch writer of an `ipset` or `nftset` plugin (ipset:<tag>, nftset:<tag>): idle → waiting →
// writing. Queries put masked prefixes into the plugin's bounded queue without the actor; the queue
// tells the actor, deferred and once per change, when it stops being empty (SETS.QUEUED) and when a
// batch's worth waits (SETS.FULL). `waiting` writes once batchInterval has passed, or at once when a
// batch is full; `writing` invokes `write`, which takes at most one batch from the queue and runs the
// tool once, and resolves with what it did and what is left: a full batch left is written at once,
// less waits for the next interval, nothing goes back to `idle` (no timer runs while nothing waits).
// SETS.FLUSH (POST write, the plugin's destroy) carries the queue's count of accepted entries
// when it was asked (`upTo`): it is answered once every one of them has been taken and written (or
// its write failed), with what those writes did. Nothing is refused: there is no guard an API maps.
// `write` is provided by the plugin (src/plugins/executors/sets/control.ts).

import { assertEvent, assign, emit, enqueueActions, fromCallback, fromPromise, setup } from "xstate";
import { doneAnswer, failedAnswer, type Answer, type Asked } from "./concern.js";

/** What one write did; `write` resolves with it even when the tool failed. */
export interface WriteOutcome {
  /** Entries this write took from the queue (0: the queue was empty and no tool ran). */
  entries: number;
  /** Why the tool failed, or null. */
  error: string | null;
  /** Entries taken from the queue since the plugin was made, this write's included. */
  taken: number;
  /** Entries still queued. */
  remaining: number;
}

/** The answer to SETS.FLUSH: entries written and failed by the writes the flush waited for. */
export interface FlushResult {
  written: number;
  failed: number;
  /** The last failure among those writes, or null. */
  error: string | null;
}

export type SetWriterEvent =
  /** The queue is no longer empty. */
  | { type: "SETS.QUEUED" }
  /** A batch's worth is queued. */
  | { type: "SETS.FULL" }
  /** Write what was accepted up to `upTo` (the queue's count when asked), and answer when it is written. */
  | ({ type: "SETS.FLUSH"; upTo: number } & Asked);

export interface SetWriterInput {
  tag: string;
  batchIntervalMs: number;
  batchSize: number;
  clock: () => number;
}

interface Flusher {
  requestId: string;
  upTo: number;
  /** The context's `written` and `failed` when it asked. */
  written: number;
  failed: number;
  error: string | null;
}

export interface SetWriterContext {
  tag: string;
  batchIntervalMs: number;
  batchSize: number;
  clock: () => number;
  /** Entries taken from the queue, as the last write reported. */
  taken: number;
  /** Tool runs that succeeded and failed. */
  writes: number;
  write_errors: number;
  /** Entries in successful writes, and in failed ones. */
  written: number;
  failed: number;
  last_error: string | null;
  last_write_ms: number | null;
  flushers: Flusher[];
}

const outcomeOf = (event: unknown): WriteOutcome => (event as { output: WriteOutcome }).output;
const errorText = (e: unknown): string => (e instanceof Error ? e.message : String(e));

export const setWriterMachine = setup({
  types: {
    context: {} as SetWriterContext,
    events: {} as SetWriterEvent,
    emitted: {} as Answer,
    input: {} as SetWriterInput,
  },
  actors: {
    /** Hears the queue for as long as the actor runs: sends SETS.QUEUED and SETS.FULL. */
    listen: fromCallback<SetWriterEvent>(() => () => undefined),
    /** Takes at most one batch from the queue and writes it with one run of the tool. */
    write: fromPromise<WriteOutcome>(() => Promise.reject(new Error("not provided"))),
  },
  guards: {
    /** Something the flush asks for is still queued. */
    flushOwed: ({ context, event }) => event.type === "SETS.FLUSH" && event.upTo > context.taken,
    /** A full batch is left after the write. */
    batchLeft: ({ context, event }) => outcomeOf(event).remaining >= context.batchSize,
    /** A flush waits for entries still queued. */
    flushLeft: ({ context, event }) => outcomeOf(event).remaining > 0 && context.flushers.some((f) => f.upTo > outcomeOf(event).taken),
    entriesLeft: ({ event }) => outcomeOf(event).remaining > 0,
  },
  delays: {
    batchInterval: ({ context }) => context.batchIntervalMs,
  },
  actions: {
    addFlusher: assign({
      flushers: ({ context, event }) => {
        assertEvent(event, "SETS.FLUSH");
        return [...context.flushers, { requestId: event.requestId, upTo: event.upTo, written: context.written, failed: context.failed, error: null }];
      },
    }),
    /** A flush with nothing of its own queued: answered at once. */
    answerNothingOwed: emit(({ event }) => {
      assertEvent(event, "SETS.FLUSH");
      return doneAnswer(event.requestId, { output: { written: 0, failed: 0, error: null } satisfies FlushResult });
    }),
    recordWrite: assign(({ context, event }) => {
      const o = outcomeOf(event);
      if (o.entries === 0) return { taken: o.taken };
      const ok = o.error === null;
      return {
        taken: o.taken,
        writes: context.writes + (ok ? 1 : 0),
        write_errors: context.write_errors + (ok ? 0 : 1),
        written: context.written + (ok ? o.entries : 0),
        failed: context.failed + (ok ? 0 : o.entries),
        last_error: ok ? context.last_error : o.error,
        last_write_ms: context.clock(),
        flushers: ok ? context.flushers : context.flushers.map((f) => ({ ...f, error: o.error })),
      };
    }),
    /** Flushes whose entries have all been taken (and written or failed) get their answer; with the queue empty, every flush. */
    answerFlushers: enqueueActions(({ context, event, enqueue }) => {
      const settled = (f: Flusher): boolean => f.upTo <= context.taken || outcomeOf(event).remaining === 0;
      const done = context.flushers.filter(settled);
      if (done.length === 0) return;
      for (const f of done) enqueue.emit(doneAnswer(f.requestId, { output: { written: context.written - f.written, failed: context.failed - f.failed, error: f.error } satisfies FlushResult }));
      enqueue.assign({ flushers: context.flushers.filter((f) => !settled(f)) });
    }),
    /** `write` itself failed (not the tool): every flush is answered with the error, the queue waits for the next interval. */
    failFlushers: enqueueActions(({ context, event, enqueue }) => {
      const error = errorText((event as { error?: unknown }).error);
      for (const f of context.flushers) enqueue.emit(failedAnswer(f.requestId, { error: new Error(error) }));
      enqueue.assign({ flushers: [], last_error: error, write_errors: context.write_errors + 1 });
    }),
  },
}).createMachine({
  id: "setWriter",
  initial: "idle",
  context: ({ input }) => ({
    tag: input.tag,
    batchIntervalMs: input.batchIntervalMs,
    batchSize: input.batchSize,
    clock: input.clock,
    taken: 0,
    writes: 0,
    write_errors: 0,
    written: 0,
    failed: 0,
    last_error: null,
    last_write_ms: null,
    flushers: [],
  }),
  invoke: { id: "queue", src: "listen" },
  states: {
    // Nothing queued (as far as the actor knows): no timer.
    idle: {
      on: {
        "SETS.QUEUED": "waiting",
        "SETS.FULL": "writing",
        "SETS.FLUSH": [{ guard: "flushOwed", target: "writing", actions: "addFlusher" }, { actions: "answerNothingOwed" }],
      },
    },
    waiting: {
      after: { batchInterval: "writing" },
      on: {
        "SETS.FULL": "writing",
        "SETS.FLUSH": [{ guard: "flushOwed", target: "writing", actions: "addFlusher" }, { actions: "answerNothingOwed" }],
      },
    },
    // QUEUED and FULL are heard in the outcome (`remaining`); a flush waits for the writes that take its entries.
    writing: {
      on: { "SETS.FLUSH": { actions: "addFlusher" } },
      invoke: {
        id: "write",
        src: "write",
        onDone: [
          { guard: "batchLeft", target: "writing", reenter: true, actions: ["recordWrite", "answerFlushers"] },
          { guard: "flushLeft", target: "writing", reenter: true, actions: ["recordWrite", "answerFlushers"] },
          { guard: "entriesLeft", target: "waiting", actions: ["recordWrite", "answerFlushers"] },
          { target: "idle", actions: ["recordWrite", "answerFlushers"] },
        ],
        onError: { target: "waiting", actions: "failFlushers" },
      },
    },
  },
});
