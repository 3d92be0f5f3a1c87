// A replica following its primary's configuration (`sluice start --config-from URL`): every
// interval it reads the primary's GET /api/config; a version it has not handled yet is applied
// (validated and saved through the config actor, then reloaded through the app actor) or refused
// when it does not validate, and then not tried again until the primary's version changes. An
// unreachable primary or a busy save is retried at the next poll. After a save the follower waits
// in `reloading` for the reload it asked for to end (a reload already running ends first), so the
// next poll never overlaps it. The replica keeps serving the last good configuration throughout.
// It is the app actor's child `config-follow`; actors/app.actor.ts provides `fetch`, `apply`
// (the save) and `reload`.

import { assign, fromPromise, setup } from "xstate";

/** The primary's configuration as GET /api/config returned it (its version checked against the text). */
export interface Fetched {
  version: string;
  content: string;
}

/** What applying one version came to: saved (a reload follows), refused (invalid), or not now (busy). */
export type ApplyResult = { outcome: "applied" } | { outcome: "refused"; error: string } | { outcome: "busy"; error: string };

export interface FollowContext {
  /** The primary's URL without credentials. */
  source: string;
  interval_ms: number;
  /** Unix ms now (injected). */
  clock: () => number;
  /** The primary's version last handled (applied or refused); a poll that finds it again does nothing. */
  version: string | null;
  applied_version: string | null;
  refused_version: string | null;
  last_poll_ms: number | null;
  last_applied_ms: number | null;
  /** Why the last poll or apply did not succeed (unreachable, refused, busy); null after a success. */
  last_error: string | null;
  polls: number;
}

export interface FollowInput {
  source: string;
  interval_ms: number;
  clock: () => number;
  /** The version pulled (or refused) at start, if the primary answered. */
  version: string | null;
  applied: boolean;
  error: string | null;
}

const errorText = (e: unknown): string => (e instanceof Error ? e.message : String(e));
const output = <T>(event: unknown): T => (event as { output: T }).output;

export const configFollowMachine = setup({
  types: {
    context: {} as FollowContext,
    input: {} as FollowInput,
  },
  actors: {
    fetch: fromPromise<Fetched>(() => Promise.reject(new Error("not provided"))),
    apply: fromPromise<ApplyResult, Fetched>(() => Promise.reject(new Error("not provided"))),
    /** Asks the app for a reload once none is pending or running, and ends when that reload ends. */
    reload: fromPromise<void>(() => Promise.reject(new Error("not provided"))),
  },
  delays: {
    pollInterval: ({ context }) => context.interval_ms,
  },
  guards: {
    /** The primary still has the version last handled. */
    unchanged: ({ context, event }) => output<Fetched>(event).version === context.version,
    wasApplied: ({ event }) => output<ApplyResult>(event).outcome === "applied",
    wasRefused: ({ event }) => output<ApplyResult>(event).outcome === "refused",
  },
  actions: {
    recordPoll: assign({
      polls: ({ context }) => context.polls + 1,
      last_poll_ms: ({ context }) => context.clock(),
    }),
    recordUnchanged: assign({ last_error: ({ context }) => (context.version === context.refused_version ? context.last_error : null) }),
    recordUnreachable: assign({ last_error: ({ event }) => `the primary could not be read: ${errorText((event as { error?: unknown }).error)}` }),
    recordRefused: assign({ last_error: ({ event }) => (output<ApplyResult>(event) as { error: string }).error }),
    recordBusy: assign({ last_error: ({ event }) => (output<ApplyResult>(event) as { error: string }).error }),
    recordFailure: assign({ last_error: ({ event }) => `applying the primary's configuration failed: ${errorText((event as { error?: unknown }).error)}` }),
    recordReloadFailure: assign({ last_error: ({ event }) => `the reload of the primary's configuration could not be asked for: ${errorText((event as { error?: unknown }).error)}` }),
    /** Marks the version being applied as handled (before its outcome: a refused one is not retried). */
    handling: assign({ version: ({ event }) => output<Fetched>(event).version }),
    setApplied: assign({ applied_version: ({ context }) => context.version, last_applied_ms: ({ context }) => context.clock(), last_error: null }),
    setRefused: assign({ refused_version: ({ context }) => context.version }),
    /** Tells the app the configuration was refused (reload status); provided by the App. */
    reportRefused: (_args, _params: { error: string; version: string | null }) => {},
    /** The version stays unhandled, so the next poll tries it again. */
    forget: assign({ version: ({ context }) => context.applied_version }),
  },
}).createMachine({
  id: "follow",
  initial: "waiting",
  context: ({ input }) => ({
    source: input.source,
    interval_ms: input.interval_ms,
    clock: input.clock,
    version: input.version,
    applied_version: input.applied ? input.version : null,
    refused_version: input.applied ? null : input.version,
    last_poll_ms: input.version === null ? null : input.clock(),
    last_applied_ms: input.applied ? input.clock() : null,
    last_error: input.error,
    polls: input.version === null ? 0 : 1,
  }),
  states: {
    waiting: { after: { pollInterval: "polling" } },
    polling: {
      invoke: {
        id: "fetch",
        src: "fetch",
        onDone: [
          { guard: "unchanged", target: "waiting", actions: ["recordPoll", "recordUnchanged"] },
          { target: "applying", actions: ["recordPoll", "handling"] },
        ],
        onError: { target: "waiting", actions: ["recordPoll", "recordUnreachable"] },
      },
    },
    applying: {
      invoke: {
        id: "apply",
        src: "apply",
        // The configuration text travels as input only, never into context.
        input: ({ event }) => output<Fetched>(event),
        onDone: [
          { guard: "wasApplied", target: "reloading", actions: "setApplied" },
          {
            guard: "wasRefused",
            target: "waiting",
            actions: [
              "setRefused",
              "recordRefused",
              { type: "reportRefused", params: ({ context, event }) => ({ error: (output<ApplyResult>(event) as { error: string }).error, version: context.version }) },
            ],
          },
          { target: "waiting", actions: ["recordBusy", "forget"] },
        ],
        onError: { target: "waiting", actions: ["recordFailure", "forget"] },
      },
    },
    // The saved version is on disk; the reload status (not this actor) says how its reload went.
    reloading: {
      invoke: { id: "reload", src: "reload", onDone: "waiting", onError: { target: "waiting", actions: "recordReloadFailure" } },
    },
  },
});

