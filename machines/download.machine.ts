// A `download` plugin's files (download:<tag>): starting → idle ⇄ downloading, or starting → failed.
// With startup_if_missing, the targets missing when the plugin was created are fetched first, one
// after the other (`starting`); the plugin is ready only when they are all in place, and the first
// failure fails the start or reload (the concern declares `startup`, machines/concern.ts).
// Then one batch at a time. A manual request (POST download) while a batch runs is refused at once
// (guard downloadIdle: HTTP 409 download_busy). A pipeline request (the executor in a sequence or a
// cron job) is never refused: it waits, and when the batch ends one more batch of every item runs
// for all pipeline requests that waited, so each gets files fetched after it asked. Every asker is
// answered with its batch's result. A batch fetches its items here, one `fetch` per item, so each
// item's last run, success and error are this actor's context. `fetch` and `fetchMissing` are
// provided by the plugin's control.

import { assign, enqueueActions, fromPromise, setup, stateIn } from "xstate";
import { doneAnswer, reportStarted, reportStartFailed, type Answer, type Asked } from "./concern.js";

export type DownloadSource = "manual" | "pipeline";

export interface DownloadResult {
  total: number;
  succeeded: number;
  failed: number;
}

/** One item fetched: its error's text, or null when the file is in place. */
export interface ItemOutcome {
  error: string | null;
}

export interface FetchInput {
  index: number;
  /** Aborts the batch when the asker goes (a cancelled cron run): `fetch` then rejects, and the batch stops. */
  signal?: AbortSignal;
}

/** What GET downloads shows of an item's runs (its file's size is read from disk). */
export interface ItemStatus {
  last_run_ms: number | null;
  last_success_ms: number | null;
  last_error: string | null;
}

export type DownloadEvent = { type: "DOWNLOAD.RUN"; index: number | null; source: DownloadSource; signal?: AbortSignal } & Asked;

export interface DownloadInput {
  tag: string;
  clock: () => number;
  /** How many items are configured. */
  items: number;
  /** Items whose target was missing when the plugin was created (startup_if_missing), fetched before it is ready. */
  missing: number[];
}

interface Batch {
  index: number | null;
  source: DownloadSource;
  started_at_ms: number;
  signal: AbortSignal | null;
  total: number;
  succeeded: number;
}

export interface DownloadContext {
  tag: string;
  clock: () => number;
  /** By item index. */
  items: ItemStatus[];
  /** Items still to fetch at start-up or in the running batch; the first is being fetched. */
  queue: number[];
  /** When the item being fetched started. */
  fetch_started_ms: number | null;
  /** Requests answered when the running batch ends. */
  askers: string[];
  /** Pipeline requests that arrived during the start-up or the running batch; they get the next batch. */
  waiting: string[];
  batch: Batch | null;
  batches: number;
  last: (DownloadResult & { completed_at_ms: number }) | null;
}

const everyItem = (context: DownloadContext): number[] => context.items.map((_, i) => i);
const resultOf = (batch: Batch | null): DownloadResult => ({ total: batch?.total ?? 0, succeeded: batch?.succeeded ?? 0, failed: (batch?.total ?? 0) - (batch?.succeeded ?? 0) });
const outcomeOf = (event: unknown): ItemOutcome => (event as { output: ItemOutcome }).output;

/** Whether item `index` is being fetched in this snapshot. */
export const fetching = (snapshot: { value: unknown; context: DownloadContext }, index: number): boolean =>
  (snapshot.value === "starting" || snapshot.value === "downloading") && snapshot.context.queue[0] === index;

