// A cache's control plane (cache:<tag>): its start-up load, the API's operations, the periodic
// persist and sweep, and the final persist when its plugin is destroyed. The work is provided by
// the cache's control (src/plugins/executors/cache/control.ts); queries never wait on this actor.
//
//   starting ─▶ loading (dump_file: the concern declares `startup`) ─▶ running ─▶ stopping ─▶ stopped
//
// `running` has three regions: `ops` runs the API's flush, delete, dump and load one at a time;
// `saver` writes dump_file every persist interval when something changed (or is `off` without
// one); `sweeper` drops expired entries every sweep interval. An API operation is refused while
// another runs or a persist writes (guard cacheIdle → HTTP 409 cache_busy); a persist that falls
// due while an API operation runs is skipped to the next interval, so the two never interleave.
//
// CACHE.STOP (sent by the instance's destroy) waits for the operation or persist under way, then
// writes dump_file a last time and answers; the plugin's instance goes only after that answer.
// An unreadable or corrupt dump is logged by the load, which then reports 0 entries: the cache
// starts empty and start-up still reports started.

import { and, assign, emit, fromPromise, not, setup, stateIn } from "xstate";
import { doneAnswer, failedAnswer, reportStarted, type Answer, type Asked } from "./concern.js";

/** `from_peer`: a flush made on another instance of the cluster (that one already cleared the shared Redis level). */
/** `source`: the dump's bytes as they arrive (the request body, read only by the load itself). */
export type CacheOperation =
  | { type: "CACHE.FLUSH"; from_peer?: boolean }
  | { type: "CACHE.DELETE"; id: string }
  | { type: "CACHE.DUMP" }
  | { type: "CACHE.LOAD"; source: AsyncIterable<Uint8Array> };

export type CacheEvent = (CacheOperation & Asked) | ({ type: "CACHE.STOP" } & Asked);

/** What a written dump reports. */
export interface PersistDone {
  at_ms: number;
  entries: number;
}

export interface CacheInput {
  tag: string;
  /** A dump_file is set: loaded at start, written every persist interval (when changed) and at stop. */
  persistent: boolean;
  persistIntervalMs: number;
  sweepIntervalMs: number;
}

export interface CacheContext extends CacheInput {
  requestId: string | null;
  /** The API operation running now (its event type), for /api/actors. */
  operation: string | null;
  /** The CACHE.STOP waiting for its answer. */
  stopRequest: string | null;
  /** Entries the start-up load took from dump_file (null: none was read). */
  loaded_at_start: number | null;
  load_error: string | null;
  /** Entries the start-up took from the Redis level (null: none, or not configured). */
  loaded_from_redis: number | null;
  persists: number;
  last_persist_at_ms: number | null;
  last_persist_entries: number | null;
  last_persist_error: string | null;
}

/**
 * What the context starts from without input: xstate's pure transition() and initialTransition()
 * build an inert actor of the machine with no input, and an undefined delay would be taken at once
 * (the self-reentering sweep would then loop forever).
 */
const NO_INPUT: CacheInput = { tag: "", persistent: false, persistIntervalMs: 600_000, sweepIntervalMs: 30_000 };

const errorText = (e: unknown): string => (e instanceof Error ? e.message : String(e));
const outputOf = <T>(event: unknown): T => (event as { output: T }).output;

