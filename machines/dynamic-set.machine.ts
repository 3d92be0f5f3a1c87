// A dynamic_domain_set's control plane (dynamic-set:<tag>): its start-up load of the rule file, the
// API's changes (add, remove, clear, reload from the file) one at a time, the periodic write of the
// file when something changed, the periodic sweep of expired rules, and the last write when its
// plugin is destroyed. The work is provided by src/plugins/providers/dynamic-domain-set/control.ts;
// queries never wait on this actor, and `learn_domain` never sends it anything: a learned name is an
// in-memory insert that bumps a change counter, which the saver's timer reads (guard dynamicSetChanged).
//
//   loading (the concern declares `startup`) ─▶ running ─▶ stopping ─▶ stopped
//
// `running` has three regions: `ops` runs one API change at a time (another one meanwhile is refused:
// HTTP 409 dynamic_set_busy; an add that would pass max_entries: 507 dynamic_set_full); `saver` writes
// the file every flush interval when it changed; `sweeper` drops expired rules every cleanup interval.
// Writes and reads of the file are serialised by the store's own lock, so a write that falls due
// during a reload waits for it instead of being refused or skipped.

import { and, assign, emit, enqueueActions, fromPromise, setup, stateIn } from "xstate";
import { doneAnswer, failedAnswer, reportStarted, reportStartFailed, type Answer, type Asked } from "./concern.js";

/** One rule to add, in canonical form (`full:a.example`), and how long it lives (null: until removed). */
export interface RuleChange {
  rule: string;
  ttl_ms: number | null;
}

/** `at`: when the change was asked (Unix ms on the set's clock); expiries count from it. */
export type DynamicSetOperation =
  | { type: "DYNSET.ADD"; rules: RuleChange[]; at: number }
  | { type: "DYNSET.REMOVE"; rules: string[] }
  | { type: "DYNSET.CLEAR" }
  | { type: "PROVIDER.RELOAD" };

export type DynamicSetEvent = (DynamicSetOperation & Asked) | ({ type: "DYNSET.STOP" } & Asked);

/** What a write of the file reports. */
export interface DynamicSetPersisted {
  at_ms: number;
  rules: number;
}

export interface DynamicSetInput {
  tag: string;
  flushIntervalMs: number;
  cleanupIntervalMs: number;
}

export interface DynamicSetContext extends DynamicSetInput {
  requestId: string | null;
  /** The API change running now (its event type), for /api/actors and reload/status. */
  operation: string | null;
  stopRequest: string | null;
  /** Rules the start-up found (file or bootstrap rules, or the live rules a reload handed over). */
  loaded_rules: number | null;
  load_error: string | null;
  persists: number;
  last_persist_at_ms: number | null;
  last_persist_error: string | null;
  /** Rules the sweeps removed because they expired. */
  expired: number;
  /** Reloads from the file (POST reload, reload_provider), as every provider's reload/status shows them. */
  reloads: number;
  failures: number;
  last_error: string | null;
  /** Always null: the instance counts its rules (reload/status reads the view first). */
  rules: null;
}

/** Without input (xstate's pure transition() builds the machine bare), delays must still be finite and not 0. */
const NO_INPUT: DynamicSetInput = { tag: "", flushIntervalMs: 1000, cleanupIntervalMs: 60_000 };

const errorText = (e: unknown): string => (e instanceof Error ? e.message : String(e));
const outputOf = <T>(event: unknown): T => (event as { output: T }).output;

