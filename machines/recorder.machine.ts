// A query recorder's writer and the operations on its database (recorder:<tag>). While `running`
// the recorder's writer thread is invoked: `opening` until its database is open, then a cleanup
// (retention, the max_records cap) at once and every cleanup interval, and DELETE records when
// asked (`clearing`: the queue is flushed, then the current generation is emptied). A writer that
// ends unasked (a crash) takes the machine to `restarting`, which starts a new one after a delay
// that doubles up to 30 s; records captured meanwhile wait in the bounded queue or are dropped.
//
// Refusals: a clear while one runs (guard noClearRunning → 409 query_recorder_busy); a clear with
// no writer (opening, restarting: guard writerUp → 503 query_recorder_unavailable). A clear during
// a cleanup is taken: the writer runs them in order.

import { and, assign, emit, fromCallback, fromPromise, setup } from "xstate";
import { doneAnswer, failedAnswer, type Answer, type Asked } from "./concern.js";

export type RecorderEvent = ({ type: "RECORDS.CLEAR" } & Asked) | { type: "WRITER.READY" } | { type: "WRITER.EXITED"; error: string | null };

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
}

export interface RecorderInput {
  tag: string;
  cleanupIntervalMs: number;
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
    /** Runs (or adopts) the writer thread: sends WRITER.READY once it is up and WRITER.EXITED when it ends; closes it when stopped. */
    writer: fromCallback<RecorderEvent, { tag: string }>(() => () => undefined),
    clear: fromPromise<number>(() => Promise.reject(new Error("not provided"))),
    cleanup: fromPromise<number>(() => Promise.reject(new Error("not provided"))),
  },
  guards: {
    writerUp: ({ context }) => context.writer === "up",
    noClearRunning: ({ context }) => context.requestId === null,
  },
  delays: {
    cleanupInterval: ({ context }) => context.cleanupIntervalMs,
    restartDelay: ({ context }) => Math.min(MAX_RESTART_DELAY_MS, 1000 * 2 ** Math.max(0, context.failing - 1)),
  },
  actions: {
    start: assign({ requestId: ({ event }) => (event as { requestId?: string }).requestId ?? null }),
    writerUp: assign({ writer: "up", failing: 0 }),
    writerDown: assign(({ context, event }) => ({ writer: "down" as const, failing: context.failing + 1, last_exit: (event as { error?: string | null }).error ?? "exited" })),
    writerStarting: assign(({ context }) => ({ writer: "starting" as const, restarts: context.writer === "down" ? context.restarts + 1 : context.restarts })),
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
  initial: "running",
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
  }),
  states: {
    running: {
      entry: "writerStarting",
      invoke: { id: "writer", src: "writer", input: ({ context }) => ({ tag: context.tag }) },
      initial: "opening",
      on: {
        "RECORDS.CLEAR": { guard: and(["writerUp", "noClearRunning"]), target: ".clearing", actions: "start" },
        "WRITER.EXITED": [
          { guard: "noClearRunning", target: "restarting", actions: "writerDown" },
          { target: "restarting", actions: ["writerDown", "answerGone", "forgetRequest"] },
        ],
      },
      states: {
        opening: { on: { "WRITER.READY": { target: "cleaning", actions: "writerUp" } } },
        idle: { after: { cleanupInterval: "cleaning" } },
        cleaning: {
          invoke: { id: "cleanup", src: "cleanup", onDone: { target: "idle", actions: "recordCleanup" }, onError: { target: "idle", actions: "recordCleanupError" } },
        },
        clearing: {
          invoke: { id: "clear", src: "clear", onDone: { target: "idle", actions: ["answerDone", "forgetRequest"] }, onError: { target: "idle", actions: ["answerFailed", "forgetRequest"] } },
        },
      },
    },
    restarting: {
      after: { restartDelay: "running" },
      // Never taken (there is no writer): names the guard that refuses a clear now.
      on: { "RECORDS.CLEAR": { guard: "writerUp", target: "running" } },
    },
  },
});