export const cacheMachine = setup({
  types: {
    context: {} as CacheContext,
    events: {} as CacheEvent,
    emitted: {} as Answer,
    input: {} as CacheInput,
  },
  actors: {
    /** Reads dump_file into the cache; resolves with the entries taken (0 after logging a bad file). */
    loadDump: fromPromise<number>(() => Promise.reject(new Error("not provided"))),
    /** Fills the cache from the Redis level in the background (null: not configured or unavailable). */
    loadShared: fromPromise<number | null>(() => Promise.resolve(null)),
    operate: fromPromise<unknown, CacheOperation>(() => Promise.reject(new Error("not provided"))),
    /** Writes dump_file (atomically). */
    persist: fromPromise<PersistDone>(() => Promise.reject(new Error("not provided"))),
  },
  guards: {
    persistent: ({ context }) => context.persistent,
    /** No API operation runs and no persist writes (HTTP 409 cache_busy). */
    cacheIdle: and([stateIn({ running: { ops: "idle" } }), not(stateIn({ running: { saver: "persisting" } }))]),
    cacheOpsIdle: stateIn({ running: { ops: "idle" } }),
    /** Past its start-up load and not stopping (HTTP 503 plugin_unavailable: the plugin is being made or replaced). */
    cacheRunning: stateIn("running"),
    /** The instance has changes that dump_file does not have yet (provided: the instance's count). */
    cacheChanged: () => false,
    stopAsked: ({ context }) => context.stopRequest !== null,
  },
  delays: {
    persistInterval: ({ context }) => context.persistIntervalMs,
    sweepInterval: ({ context }) => context.sweepIntervalMs,
  },
  actions: {
    start: assign({ requestId: ({ event }) => event.requestId, operation: ({ event }) => event.type }),
    answerDone: emit(({ context, event }) => doneAnswer(context.requestId, event)),
    answerFailed: emit(({ context, event }) => failedAnswer(context.requestId, event)),
    reportStarted: reportStarted<CacheContext, CacheEvent>(),
    recordLoaded: assign({ loaded_at_start: ({ event }) => outputOf<number>(event) }),
    recordLoadError: assign({ load_error: ({ event }) => errorText((event as { error?: unknown }).error) }),
    recordShared: assign({ loaded_from_redis: ({ event }) => outputOf<number | null>(event) }),
    recordPersist: assign(({ context, event }) => {
      const done = outputOf<PersistDone>(event);
      return { persists: context.persists + 1, last_persist_at_ms: done.at_ms, last_persist_entries: done.entries, last_persist_error: null };
    }),
    recordPersistError: assign({ last_persist_error: ({ event }) => errorText((event as { error?: unknown }).error) }),
    recordStop: assign({ stopRequest: ({ event }) => event.requestId }),
    answerStopped: emit(({ context }): Answer => ({ type: "answer", requestId: context.stopRequest ?? "", ok: true, output: null })),
    /** Drops expired entries (provided: the instance's sweep). */
    sweep: () => undefined,
  },
}).createMachine({
  id: "cache",
  initial: "starting",
  context: ({ input }) => ({
    ...((input as CacheInput | undefined) ?? NO_INPUT),
    requestId: null,
    operation: null,
    stopRequest: null,
    loaded_at_start: null,
    load_error: null,
    loaded_from_redis: null,
    persists: 0,
    last_persist_at_ms: null,
    last_persist_entries: null,
    last_persist_error: null,
  }),
  // The API's operations, answered in every state: taken only while running with nothing else under way.
  on: {
    "CACHE.FLUSH": { guard: and(["cacheRunning", "cacheIdle"]), target: ".running.ops.working", actions: "start" },
    "CACHE.DELETE": { guard: and(["cacheRunning", "cacheIdle"]), target: ".running.ops.working", actions: "start" },
    "CACHE.DUMP": { guard: and(["cacheRunning", "cacheIdle"]), target: ".running.ops.working", actions: "start" },
    "CACHE.LOAD": { guard: and(["cacheRunning", "cacheIdle"]), target: ".running.ops.working", actions: "start" },
  },
  states: {
    starting: { always: [{ guard: "persistent", target: "loading" }, { target: "running" }] },
    // The plugin (and the runtime's next plugin) is ready once the dump is in.
    loading: {
      invoke: {
        id: "loadDump",
        src: "loadDump",
        onDone: { target: "running", actions: ["recordLoaded", "reportStarted"] },
        onError: { target: "running", actions: ["recordLoadError", "reportStarted"] },
      },
      // Destroyed before its dump was read: the load is cancelled and nothing is written back.
      on: { "CACHE.STOP": { target: "stopped", actions: "recordStop" } },
    },
    running: {
      type: "parallel",
      // In the background: a slow or unreachable Redis must not hold up the start.
      invoke: { id: "loadShared", src: "loadShared", onDone: { actions: "recordShared" } },
      on: { "CACHE.STOP": { actions: "recordStop" } },
      // A stop waits until no operation or persist runs.
      always: [
        { guard: and(["stopAsked", "cacheIdle", "persistent"]), target: "stopping" },
        { guard: and(["stopAsked", "cacheIdle"]), target: "stopped" },
      ],
      states: {
        ops: {
          initial: "idle",
          states: {
            idle: { entry: assign({ requestId: null, operation: null }) },
            working: {
              invoke: {
                id: "operate",
                src: "operate",
                // The operation (a dump's byte stream included) travels as input only, never into context.
                input: ({ event }) => {
                  const { requestId: _id, ...op } = event as CacheOperation & Asked;
                  return op;
                },
                onDone: { target: "idle", actions: "answerDone" },
                onError: { target: "idle", actions: "answerFailed" },
              },
            },
          },
        },
        saver: {
          initial: "waiting",
          states: {
            waiting: {
              always: { guard: not("persistent"), target: "off" },
              after: {
                persistInterval: [
                  { guard: and(["cacheChanged", "cacheOpsIdle"]), target: "persisting" },
                  { target: "waiting", reenter: true },
                ],
              },
            },
            persisting: {
              invoke: { id: "persist", src: "persist", onDone: { target: "waiting", actions: "recordPersist" }, onError: { target: "waiting", actions: "recordPersistError" } },
            },
            off: {},
          },
        },
        sweeper: {
          initial: "waiting",
          states: { waiting: { after: { sweepInterval: { target: "waiting", reenter: true, actions: "sweep" } } } },
        },
      },
    },
    // The last write of dump_file; the instance is destroyed after the answer.
    stopping: {
      invoke: { id: "persist", src: "persist", onDone: { target: "stopped", actions: "recordPersist" }, onError: { target: "stopped", actions: "recordPersistError" } },
    },
    // Not final: the actor lives until its plugin stops it, refusing operations.
    stopped: { entry: "answerStopped" },
  },
});
