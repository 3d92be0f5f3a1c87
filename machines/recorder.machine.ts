// A query recorder's writer and the operations on its database (recorder:<tag>). Three regions:
//
// - writer: the writer thread is invoked while `running`. The first one is the plugin's start-up
//   (`running.starting`: the plugin, and the runtime's next plugin, is ready only once its database
//   is open; a database that cannot be opened fails the plugin and the start or reload). A writer
//   that ends unasked (a crash) takes the region to `restarting`, which starts a new one
//   (`running.opening`) after a delay that doubles up to 30 s; records captured meanwhile wait in
//   the bounded queue or are dropped. The writer closes when the actor stops (the plugin goes).
// - work: with a writer up, a cleanup (retention, the max_records cap) at once and every cleanup
//   interval, and DELETE records when asked (`clearing`: the queue is flushed, then the current
//   generation is emptied). A clear during a cleanup is taken: the writer runs them in order.
// - flush: every flush interval the batch being filled is handed to the writer. Only the ticks are
//   the machine's: a query appends to the batch (and hands a full one over) without the actor.
//
// Refusals: a clear while one runs (recorderNoClearRunning → 409 query_recorder_busy); a clear with
// no writer up (recorderWriterUp → 503 query_recorder_unavailable); a read of the API once the
// reader processes are closing (the plugin is being destroyed: recorderReadersOpen) or while their
// queue is full (recorderReadersFree), both 503 query_recorder_unavailable. A read or clear that was
// admitted and then fails is not a refusal: the routes answer it with its own *_failed code.

import { and, assign, emit, fromCallback, fromPromise, setup } from "xstate";
import { doneAnswer, failedAnswer, reportStarted, reportStartFailed, type Answer, type Asked } from "./concern.js";

export type RecorderEvent =
  | ({ type: "RECORDS.CLEAR" } & Asked)
  /** Admission of one API read (the read itself runs in a reader process, outside the actor). */
  | ({ type: "RECORDS.READ" } & Asked)
  | { type: "WRITER.READY" }
  | { type: "WRITER.EXITED"; error: string | null };

/** The reader processes' queue as the pool keeps it: a plain cell the admission guards read. */
export interface ReaderLoad {
  /** False once the pool is closing (the plugin's destroy): no read starts. */
  open: boolean;
  /** Reads waiting for a reader process. */
  waiting: number;
  /** Past this many waiting, a read is refused. */
  limit: number;
}

export interface RecorderContext {
  tag: string;
  requestId: string | null;
  writer: "starting" | "up" | "down";
  /** Writer threads started after the first (crash restarts). */
  restarts: number;
  /** Restarts since the writer was last up (the delay doubles with each). */
  failing: number;
  last_exit: string | null;
  cleanups: number;
  last_cleanup_deleted: number | null;
  last_cleanup_error: string | null;
  cleanupIntervalMs: number;
  flushIntervalMs: number;
  readers: ReaderLoad;
}

export interface RecorderInput {
  tag: string;
  cleanupIntervalMs: number;
  flushIntervalMs: number;
  readers: ReaderLoad;
}

const MAX_RESTART_DELAY_MS = 30_000;
const errorText = (e: unknown): string => (e instanceof Error ? e.message : String(e));

