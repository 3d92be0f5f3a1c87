// Application lifecycle and reload status in one machine (configuration saves are its child
// actor `config`, machines/config.machine.ts; the self-upgrade task its child `upgrade`,
// machines/upgrade.machine.ts, which asks for a RESTART once a new release is switched in; on a
// replica, the follower of its primary's configuration, machines/config-follow.machine.ts, is its
// child `config-follow` from the first generation's activation until the app stops):
//   running: starting (API) → initializing (first generation) → serving ⇄ reloading
//   shutting_down | restarting: retire every generation, then close the listeners → stopped
// Each configuration generation is a child actor runtime:<n> (machines/runtime.machine.ts) that
// reports READY / FAILED / GONE. A stop asked for while starting or reloading is carried out once
// that work is done; a second stop request is refused. Work is done by invoked actors that
// actors/app.actor.ts provides; this file has no I/O.

import { and, assign, enqueueActions, fromPromise, setup } from "xstate";
import { configFollowMachine, type FollowInput } from "./config-follow.machine.js";
import { configMachine } from "./config.machine.js";
import { validationMachine, VALIDATION_MAX_WAITING } from "./validation.machine.js";
import { runtimeMachine, type RuntimeHost, type RuntimeReport } from "./runtime.machine.js";
import { upgradeMachine, type RestoredUpgrade, type UpgradeTrial } from "./upgrade.machine.js";

export type ReloadState = "idle" | "pending" | "in_progress" | "ok" | "failed";

/** The reload status record (spec: GET /api/reload/status) without its derived booleans. */
export interface ReloadStatus {
  status: ReloadState;
  last_started_ms: number | null;
  last_completed_ms: number | null;
  last_success_ms: number | null;
  last_error: string | null;
  /** sha256 of the configuration the process runs. */
  running_version: string | null;
  /** sha256 of the file read by the latest reload (null until it was read). */
  target_version: string | null;
}

export interface AppContext {
  /** Unix ms now (injected so tests can drive time). */
  clock: () => number;
  /** Renders an error (with file:line:column diagnostics) for the reload status and the log. */
  describe: (error: unknown) => string;
  shutdownRequested: boolean;
  restartRequested: boolean;
  /** Why the process stopped, when it was not asked to. */
  error: string | null;
  reload: ReloadStatus;
  /** Generations made so far; the next one is generations + 1. */
  generations: number;
  /** The generation that answers queries. */
  current: number | null;
  /** The generation being built, and the version of its configuration. */
  building: { generation: number; version: string } | null;
  /** Runtime actors still alive (building, active or draining). */
  live: number[];
  /** The running version, the last upgrade's recorded outcome and a trial in progress, for the `upgrade` actor. */
  upgradeInput: UpgradeInput;
  /** A replica (--config-from): what its follower starts from; null otherwise. */
  followInput: FollowInput | null;
}

export interface UpgradeInput {
  version: string;
  restored: RestoredUpgrade | null;
  /** This start is the new release's trial (the pending marker said so). */
  trial: UpgradeTrial | null;
}

export interface AppInput {
  clock: () => number;
  describe: (error: unknown) => string;
  upgradeInput?: UpgradeInput;
  followInput?: FollowInput | null;
}

/** A configuration that was never written because it did not validate (a replica's pull from its primary). */
export type ReloadRefused = { type: "RELOAD.REFUSED"; error: string; version: string | null };

export type AppEvent = { type: "SHUTDOWN" } | { type: "RESTART" } | { type: "RELOAD.REQUEST" } | ReloadRefused | RuntimeReport;

/** A configuration read and checked, ready to be built as generation `generation`. */
export interface Prepared {
  version: string;
  host: RuntimeHost;
}

export interface PrepareInput {
  generation: number;
  /** The configuration the process was started with (already checked) rather than the file now. */
  initial: boolean;
}

export interface AppOutput {
  restart: boolean;
  error: string | null;
}

const notProvided = (): Promise<never> => Promise.reject(new Error("not provided"));

const stopping = (restart: boolean) => ({
  entry: ["stopFollower", "retireAll"] as const,
  initial: "draining" as const,
  states: {
    draining: { always: { guard: "noRuntimes" as const, target: "closing" as const } },
    closing: {
      invoke: {
        id: "stopServices",
        src: "stopServices" as const,
        input: { restart },
        onDone: "#app.stopped",
        onError: { target: "#app.stopped", actions: "recordError" as const },
      },
    },
  },
});

