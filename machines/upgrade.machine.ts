// The self-upgrade task (spec: Upgrade states; POST /api/upgrade/apply, GET /api/upgrade/status):
//   idle | completed | skipped | failed --UPGRADE.APPLY [upgradeIdle, installedRelease]--> running
//   running: the `apply` actor downloads, verifies, unpacks, smoke-tests and switches `current`
//     → skipped (already the newest) | restarting (installed; after RESTART_ANNOUNCE_MS the app is asked
//       to restart, so status pollers see it) | failed
// One task at a time: an apply while running or restarting is refused (HTTP 409
// upgrade_in_progress), never queued. A process started after an upgrade shows its outcome:
// the result it was started with (input), or the trial it just confirmed (UPGRADE.RESTORED).
// The request (with the release host's token) travels as the invoke's input only, never in context.

import { and, assign, fromPromise, not, setup, stateIn } from "xstate";

export type UpgradeState = "idle" | "running" | "restarting" | "completed" | "skipped" | "failed";

/** The outcome of an apply (src/upgrade/engine.ts). */
export type UpgradeOutcome = { outcome: "skipped"; version: string } | { outcome: "installed"; from: string; version: string };

/** An earlier task's outcome, as the install directory recorded it. */
export interface RestoredUpgrade {
  state: "completed" | "failed";
  started_at_ms: number | null;
  completed_at_ms: number;
  error: string | null;
  installed_version: string;
}

export interface UpgradeContext {
  clock: () => number;
  started_at_ms: number | null;
  completed_at_ms: number | null;
  error: string | null;
  /** The version `current` points at as far as this task knows (the running one until an install). */
  installed_version: string;
  /** The release being installed, or the latest one seen. */
  target_version: string | null;
  restored: RestoredUpgrade | null;
}

/** `installed`: the process runs from an installed release (or upgrade.install_dir is set), so apply can switch it. */
export type UpgradeEvent = { type: "UPGRADE.APPLY"; request: unknown; installed: boolean } | { type: "UPGRADE.RESTORED"; result: RestoredUpgrade };

const errorText = (e: unknown): string => (e instanceof Error ? e.message : String(e));
const outputOf = (event: unknown): UpgradeOutcome => (event as { output: UpgradeOutcome }).output;

/** `restarting` is answered for this long before the restart begins. */
export const RESTART_ANNOUNCE_MS = 1000;

export const upgradeMachine = setup({
  types: {
    context: {} as UpgradeContext,
    events: {} as UpgradeEvent,
    input: {} as { clock: () => number; version: string; restored?: RestoredUpgrade | null },
  },
  actors: {
    apply: fromPromise<UpgradeOutcome, unknown>(() => Promise.reject(new Error("not provided"))),
  },
  delays: {
    /**
     * How long `restarting` is shown before the app is asked to restart: a client polling
     * /api/upgrade/status every few hundred milliseconds sees running → restarting → completed
     * (the API goes with the old process, and the new one reports completed).
     */
    announceRestart: RESTART_ANNOUNCE_MS,
  },
  guards: {
    /** One upgrade task at a time: refused while one runs or the restart it asked for is under way. */
    upgradeIdle: and([not(stateIn("running")), not(stateIn("restarting"))]),
    /** Apply needs an install directory to switch (HTTP 409 upgrade_not_installed). */
    installedRelease: ({ event }) => event.type === "UPGRADE.APPLY" && event.installed,
    skipped: ({ event }) => outputOf(event).outcome === "skipped",
    restoredCompleted: ({ context }) => context.restored?.state === "completed",
    restoredFailed: ({ context }) => context.restored?.state === "failed",
    resultCompleted: ({ event }) => event.type === "UPGRADE.RESTORED" && event.result.state === "completed",
  },
  actions: {
    /** Asks the application to restart into the new release (provided by actors/app.actor.ts). */
    requestRestart: () => {},
    restore: assign(({ context, event }) => {
      const r = event.type === "UPGRADE.RESTORED" ? event.result : context.restored;
      return r ? { started_at_ms: r.started_at_ms, completed_at_ms: r.completed_at_ms, error: r.error, installed_version: r.installed_version, target_version: r.installed_version } : {};
    }),
    recordStart: assign(({ context }) => ({ started_at_ms: context.clock(), completed_at_ms: null, error: null, target_version: null })),
    recordSkipped: assign(({ context, event }) => ({ completed_at_ms: context.clock(), target_version: outputOf(event).version })),
    recordInstalled: assign(({ event }) => ({ installed_version: outputOf(event).version, target_version: outputOf(event).version })),
    recordFailure: assign(({ context, event }) => ({ completed_at_ms: context.clock(), error: errorText((event as { error?: unknown }).error) })),
  },
}).createMachine({
  id: "upgrade",
  initial: "booting",
  context: ({ input }) => ({
    clock: input.clock,
    started_at_ms: null,
    completed_at_ms: null,
    error: null,
    installed_version: input.version,
    target_version: null,
    restored: input.restored ?? null,
  }),
  on: {
    "UPGRADE.APPLY": { guard: and(["upgradeIdle", "installedRelease"]), target: ".running", actions: "recordStart" },
  },
  states: {
    booting: {
      always: [
        { guard: "restoredCompleted", target: "completed", actions: "restore" },
        { guard: "restoredFailed", target: "failed", actions: "restore" },
        { target: "idle" },
      ],
    },
    idle: {
      on: {
        "UPGRADE.RESTORED": [
          { guard: "resultCompleted", target: "completed", actions: "restore" },
          { target: "failed", actions: "restore" },
        ],
      },
    },
    running: {
      invoke: {
        id: "apply",
        src: "apply",
        input: ({ event }: { event: UpgradeEvent }) => (event.type === "UPGRADE.APPLY" ? event.request : null),
        onDone: [
          { guard: "skipped", target: "skipped", actions: "recordSkipped" },
          { target: "restarting", actions: "recordInstalled" },
        ],
        onError: { target: "failed", actions: "recordFailure" },
      },
    },
    restarting: { after: { announceRestart: { actions: "requestRestart" } } },
    completed: {},
    skipped: {},
    failed: {},
  },
});

/** The state the API names (booting is instantaneous and shows as idle). */
export function upgradeState(value: unknown): UpgradeState {
  return value === "booting" ? "idle" : (value as UpgradeState);
}