export const dynamicSetMachine = setup({
  types: {
    context: {} as DynamicSetContext,
    events: {} as DynamicSetEvent,
    emitted: {} as Answer,
    input: {} as DynamicSetInput,
  },
  actors: {
    /** Reads the rule file into the store (or writes bootstrap_rules when there is none); resolves with the rule count. */
    load: fromPromise<number>(() => Promise.reject(new Error("not provided"))),
    operate: fromPromise<unknown, DynamicSetOperation>(() => Promise.reject(new Error("not provided"))),
    /** Writes the file atomically. */
    persist: fromPromise<DynamicSetPersisted>(() => Promise.reject(new Error("not provided"))),
    /** Removes expired rules; resolves with how many. */
    sweep: fromPromise<number>(() => Promise.resolve(0)),
  },
  guards: {
    /** Past its start-up load and not stopping (HTTP 503 plugin_unavailable: the plugin is being made or replaced). */
    dynamicSetRunning: stateIn("running"),
    /** No other API change runs (HTTP 409 dynamic_set_busy). */
    dynamicSetIdle: stateIn({ running: { ops: "idle" } }),
    /** The rules added fit under max_entries (provided: the instance counts; HTTP 507 dynamic_set_full). */
    dynamicSetHasRoom: () => true,
    /** The rules changed since the file was last written (provided: the store's change counter). */
    dynamicSetChanged: () => false,
    dynamicSetStopAsked: ({ context }) => context.stopRequest !== null,
    dynamicSetSaverIdle: stateIn({ running: { saver: "waiting" } }),
  },
  delays: {
    flushInterval: ({ context }) => context.flushIntervalMs,
    cleanupInterval: ({ context }) => context.cleanupIntervalMs,
  },
  actions: {
    start: assign({ requestId: ({ event }) => event.requestId, operation: ({ event }) => event.type }),
    answerDone: emit(({ context, event }) => doneAnswer(context.requestId, event)),
    answerFailed: emit(({ context, event }) => failedAnswer(context.requestId, event)),
    recordOperated: assign(({ context }) => (context.operation === "PROVIDER.RELOAD" ? { reloads: context.reloads + 1, last_error: null } : {})),
    recordOperationFailed: assign(({ context, event }) =>
      context.operation === "PROVIDER.RELOAD" ? { failures: context.failures + 1, last_error: errorText((event as { error?: unknown }).error) } : {},
    ),
    reportStarted: reportStarted<DynamicSetContext, DynamicSetEvent>(),
    reportStartFailed: reportStartFailed<DynamicSetContext, DynamicSetEvent>(),
    recordLoaded: assign({ loaded_rules: ({ event }) => outputOf<number>(event) }),
    recordLoadError: assign({ load_error: ({ event }) => errorText((event as { error?: unknown }).error) }),
    recordPersist: assign(({ context, event }) => {
      const done = outputOf<DynamicSetPersisted>(event);
      return { persists: context.persists + 1, last_persist_at_ms: done.at_ms, last_persist_error: null };
    }),
    recordPersistError: assign({ last_persist_error: ({ event }) => errorText((event as { error?: unknown }).error) }),
    recordSweep: assign(({ context, event }) => ({ expired: context.expired + outputOf<number>(event) })),
    recordStop: assign({ stopRequest: ({ event }) => event.requestId }),
    answerStopped: enqueueActions(({ context, enqueue }) => {
      if (context.stopRequest !== null) enqueue.emit({ type: "answer", requestId: context.stopRequest, ok: true, output: null } satisfies Answer);
    }),
  },
}).createMachine({
  id: "dynamicSet",
  initial: "loading",
  context: ({ input }) => ({
    ...((input as DynamicSetInput | undefined) ?? NO_INPUT),
    requestId: null,
    operation: null,
    stopRequest: null,
    loaded_rules: null,
    load_error: null,
    persists: 0,
    last_persist_at_ms: null,
    last_persist_error: null,
    expired: 0,
    reloads: 0,
    failures: 0,
    last_error: null,
    rules: null,
  }),
  // The API's changes, answered in every state: taken only while running with no other change under way.
  on: {
    "DYNSET.ADD": { guard: and(["dynamicSetRunning", "dynamicSetIdle", "dynamicSetHasRoom"]), target: ".running.ops.working", actions: "start" },
    "DYNSET.REMOVE": { guard: and(["dynamicSetRunning", "dynamicSetIdle"]), target: ".running.ops.working", actions: "start" },
    "DYNSET.CLEAR": { guard: and(["dynamicSetRunning", "dynamicSetIdle"]), target: ".running.ops.working", actions: "start" },
    "PROVIDER.RELOAD": { guard: and(["dynamicSetRunning", "dynamicSetIdle"]), target: ".running.ops.working", actions: "start" },
  },
  states: {
    // The plugin (and the runtime's next plugin) is ready once the file is in: the first query sees its rules.
    loading: {
      invoke: {
        id: "load",
        src: "load",
        onDone: { target: "running", actions: ["recordLoaded", "reportStarted"] },
        onError: { target: "stopped", actions: ["recordLoadError", "reportStartFailed"] },
      },
      // Destroyed before its file was read: nothing is written back.
      on: { "DYNSET.STOP": { target: "stopped", actions: "recordStop" } },
    },
    running: {
      type: "parallel",
      on: { "DYNSET.STOP": { actions: "recordStop" } },
      // A stop waits until no change runs and no write is under way, then writes a last time.
      always: { guard: and(["dynamicSetStopAsked", "dynamicSetIdle", "dynamicSetSaverIdle"]), target: "stopping" },
      states: {
        ops: {
          initial: "idle",
          states: {
            idle: { entry: assign({ requestId: null, operation: null }) },
            working: {
              invoke: {
                id: "operate",
                src: "operate",
                input: ({ event }) => {
                  const { requestId: _id, ...op } = event as DynamicSetOperation & Asked;
                  return op;
                },
                onDone: { target: "idle", actions: ["recordOperated", "answerDone"] },
                onError: { target: "idle", actions: ["recordOperationFailed", "answerFailed"] },
              },
            },
          },
        },
        saver: {
          initial: "waiting",
          states: {
            waiting: {
              after: {
                flushInterval: [{ guard: "dynamicSetChanged", target: "persisting" }, { target: "waiting", reenter: true }],
              },
            },
            persisting: {
              invoke: { id: "persist", src: "persist", onDone: { target: "waiting", actions: "recordPersist" }, onError: { target: "waiting", actions: "recordPersistError" } },
            },
          },
        },
        sweeper: {
          initial: "waiting",
          states: {
            waiting: { after: { cleanupInterval: "sweeping" } },
            sweeping: { invoke: { id: "sweep", src: "sweep", onDone: { target: "waiting", actions: "recordSweep" }, onError: "waiting" } },
          },
        },
      },
    },
    // The last write of the file; the instance lets go of its store after the answer.
    stopping: {
      invoke: { id: "persist", src: "persist", onDone: { target: "stopped", actions: "recordPersist" }, onError: { target: "stopped", actions: "recordPersistError" } },
    },
    // Not final: the actor lives until its plugin stops it, refusing changes.
    stopped: {
      entry: "answerStopped",
      on: { "DYNSET.STOP": { actions: ["recordStop", "answerStopped"] } },
    },
  },
});
