// A `download` plugin's batches (download:<tag>): idle ⇄ downloading, one batch at a time.
// A manual request (POST download) while a batch runs is refused at once (guard downloadIdle:
// HTTP 409 download_busy). A pipeline request (the executor in a sequence or a cron job) is never
// refused: it waits, and when the batch ends one more batch of every item runs for all pipeline
// requests that waited, so each gets files fetched after it asked. Every asker is answered with
// its batch's result. The `batch` actor is provided by the plugin's control.

import { assign, enqueueActions, fromPromise, setup, stateIn } from "xstate";
import { doneAnswer, failedAnswer, type Answer, type Asked } from "./concern.js";

export type DownloadSource = "manual" | "pipeline";

export interface DownloadResult {
  total: number;
  succeeded: number;
  failed: number;
}

export interface BatchInput {
  /** One item by index, or every item. */
  index: number | null;
  /** Aborts the batch when the asker goes (a cancelled cron run). */
  signal?: AbortSignal;
}

export type DownloadEvent = { type: "DOWNLOAD.RUN"; index: number | null; source: DownloadSource; signal?: AbortSignal } & Asked;

export interface DownloadContext {
  tag: string;
  clock: () => number;
  /** Requests answered when the running batch ends. */
  askers: string[];
  /** Pipeline requests that arrived during the running batch; they get the next one. */
  waiting: string[];
  batch: { index: number | null; source: DownloadSource; started_at_ms: number } | null;
  batches: number;
  last: (DownloadResult & { completed_at_ms: number }) | null;
}

const runEvent = (e: unknown): DownloadEvent | null => ((e as { type?: string }).type === "DOWNLOAD.RUN" ? (e as DownloadEvent) : null);

export const downloadMachine = setup({
  types: {
    context: {} as DownloadContext,
    events: {} as DownloadEvent,
    emitted: {} as Answer,
    input: {} as { tag: string; clock: () => number },
  },
  actors: {
    batch: fromPromise<DownloadResult, BatchInput>(() => Promise.reject(new Error("not provided"))),
  },
  guards: {
    /** One batch at a time; a manual request during one is refused, not queued (HTTP 409). */
    downloadIdle: stateIn("idle"),
    fromPipeline: ({ event }) => event.source === "pipeline",
    pipelinesWaiting: ({ context }) => context.waiting.length > 0,
  },
  actions: {
    startBatch: assign(({ context, event }) => ({
      askers: [event.requestId],
      batch: { index: event.index, source: event.source, started_at_ms: context.clock() },
      batches: context.batches + 1,
    })),
    addWaiter: assign({ waiting: ({ context, event }) => [...context.waiting, event.requestId] }),
    startFollowUp: assign(({ context }) => ({
      askers: context.waiting,
      waiting: [],
      batch: { index: null, source: "pipeline" as const, started_at_ms: context.clock() },
      batches: context.batches + 1,
    })),
    answerDone: enqueueActions(({ enqueue, context, event }) => {
      for (const id of context.askers) enqueue.emit(doneAnswer(id, event));
    }),
    answerFailed: enqueueActions(({ enqueue, context, event }) => {
      for (const id of context.askers) enqueue.emit(failedAnswer(id, event));
    }),
    recordResult: assign(({ context, event }) => ({
      last: { ...(event as unknown as { output: DownloadResult }).output, completed_at_ms: context.clock() },
    })),
    finish: assign({ askers: [], batch: null }),
  },
}).createMachine({
  id: "download",
  initial: "idle",
  context: ({ input }) => ({ tag: input.tag, clock: input.clock, askers: [], waiting: [], batch: null, batches: 0, last: null }),
  on: {
    "DOWNLOAD.RUN": [
      { guard: "downloadIdle", target: ".downloading", actions: "startBatch" },
      // A pipeline execution waits for the active batch instead of failing.
      { guard: "fromPipeline", actions: "addWaiter" },
    ],
  },
  states: {
    idle: {},
    downloading: {
      invoke: {
        id: "batch",
        src: "batch",
        // The follow-up batch for waiting pipelines fetches every item; the asker's signal travels as input only.
        input: ({ event }) => {
          const run = runEvent(event);
          return run ? { index: run.index, signal: run.signal } : { index: null };
        },
        onDone: [
          { guard: "pipelinesWaiting", target: "downloading", reenter: true, actions: ["recordResult", "answerDone", "startFollowUp"] },
          { target: "idle", actions: ["recordResult", "answerDone", "finish"] },
        ],
        onError: [
          { guard: "pipelinesWaiting", target: "downloading", reenter: true, actions: ["answerFailed", "startFollowUp"] },
          { target: "idle", actions: ["answerFailed", "finish"] },
        ],
      },
    },
  },
});
