// A `ros_address_list` plugin's manager (ros:<tag>): it keeps RouterOS address lists in step with
// the addresses DNS answers gave, through the router's REST API. The data plane never sees it: a query
// puts its addresses into the instance's bounded intake (full → dropped and counted) and, when the
// intake was empty, rings a doorbell (ROS.WORK, sent off the query's path).
//
//   recovering ⇄ recoverWait ─▶ idle ─▶ gathering ─▶ syncing ─▶ idle | gathering | backoff ─▶ syncing
//                                 └──▶ reconciling ─▶ idle                       (any) ─▶ stopping ─▶ stopped
//
// - recovering: one scan of the configured lists at start (the plugin is ready without it): rows this
//   plugin owns (its comment) are taken into the ledger, persistent rows no longer configured are
//   removed, configured persistent ones missing are added. A failure waits `retryDelay` (doubling up
//   to a cap) and scans again; observations wait in the intake meanwhile.
// - gathering: the batch window (`batchInterval`) after the first observation, so a burst of answers
//   goes out as one batch. syncing: one batch (`sync`, up to batch_size addresses, retries first).
//   Addresses whose calls failed transiently stay in the retry backlog: `backoff` waits `retryDelay`
//   (doubling with each failed batch) and syncs again; a batch without failures resets the delay.
// - reconciling: with persistent addresses, every `reconcileInterval` the same scan as at start (from
//   idle when its timer fires, or after a batch once it is due, so steady traffic does not put it off).
// - ROS.STOP (sent by the instance's destroy, which first cancels the RouterOS call in flight):
//   waits for the work under way to end, then `cleanup` removes the rows this plugin owns
//   (cleanup_on_shutdown) and answers; without cleanup it answers at once.
//
// The work (recover, sync, reconcile, cleanup), the doorbell and the `rosHasWork` guard are provided
// by the plugin (src/plugins/executors/ros-address-list/control.ts); no API route sends events here.

import { and, assign, emit, fromCallback, fromPromise, setup } from "xstate";
import type { Answer, Asked } from "./concern.js";

export type RosEvent = { type: "ROS.WORK" } | ({ type: "ROS.STOP" } & Asked);

/** What one batch did. */
export interface RosSyncResult {
  /** Addresses handled (added, refreshed, found present, or given up). */
  handled: number;
  /** Addresses left in the retry backlog after a transient failure. */
  retry: number;
  /** The last failure of the batch (null: none). */
  error: string | null;
}

/** What a scan (start-up recovery or reconcile) found and did. */
export interface RosScanResult {
  /** Rows of this plugin in the lists now. */
  owned: number;
  added: number;
  removed: number;
}

export interface RosCleanupResult {
  removed: number;
  failed: number;
  /** Lists left to a newer configuration of the same plugin (a reload): not cleaned. */
  handed_over: number;
}

export interface RosInput {
  tag: string;
  batchIntervalMs: number;
  /** Periodic scans: only with persistent addresses configured. */
  reconcileIntervalMs: number | null;
  retryBaseMs: number;
  retryMaxMs: number;
  cleanupOnShutdown: boolean;
  clock: () => number;
}

export interface RosContext extends RosInput {
  /** Failures in a row (scans or batches): the retry delay doubles with each. */
  failing: number;
  recovered: boolean;
  scans: number;
  batches: number;
  last_sync_at_ms: number | null;
  last_scan_at_ms: number | null;
  /** When the next periodic scan is due (null: none). */
  next_scan_at_ms: number | null;
  last_error: string | null;
  last_error_at_ms: number | null;
  cleanup: RosCleanupResult | null;
  stopRequest: string | null;
}

/**
 * Without input (xstate's pure transition() builds an inert actor with none) the delays must still be
 * finite and positive.
 */
const NO_INPUT: RosInput = { tag: "", batchIntervalMs: 100, reconcileIntervalMs: null, retryBaseMs: 1000, retryMaxMs: 60_000, cleanupOnShutdown: false, clock: () => 0 };

const errorText = (e: unknown): string => (e instanceof Error ? e.message : String(e));
const outputOf = <T>(event: unknown): T => (event as { output: T }).output;