export const appMachine = setup({
  types: {
    context: {} as AppContext,
    events: {} as AppEvent,
    input: {} as AppInput,
    output: {} as AppOutput,
  },
  actors: {
    runtime: runtimeMachine,
    // Serialises PUT /api/config; its `save` actor is provided by actors/app.actor.ts.
    config: configMachine,
    // Runs configuration validations one at a time (API and saves); its `validate` actor is provided by actors/app.actor.ts.
    validation: validationMachine,
    // The self-upgrade task; its `apply` actor and restart request are provided by actors/app.actor.ts.
    upgrade: upgradeMachine,
    // A replica's follower; its `fetch`, `apply` and `reload` actors are provided by actors/app.actor.ts.
    follow: configFollowMachine,
    startApi: fromPromise<void>(notProvided),
    prepare: fromPromise<Prepared, PrepareInput>(notProvided),
    stopServices: fromPromise<void, { restart: boolean }>(notProvided),
  },
  guards: {
    /** No shutdown or restart has been asked for (a second one is refused: HTTP 409). */
    noStopRequested: ({ context }) => !context.shutdownRequested && !context.restartRequested,
    /** The application can still run a reload (HTTP 503 when stopping). */
    notStopping: ({ context }) => !context.shutdownRequested && !context.restartRequested,
    /** A second reload while one is pending or running is refused (HTTP 409), never queued. */
    reloadIdle: ({ context }) => context.reload.status !== "pending" && context.reload.status !== "in_progress",
    stopRequested: ({ context }) => context.shutdownRequested || context.restartRequested,
    restartRequested: ({ context }) => context.restartRequested,
    reloadPending: ({ context }) => context.reload.status === "pending",
    isBuilding: ({ context, event }) => context.building?.generation === (event as RuntimeReport).generation,
    noRuntimes: ({ context }) => context.live.length === 0,
  },
  actions: {
    requestShutdown: assign({ shutdownRequested: true }),
    requestRestart: assign({ restartRequested: true }),
    recordError: assign({ error: ({ context, event }) => context.describe((event as { error?: unknown }).error) }),
    /** Told to the App, which keeps the error object for the CLI (provided by actors/app.actor.ts). */
    reportStartupFailure: () => {},
    /** The App points queries at generation `current` (provided by actors/app.actor.ts). */
    activate: () => {},
    buildGeneration: enqueueActions(({ enqueue, context, event }) => {
      const prepared = (event as unknown as { output: Prepared }).output;
      const generation = context.generations + 1;
      enqueue.assign({ generations: generation, building: { generation, version: prepared.version }, live: [...context.live, generation] });
      enqueue.spawnChild("runtime", { id: `runtime:${generation}`, systemId: `runtime:${generation}`, input: { generation, version: prepared.version, host: prepared.host } });
    }),
    swapGeneration: enqueueActions(({ enqueue, context }) => {
      const next = context.building;
      if (!next) return;
      if (context.current !== null) enqueue.sendTo(`runtime:${context.current}`, { type: "RUNTIME.RETIRE" });
      enqueue.assign({ current: next.generation, building: null, reload: { ...context.reload, running_version: next.version } });
    }),
    dropBuilding: assign({ building: null }),
    /** A replica starts following its primary once it serves (the pull before start already ran). */
    startFollower: enqueueActions(({ enqueue, context }) => {
      if (context.followInput) enqueue.spawnChild("follow", { id: "config-follow", systemId: "config-follow", input: context.followInput });
    }),
    stopFollower: enqueueActions(({ enqueue }) => enqueue.stopChild("config-follow")),
    retireAll: enqueueActions(({ enqueue, context }) => {
      for (const g of context.live) enqueue.sendTo(`runtime:${g}`, { type: "RUNTIME.RETIRE" });
    }),
    removeRuntime: enqueueActions(({ enqueue, context, event }) => {
      const g = (event as Extract<RuntimeReport, { type: "RUNTIME.GONE" }>).generation;
      enqueue.stopChild(`runtime:${g}`);
      enqueue.assign({ live: context.live.filter((x) => x !== g), current: context.current === g ? null : context.current });
    }),
    markReloadPending: assign({ reload: ({ context }) => ({ ...context.reload, status: "pending" as const, last_error: null }) }),
    markReloadStarted: assign({ reload: ({ context }) => ({ ...context.reload, status: "in_progress" as const, last_started_ms: context.clock(), target_version: null }) }),
    recordTarget: assign({ reload: ({ context, event }) => ({ ...context.reload, target_version: (event as unknown as { output: Prepared }).output.version }) }),
    markReloadSucceeded: assign({
      reload: ({ context }) => {
        const at = context.clock();
        return { ...context.reload, status: "ok" as const, last_completed_ms: at, last_success_ms: at };
      },
    }),
    /** The reload status shows a refused configuration like a failed reload: the running one is unchanged. */
    markReloadRefused: assign({
      reload: ({ context, event }) => {
        const e = event as ReloadRefused;
        return { ...context.reload, status: "failed" as const, last_completed_ms: context.clock(), last_error: e.error, target_version: e.version };
      },
    }),
    markReloadFailed: assign({
      reload: ({ context, event }) => ({ ...context.reload, status: "failed" as const, last_completed_ms: context.clock(), last_error: context.describe((event as { error?: unknown }).error) }),
    }),
  },
}).createMachine({
  id: "app",
  initial: "running",
  context: ({ input }) => ({
    ...input,
    upgradeInput: input.upgradeInput ?? { version: "0.0.0", restored: null, trial: null },
    followInput: input.followInput ?? null,
    shutdownRequested: false,
    restartRequested: false,
    error: null,
    reload: { status: "idle", last_started_ms: null, last_completed_ms: null, last_success_ms: null, last_error: null, running_version: null, target_version: null },
    generations: 0,
    current: null,
    building: null,
    live: [],
  }),
  output: ({ context }) => ({ restart: context.restartRequested && context.error === null, error: context.error }),
  invoke: [
    { id: "config", systemId: "config", src: "config" },
    { id: "validation", systemId: "validation", src: "validation", input: { maxWaiting: VALIDATION_MAX_WAITING } },
    { id: "upgrade", systemId: "upgrade", src: "upgrade", input: ({ context }) => ({ clock: context.clock, ...context.upgradeInput }) },
  ],
  on: {
    SHUTDOWN: { guard: "noStopRequested", actions: "requestShutdown" },
    RESTART: { guard: "noStopRequested", actions: "requestRestart" },
    "RELOAD.REQUEST": { guard: and(["notStopping", "reloadIdle"]), actions: "markReloadPending" },
    "RELOAD.REFUSED": { guard: and(["notStopping", "reloadIdle"]), actions: "markReloadRefused" },
    "RUNTIME.GONE": { actions: "removeRuntime" },
  },
  states: {
    running: {
      initial: "starting",
      states: {
        starting: {
          invoke: { id: "startApi", src: "startApi", onDone: "initializing", onError: { target: "#app.stopped", actions: "recordError" } },
        },
        initializing: {
          invoke: {
            id: "prepare",
            src: "prepare",
            input: ({ context }) => ({ generation: context.generations + 1, initial: true }),
            onDone: { actions: "buildGeneration" },
            onError: { target: "#app.shutting_down", actions: ["recordError", "reportStartupFailure"] },
          },
          on: {
            "RUNTIME.READY": { guard: "isBuilding", target: "serving", actions: ["swapGeneration", "activate", "startFollower"] },
            "RUNTIME.FAILED": { guard: "isBuilding", target: "#app.shutting_down", actions: ["dropBuilding", "recordError", "reportStartupFailure"] },
          },
        },
        serving: {
          always: [
            { guard: "restartRequested", target: "#app.restarting" },
            { guard: "stopRequested", target: "#app.shutting_down" },
            { guard: "reloadPending", target: "reloading" },
          ],
        },
        // Built beside the running generation; the swap happens only when every plugin of the new one is ready.
        reloading: {
          entry: "markReloadStarted",
          invoke: {
            id: "prepare",
            src: "prepare",
            input: ({ context }) => ({ generation: context.generations + 1, initial: false }),
            onDone: { actions: ["recordTarget", "buildGeneration"] },
            onError: { target: "serving", actions: "markReloadFailed" },
          },
          on: {
            "RUNTIME.READY": { guard: "isBuilding", target: "serving", actions: ["swapGeneration", "activate", "markReloadSucceeded"] },
            "RUNTIME.FAILED": { guard: "isBuilding", target: "serving", actions: ["dropBuilding", "markReloadFailed"] },
          },
        },
      },
    },
    shutting_down: stopping(false),
    restarting: stopping(true),
    stopped: { type: "final" },
  },
});

/** The lifecycle state the API and the log name: starting, initializing, serving, reloading, shutting_down, restarting, stopped. */
export function lifecycleState(value: unknown): string {
  if (typeof value === "string") return value;
  if (value !== null && typeof value === "object") {
    const [key, inner] = Object.entries(value as Record<string, unknown>)[0] ?? ["unknown", null];
    return key === "running" ? lifecycleState(inner) : key;
  }
  return "unknown";
}
