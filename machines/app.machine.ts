// Application lifecycle: starting (API listener) → initializing (plugins) → serving ⇄ reloading →
// shutting_down | restarting → stopped. The reload status lives in the child actor `reload`,
// configuration saves in the child actor `config`.
// Work is done by invoked actors that actors/app.ts provides; this file has no I/O.

import { assign, enqueueActions, fromPromise, sendParent, sendTo, setup } from "xstate";
import { configMachine } from "./config.machine.js";
import { reloadMachine } from "./reload.machine.js";
import { runtimeMachine } from "./runtime.machine.js";

export interface AppContext {
  shutdownRequested: boolean;
  restartRequested: boolean;
  /** Why the process stopped, when it was not asked to. */
  error: string | null;
}

export type AppEvent =
  | { type: "SHUTDOWN" }
  | { type: "RESTART" }
  /** An operator asks for a reload; accepted while the app can still run one, passed to `reload`. */
  | { type: "RELOAD.REQUEST" }
  | { type: "RELOAD.PENDING" }
  /** A configuration generation is being built: its actor joins the system as runtime:<n>. */
  | { type: "RUNTIME.NEW"; generation: number; version: string }
  /** A generation is gone (destroyed, or failed to build). */
  | { type: "RUNTIME.REMOVE"; generation: number };

export interface ReloadOutcome {
  at: number;
  version: string;
}

/** What reloadRuntime rejects with: the reason and when it was decided (Unix ms). */
export class ReloadFailure extends Error {
  constructor(
    message: string,
    readonly at: number,
  ) {
    super(message);
    this.name = "ReloadFailure";
  }
}

export interface AppOutput {
  restart: boolean;
  error: string | null;
}

const errorText = (e: unknown): string => (e instanceof Error ? e.message : String(e));

export const appMachine = setup({
  types: {
    context: {} as AppContext,
    events: {} as AppEvent,
    output: {} as AppOutput,
  },
  actors: {
    // The reload actor tells its parent (this app) when a reload is waiting.
    reload: reloadMachine.provide({ actions: { askAppToReload: sendParent({ type: "RELOAD.PENDING" }) } }),
    runtime: runtimeMachine,
    // Serialises PUT /api/config; its `save` actor is provided by actors/app.actor.ts.
    config: configMachine,
    startApi: fromPromise<void>(() => Promise.resolve()),
    startRuntime: fromPromise<{ version: string }>(() => Promise.resolve({ version: "" })),
    reloadRuntime: fromPromise<ReloadOutcome>(() => Promise.resolve({ at: 0, version: "" })),
    stopRuntime: fromPromise<void, { restart: boolean }>(() => Promise.resolve()),
  },
  guards: {
    /** A stop asked for while starting or reloading is carried out once that work is done. */
    stopRequested: ({ context }) => context.shutdownRequested || context.restartRequested,
    restartRequested: ({ context }) => context.restartRequested,
  },
  actions: {
    spawnRuntime: enqueueActions(({ enqueue, event }) => {
      const e = event as Extract<AppEvent, { type: "RUNTIME.NEW" }>;
      const id = `runtime:${e.generation}`;
      enqueue.spawnChild("runtime", { id, systemId: id, input: { generation: e.generation, version: e.version } });
    }),
    removeRuntime: enqueueActions(({ enqueue, event }) => {
      enqueue.stopChild(`runtime:${(event as Extract<AppEvent, { type: "RUNTIME.REMOVE" }>).generation}`);
    }),
    requestShutdown: assign({ shutdownRequested: true }),
    requestRestart: assign({ restartRequested: true }),
    recordError: assign({ error: ({ event }) => errorText((event as { error?: unknown }).error) }),
    announceServing: sendTo("reload", { type: "APP.SERVING" }),
    forwardReloadRequest: sendTo("reload", { type: "RELOAD.REQUEST" }),
    reportRunningVersion: sendTo("reload", ({ event }) => ({
      type: "CONFIG.LOADED" as const,
      version: (event as unknown as { output: { version: string } }).output.version,
    })),
    reportReloadSucceeded: sendTo("reload", ({ event }) => {
      const out = (event as unknown as { output: ReloadOutcome }).output;
      return { type: "RELOAD.SUCCEEDED" as const, at: out.at, version: out.version };
    }),
    reportReloadFailed: sendTo("reload", ({ event }) => {
      const error = (event as { error?: unknown }).error;
      return { type: "RELOAD.FAILED" as const, at: error instanceof ReloadFailure ? error.at : 0, error: errorText(error) };
    }),
  },
}).createMachine({
  id: "app",
  initial: "starting",
  context: { shutdownRequested: false, restartRequested: false, error: null },
  invoke: [
    { id: "reload", systemId: "reload", src: "reload" },
    { id: "config", systemId: "config", src: "config" },
  ],
  on: {
    "RUNTIME.NEW": { actions: "spawnRuntime" },
    "RUNTIME.REMOVE": { actions: "removeRuntime" },
  },
  output: ({ context }) => ({ restart: context.restartRequested && context.error === null, error: context.error }),
  states: {
    starting: {
      invoke: { id: "startApi", src: "startApi", onDone: "initializing", onError: { target: "stopped", actions: "recordError" } },
      on: { SHUTDOWN: { actions: "requestShutdown" }, RESTART: { actions: "requestRestart" }, "RELOAD.REQUEST": { actions: "forwardReloadRequest" } },
    },
    initializing: {
      invoke: { id: "startRuntime", src: "startRuntime", onDone: { target: "serving", actions: "reportRunningVersion" }, onError: { target: "shutting_down", actions: "recordError" } },
      on: { SHUTDOWN: { actions: "requestShutdown" }, RESTART: { actions: "requestRestart" }, "RELOAD.REQUEST": { actions: "forwardReloadRequest" } },
    },
    serving: {
      entry: "announceServing",
      always: [
        { guard: "restartRequested", target: "restarting" },
        { guard: "stopRequested", target: "shutting_down" },
      ],
      on: {
        "RELOAD.PENDING": "reloading",
        "RELOAD.REQUEST": { actions: "forwardReloadRequest" },
        SHUTDOWN: { target: "shutting_down", actions: "requestShutdown" },
        RESTART: { target: "restarting", actions: "requestRestart" },
      },
    },
    reloading: {
      invoke: {
        id: "reloadRuntime",
        src: "reloadRuntime",
        onDone: { target: "serving", actions: "reportReloadSucceeded" },
        onError: { target: "serving", actions: "reportReloadFailed" },
      },
      on: { SHUTDOWN: { actions: "requestShutdown" }, RESTART: { actions: "requestRestart" }, "RELOAD.REQUEST": { actions: "forwardReloadRequest" } },
    },
    // Stopping: no reload can be requested any more (HTTP 503).
    shutting_down: {
      invoke: { id: "stopRuntime", src: "stopRuntime", input: { restart: false }, onDone: "stopped", onError: { target: "stopped", actions: "recordError" } },
    },
    restarting: {
      invoke: { id: "stopRuntime", src: "stopRuntime", input: { restart: true }, onDone: "stopped", onError: { target: "stopped", actions: "recordError" } },
    },
    stopped: { type: "final" },
  },
});