/** The delay before retry number `failing` (1 = the first): the base, doubled each time, up to the cap. */
export const retryDelayMs = (base: number, cap: number, failing: number): number => Math.min(Math.max(base, cap), base * 2 ** Math.max(0, Math.min(30, failing - 1)));

export const rosAddressListMachine = setup({
  types: {
    context: {} as RosContext,
    events: {} as RosEvent,
    emitted: {} as Answer,
    input: {} as RosInput,
  },
  actors: {
    /** Installs the instance's doorbell: sends ROS.WORK when an observation lands in an empty intake. */
    doorbell: fromCallback<RosEvent>(() => () => undefined),
    recover: fromPromise<RosScanResult>(() => Promise.reject(new Error("not provided"))),
    sync: fromPromise<RosSyncResult>(() => Promise.reject(new Error("not provided"))),
    reconcile: fromPromise<RosScanResult>(() => Promise.reject(new Error("not provided"))),
    cleanup: fromPromise<RosCleanupResult>(() => Promise.reject(new Error("not provided"))),
  },
  guards: {
    /** Observations wait in the intake or the retry backlog (provided: the instance's queues). */
    rosHasWork: () => false,
    rosBatchLeftRetries: ({ event }) => outputOf<RosSyncResult>(event).retry > 0,
    rosReconciles: ({ context }) => context.reconcileIntervalMs !== null,
    /** A periodic scan has come due while batches kept the manager from resting in idle. */
    rosScanDue: ({ context }) => context.next_scan_at_ms !== null && context.clock() >= context.next_scan_at_ms,
    rosStopAsked: ({ context }) => context.stopRequest !== null,
    rosCleansUp: ({ context }) => context.cleanupOnShutdown,
  },
  delays: {
    batchInterval: ({ context }) => context.batchIntervalMs,
    reconcileInterval: ({ context }) => Math.max(0, (context.next_scan_at_ms ?? context.clock() + 3_600_000) - context.clock()),
    retryDelay: ({ context }) => retryDelayMs(context.retryBaseMs, context.retryMaxMs, context.failing),
  },
  actions: {
    recordStop: assign({ stopRequest: ({ event }) => (event as Partial<Asked>).requestId ?? "" }),
    recordScan: assign(({ context }) => {
      const now = context.clock();
      return { recovered: true, scans: context.scans + 1, failing: 0, last_scan_at_ms: now, next_scan_at_ms: context.reconcileIntervalMs === null ? null : now + context.reconcileIntervalMs };
    }),
    /** A failed periodic scan is tried again a whole interval later. */
    postponeScan: assign({ next_scan_at_ms: ({ context }) => (context.reconcileIntervalMs === null ? null : context.clock() + context.reconcileIntervalMs) }),
    recordFailure: assign(({ context, event }) => ({
      failing: context.failing + 1,
      last_error: errorText((event as { error?: unknown }).error),
      last_error_at_ms: context.clock(),
    })),
    recordError: assign(({ context, event }) => ({ last_error: errorText((event as { error?: unknown }).error), last_error_at_ms: context.clock() })),
    /** A batch's outcome: failures in a row count up while addresses wait for a retry. */
    recordBatch: assign(({ context, event }) => {
      const out = outputOf<RosSyncResult>(event);
      const now = context.clock();
      return {
        batches: context.batches + 1,
        last_sync_at_ms: now,
        failing: out.retry > 0 ? context.failing + 1 : 0,
        ...(out.error === null ? {} : { last_error: out.error, last_error_at_ms: now }),
      };
    }),
    recordCleanup: assign({ cleanup: ({ event }) => outputOf<RosCleanupResult>(event) }),
    answerStopped: emit(({ context }): Answer => ({ type: "answer", requestId: context.stopRequest ?? "", ok: true, output: context.cleanup })),
  },
}).createMachine({
  id: "rosAddressList",
  initial: "recovering",
  context: ({ input }) => ({
    ...((input as RosInput | undefined) ?? NO_INPUT),
    failing: 0,
    recovered: false,
    scans: 0,
    batches: 0,
    last_sync_at_ms: null,
    last_scan_at_ms: null,
    next_scan_at_ms: null,
    last_error: null,
    last_error_at_ms: null,
    cleanup: null,
    stopRequest: null,
  }),
  invoke: { id: "doorbell", src: "doorbell" },
  on: { "ROS.STOP": { actions: "recordStop" } },
  states: {
    recovering: {
      invoke: {
        id: "recover",
        src: "recover",
        onDone: [
          { guard: and(["rosStopAsked", "rosCleansUp"]), target: "stopping", actions: "recordScan" },
          { guard: "rosStopAsked", target: "stopped", actions: "recordScan" },
          { target: "idle", actions: "recordScan" },
        ],
        onError: [
          { guard: and(["rosStopAsked", "rosCleansUp"]), target: "stopping", actions: "recordFailure" },
          { guard: "rosStopAsked", target: "stopped", actions: "recordFailure" },
          { target: "recoverWait", actions: "recordFailure" },
        ],
      },
    },
    recoverWait: {
      always: [{ guard: and(["rosStopAsked", "rosCleansUp"]), target: "stopping" }, { guard: "rosStopAsked", target: "stopped" }],
      after: { retryDelay: "recovering" },
    },
    idle: {
      always: [{ guard: and(["rosStopAsked", "rosCleansUp"]), target: "stopping" }, { guard: "rosStopAsked", target: "stopped" }, { guard: "rosHasWork", target: "gathering" }],
      on: { "ROS.WORK": "gathering" },
      after: { reconcileInterval: { guard: "rosReconciles", target: "reconciling" } },
    },
    gathering: {
      always: [{ guard: and(["rosStopAsked", "rosCleansUp"]), target: "stopping" }, { guard: "rosStopAsked", target: "stopped" }],
      after: { batchInterval: "syncing" },
    },
    syncing: {
      invoke: {
        id: "sync",
        src: "sync",
        onDone: [
          { guard: and(["rosStopAsked", "rosCleansUp"]), target: "stopping", actions: "recordBatch" },
          { guard: "rosStopAsked", target: "stopped", actions: "recordBatch" },
          { guard: "rosBatchLeftRetries", target: "backoff", actions: "recordBatch" },
          { guard: "rosScanDue", target: "reconciling", actions: "recordBatch" },
          { guard: "rosHasWork", target: "gathering", actions: "recordBatch" },
          { target: "idle", actions: "recordBatch" },
        ],
        // Not expected (a batch reports its failures); the addresses it took stay in the backlog.
        onError: [
          { guard: and(["rosStopAsked", "rosCleansUp"]), target: "stopping", actions: "recordFailure" },
          { guard: "rosStopAsked", target: "stopped", actions: "recordFailure" },
          { target: "backoff", actions: "recordFailure" },
        ],
      },
    },
    backoff: {
      always: [{ guard: and(["rosStopAsked", "rosCleansUp"]), target: "stopping" }, { guard: "rosStopAsked", target: "stopped" }],
      after: { retryDelay: "syncing" },
    },
    reconciling: {
      invoke: {
        id: "reconcile",
        src: "reconcile",
        onDone: [
          { guard: and(["rosStopAsked", "rosCleansUp"]), target: "stopping", actions: "recordScan" },
          { guard: "rosStopAsked", target: "stopped", actions: "recordScan" },
          { target: "idle", actions: "recordScan" },
        ],
        onError: [
          { guard: and(["rosStopAsked", "rosCleansUp"]), target: "stopping", actions: "recordError" },
          { guard: "rosStopAsked", target: "stopped", actions: "recordError" },
          // The next scan is a reconcile interval away; a failed scan changes nothing it found.
          { target: "idle", actions: ["recordError", "postponeScan"] },
        ],
      },
    },
    stopping: {
      invoke: {
        id: "cleanup",
        src: "cleanup",
        onDone: { target: "stopped", actions: "recordCleanup" },
        onError: { target: "stopped", actions: "recordError" },
      },
    },
    // Not final: the actor lives until its plugin stops it; the answer tells the destroy it may go on.
    stopped: { entry: "answerStopped" },
  },
});
