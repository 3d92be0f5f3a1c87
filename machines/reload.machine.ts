// Reload status (spec: Reload). A request is accepted only while no reload is pending or running;
// the app picks a pending reload up when it is serving. Timestamps arrive in events (Unix ms).

import { assign, not, or, setup, stateIn } from "xstate";

/** The record's `status`, `pending` and `in_progress` come from the state value, not from here. */
export interface ReloadContext {
  last_started_ms: number | null;
  last_completed_ms: number | null;
  last_success_ms: number | null;
  last_error: string | null;
  /** sha256 of the configuration the process runs. */
  running_version: string | null;
  /** sha256 of the file when the latest reload started. */
  target_version: string | null;
}

export type ReloadEvent =
  | { type: "RELOAD.REQUEST" }
  | { type: "APP.SERVING" }
  | { type: "RELOAD.START"; at: number; version: string | null }
  | { type: "RELOAD.SUCCEEDED"; at: number; version: string }
  | { type: "RELOAD.FAILED"; at: number; error: string }
  /** The configuration the process started with (not a reload). */
  | { type: "CONFIG.LOADED"; version: string };

export const reloadMachine = setup({
  types: {
    context: {} as ReloadContext,
    events: {} as ReloadEvent,
  },
  guards: {
    /** A second request while one is pending or running is refused (HTTP 409), never queued. */
    reloadIdle: not(or([stateIn("pending"), stateIn("in_progress")])),
  },
  actions: {
    clearError: assign({ last_error: null }),
    recordRunningVersion: assign({ running_version: ({ event }) => (event as Extract<ReloadEvent, { type: "CONFIG.LOADED" }>).version }),
    /** Tells whoever runs reloads that one is waiting; the app machine provides it (sendParent). */
    askAppToReload: () => {},
    markStarted: assign(({ event }) => {
      const e = event as Extract<ReloadEvent, { type: "RELOAD.START" }>;
      return { last_started_ms: e.at, target_version: e.version, last_error: null };
    }),
    markSucceeded: assign(({ event }) => {
      const e = event as Extract<ReloadEvent, { type: "RELOAD.SUCCEEDED" }>;
      return { last_completed_ms: e.at, last_success_ms: e.at, running_version: e.version };
    }),
    markFailed: assign(({ event }) => {
      const e = event as Extract<ReloadEvent, { type: "RELOAD.FAILED" }>;
      return { last_completed_ms: e.at, last_error: e.error };
    }),
  },
}).createMachine({
  id: "reload",
  initial: "idle",
  context: {
    last_started_ms: null,
    last_completed_ms: null,
    last_success_ms: null,
    last_error: null,
    running_version: null,
    target_version: null,
  },
  on: {
    "RELOAD.REQUEST": { guard: "reloadIdle", target: ".pending", actions: "clearError" },
    "CONFIG.LOADED": { actions: "recordRunningVersion" },
  },
  states: {
    idle: {},
    ok: {},
    failed: {},
    pending: {
      entry: "askAppToReload",
      on: {
        "APP.SERVING": { actions: "askAppToReload" },
        "RELOAD.START": { target: "in_progress", actions: "markStarted" },
      },
    },
    in_progress: {
      on: {
        "RELOAD.SUCCEEDED": { target: "ok", actions: "markSucceeded" },
        "RELOAD.FAILED": { target: "failed", actions: "markFailed" },
      },
    },
  },
});