export const downloadMachine = setup({
  types: {
    context: {} as DownloadContext,
    events: {} as DownloadEvent,
    emitted: {} as Answer,
    input: {} as DownloadInput,
  },
  actors: {
    /** One item of a batch; resolves with its outcome, rejects only when the batch was cancelled. */
    fetch: fromPromise<ItemOutcome, FetchInput>(() => Promise.reject(new Error("not provided"))),
    /** One missing item at start-up; rejects (the start-up fails) when it could not be fetched. */
    fetchMissing: fromPromise<ItemOutcome, FetchInput>(() => Promise.reject(new Error("not provided"))),
  },
  guards: {
    missingAtStart: ({ context }) => context.queue.length > 0,
    /** One batch at a time; a manual request during one (or during start-up) is refused, not queued (HTTP 409). */
    downloadIdle: stateIn("idle"),
    fromPipeline: ({ event }) => event.source === "pipeline",
    moreToFetch: ({ context }) => context.queue.length > 1,
    pipelinesWaiting: ({ context }) => context.waiting.length > 0,
  },
  actions: {
    startBatch: assign(({ context, event }) => {
      const queue = event.index === null ? everyItem(context) : [event.index];
      return {
        askers: [event.requestId],
        queue,
        batch: { index: event.index, source: event.source, started_at_ms: context.clock(), signal: event.signal ?? null, total: queue.length, succeeded: 0 },
        batches: context.batches + 1,
      };
    }),
    addWaiter: assign({ waiting: ({ context, event }) => [...context.waiting, event.requestId] }),
    startFollowUp: assign(({ context }) => {
      const queue = everyItem(context);
      return {
        askers: context.waiting,
        waiting: [],
        queue,
        batch: { index: null, source: "pipeline" as const, started_at_ms: context.clock(), signal: null, total: queue.length, succeeded: 0 },
        batches: context.batches + 1,
      };
    }),
    markFetchStarted: assign({ fetch_started_ms: ({ context }) => context.clock() }),
    /** The first queued item's outcome becomes its status; the queue moves on. */
    recordItem: assign(({ context, event }) => {
      const [index, ...rest] = context.queue;
      const { error } = outcomeOf(event);
      const now = context.clock();
      const items = context.items.map((s, i) => (i === index ? { last_run_ms: context.fetch_started_ms ?? now, last_success_ms: error === null ? now : s.last_success_ms, last_error: error } : s));
      const batch = context.batch && error === null ? { ...context.batch, succeeded: context.batch.succeeded + 1 } : context.batch;
      return { items, queue: rest, batch, fetch_started_ms: null };
    }),
    recordResult: assign({ last: ({ context }) => ({ ...resultOf(context.batch), completed_at_ms: context.clock() }) }),
    answerDone: enqueueActions(({ enqueue, context }) => {
      const output = resultOf(context.batch);
      for (const id of context.askers) enqueue.emit(doneAnswer(id, { output }));
    }),
    finish: assign({ askers: [], batch: null, queue: [], fetch_started_ms: null }),
    reportStarted: reportStarted<DownloadContext, DownloadEvent>(),
    reportStartFailed: reportStartFailed<DownloadContext, DownloadEvent>(),
  },
}).createMachine({
  id: "download",
  initial: "boot",
  context: ({ input }) => ({
    tag: input.tag,
    clock: input.clock,
    items: Array.from({ length: input.items }, () => ({ last_run_ms: null, last_success_ms: null, last_error: null })),
    queue: input.missing,
    fetch_started_ms: null,
    askers: [],
    waiting: [],
    batch: null,
    batches: 0,
    last: null,
  }),
  on: {
    "DOWNLOAD.RUN": [
      { guard: "downloadIdle", target: ".downloading", actions: "startBatch" },
      // A pipeline execution waits for the active batch (or the start-up) instead of failing.
      { guard: "fromPipeline", actions: "addWaiter" },
    ],
  },
  states: {
    boot: { always: [{ guard: "missingAtStart", target: "starting" }, { target: "idle" }] },
    starting: {
      entry: "markFetchStarted",
      invoke: {
        id: "fetchMissing",
        src: "fetchMissing",
        input: ({ context }) => ({ index: context.queue[0] ?? 0 }),
        onDone: [
          { guard: "moreToFetch", target: "starting", reenter: true, actions: "recordItem" },
          { guard: "pipelinesWaiting", target: "downloading", actions: ["recordItem", "reportStarted", "startFollowUp"] },
          { target: "idle", actions: ["recordItem", "reportStarted"] },
        ],
        // The plugin actor destroys the instance and fails the runtime; the file that was there (none) stays so.
        onError: { target: "failed", actions: "reportStartFailed" },
      },
    },
    idle: {},
    downloading: {
      entry: "markFetchStarted",
      invoke: {
        id: "fetch",
        src: "fetch",
        input: ({ context }) => ({ index: context.queue[0] ?? 0, signal: context.batch?.signal ?? undefined }),
        onDone: [
          // Later items still run after a failure.
          { guard: "moreToFetch", target: "downloading", reenter: true, actions: "recordItem" },
          { guard: "pipelinesWaiting", target: "downloading", reenter: true, actions: ["recordItem", "recordResult", "answerDone", "startFollowUp"] },
          { target: "idle", actions: ["recordItem", "recordResult", "answerDone", "finish"] },
        ],
        // A cancelled batch stops before its next item; the items it did not reach count as failed.
        onError: [
          { guard: "pipelinesWaiting", target: "downloading", reenter: true, actions: ["recordResult", "answerDone", "startFollowUp"] },
          { target: "idle", actions: ["recordResult", "answerDone", "finish"] },
        ],
      },
    },
    failed: { type: "final" },
  },
});