export const recorderMachine = setup({
  types: {
    context: {} as RecorderContext,
    events: {} as RecorderEvent,
    emitted: {} as Answer,
    input: {} as RecorderInput,
  },
  actors: {
    /** Starts a writer thread: sends WRITER.READY once its database is open, WRITER.EXITED when it ends or cannot start; closes it when stopped. */
    writer: fromCallback<RecorderEvent, { tag: string }>(() => () => undefined),
    clear: fromPromise<number>(() => Promise.reject(new Error("not provided"))),
    cleanup: fromPromise<number>(() => Promise.reject(new Error("not provided"))),
  },
  guards: {
    recorderWriterUp: ({ context }) => context.writer === "up",
    recorderNoClearRunning: ({ context }) => context.requestId === null,
    recorderReadersOpen: ({ context }) => context.readers.open,
    recorderReadersFree: ({ context }) => context.readers.waiting < context.readers.limit,
  },
  delays: {
    cleanupInterval: ({ context }) => context.cleanupIntervalMs,
    flushInterval: ({ context }) => context.flushIntervalMs,
    restartDelay: ({ context }) => Math.min(MAX_RESTART_DELAY_MS, 1000 * 2 ** Math.max(0, context.failing - 1)),
  },
  actions: {
    /** Hands the batch being filled to the writer (held while there is none). */
    flush: () => undefined,
    reportStarted: reportStarted<RecorderContext, RecorderEvent>(),
    reportStartFailed: reportStartFailed<RecorderContext, RecorderEvent>(),
    start: assign({ requestId: ({ event }) => (event as { requestId?: string }).requestId ?? null }),
    markWriterUp: assign({ writer: "up", failing: 0 }),
    markWriterDown: assign(({ context, event }) => ({ writer: "down" as const, failing: context.failing + 1, last_exit: (event as { error?: string | null }).error ?? "exited" })),
    markWriterStarting: assign(({ context }) => ({ writer: "starting" as const, restarts: context.writer === "down" ? context.restarts + 1 : context.restarts })),
    answerAdmitted: emit(({ event }) => doneAnswer((event as Partial<Asked>).requestId ?? null, { output: null })),
    answerDone: emit(({ context, event }) => doneAnswer(context.requestId, event)),
    answerFailed: emit(({ context, event }) => failedAnswer(context.requestId, event)),
    // A clear cut short by the writer's end still gets its answer.
    answerGone: emit(({ context }) => failedAnswer(context.requestId, { error: new Error("the recorder's writer stopped before the clear finished") })),
    forgetRequest: assign({ requestId: null }),
    recordCleanup: assign(({ context, event }) => ({ cleanups: context.cleanups + 1, last_cleanup_deleted: (event as unknown as { output: number }).output, last_cleanup_error: null })),
    recordCleanupError: assign(({ event }) => ({ last_cleanup_error: errorText((event as { error?: unknown }).error) })),
  },
}).createMachine({
  id: "recorder",
  type: "parallel",
  context: ({ input }) => ({
    tag: input.tag,
    requestId: null,
    writer: "starting",
    restarts: 0,
    failing: 0,
    last_exit: null,
    cleanups: 0,
    last_cleanup_deleted: null,
    last_cleanup_error: null,
    cleanupIntervalMs: input.cleanupIntervalMs,
    flushIntervalMs: input.flushIntervalMs,
    readers: input.readers,
  }),
  // Reads do not need the writer (the readers open the database themselves).
  on: { "RECORDS.READ": { guard: and(["recorderReadersOpen", "recorderReadersFree"]), actions: "answerAdmitted" } },
  states: {
    writer: {
      initial: "running",
      states: {
        running: {
          entry: "markWriterStarting",
          invoke: { id: "writer", src: "writer", input: ({ context }) => ({ tag: context.tag }) },
          initial: "starting",
          on: { "WRITER.EXITED": { target: "restarting", actions: "markWriterDown" } },
          states: {
            // The plugin's start-up: a first writer that cannot open its database fails the plugin (no retry).
            starting: {
              on: {
                "WRITER.READY": { target: "up", actions: ["markWriterUp", "reportStarted"] },
                "WRITER.EXITED": { target: "#recorder.writer.failed", actions: ["markWriterDown", "reportStartFailed"] },
              },
            },
            opening: { on: { "WRITER.READY": { target: "up", actions: "markWriterUp" } } },
            up: {},
          },
        },
        restarting: { after: { restartDelay: "running.opening" } },
        // The plugin actor destroys the instance and stops this actor.
        failed: {},
      },
    },
    work: {
      initial: "waiting",
      on: {
        "RECORDS.CLEAR": { guard: and(["recorderWriterUp", "recorderNoClearRunning"]), target: ".clearing", actions: "start" },
        "WRITER.EXITED": ".waiting",
      },
      states: {
        // For a writer: each one's database is cleaned up as soon as it is open.
        waiting: { on: { "WRITER.READY": "cleaning" } },
        idle: { after: { cleanupInterval: "cleaning" } },
        cleaning: {
          invoke: { id: "cleanup", src: "cleanup", onDone: { target: "idle", actions: "recordCleanup" }, onError: { target: "idle", actions: "recordCleanupError" } },
        },
        clearing: {
          invoke: { id: "clear", src: "clear", onDone: { target: "idle", actions: ["answerDone", "forgetRequest"] }, onError: { target: "idle", actions: ["answerFailed", "forgetRequest"] } },
          on: { "WRITER.EXITED": { target: "waiting", actions: ["answerGone", "forgetRequest"] } },
        },
      },
    },
    flush: {
      initial: "ticking",
      states: { ticking: { after: { flushInterval: { target: "ticking", reenter: true, actions: "flush" } } } },
    },
  },
});
