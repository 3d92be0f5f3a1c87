// The self-upgrade task (spec: Upgrade states; POST /api/upgrade/apply, GET /api/upgrade/status):
//   idle | completed | skipped | failed --UPGRADE.APPLY [upgradeIdle, installedRelease]--> running
//   running: the `apply` actor downloads, verifies, unpacks, smoke-tests and switches `current`
//     → skipped (already the newest) | restarting (installed; after RESTART_ANNOUNCE_MS the app is asked
//       to restart, so status pollers see it) | failed
// The first start of the new release (the process after the restart) is a trial, read from the
// install directory's pending marker (input `trial`):
//   trial: `confirmHealth` reports TRIAL.HEALTHY once the app serves → confirmed (the outcome is
//     written) → completed; TRIAL.START_FAILED, or the deadline the marker sets (`after`), →
//     rollingBack: `rollBack` switches `current` back, then the process restarts into the old release.
// One task at a time: an apply while running, restarting or in a trial is refused (HTTP 409
// upgrade_in_progress), never queued. A process started after an upgrade otherwise shows the
// outcome it was started with (input `restored`).
// The request (with the release host's token) travels as the invoke's input only, never in context.

import { and, assign, fromCallback, fromPromise, not, setup, stateIn } from "xstate";

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

/** The new release's trial, as the pending marker records it (src/upgrade/pending.ts). */
export interface UpgradeTrial {
  from_version: string;
  to_version: string;
  started_at_ms: number;
  start_deadline_ms: number;
  /** Unix ms by which the release must serve: set when this start was recorded, so the deadline counts from the start. */
  deadline_at_ms: number;
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
  trial: UpgradeTrial | null;
}

/** `installed`: the process runs from an installed release (or upgrade.install_dir is set), so apply can switch it. */
export type UpgradeEvent =
  | { type: "UPGRADE.APPLY"; request: unknown; installed: boolean }
  /** From `confirmHealth`: the app reached serving, or stopped before it did (with why). */
  | { type: "TRIAL.HEALTHY" }
  | { type: "TRIAL.START_FAILED"; error: string }
  /** From `rollBack`: `current` points at the release upgraded from again. */
  | { type: "TRIAL.ROLLED_BACK" };

export interface UpgradeInput {
  clock: () => number;
  version: string;
  restored?: RestoredUpgrade | null;
  trial?: UpgradeTrial | null;
}

const errorText = (e: unknown): string => (e instanceof Error ? e.message : String(e));
const outputOf = (event: unknown): UpgradeOutcome => (event as { output: UpgradeOutcome }).output;

/** `restarting` is answered for this long before the restart begins. */
export const RESTART_ANNOUNCE_MS = 1000;

export const upgradeMachine = setup({
  types: {
    context: {} as UpgradeContext,
    events: {} as UpgradeEvent,
    input: {} as UpgradeInput,
  },
  actors: {
    apply: fromPromise<UpgradeOutcome, unknown>(() => Promise.reject(new Error("not provided"))),
    /** Watches the app: TRIAL.HEALTHY once it serves, TRIAL.START_FAILED if it stops first. */
    confirmHealth: fromCallback<{ type: string }, void, UpgradeEvent>(() => {}),
    /** Records the confirmed trial as the completed upgrade (result file, marker removed). */
    confirmTrial: fromPromise<RestoredUpgrade, UpgradeTrial>(() => Promise.reject(new Error("not provided"))),
    /**
     * Switches `current` back and records why, then sends TRIAL.ROLLED_BACK. A callback actor so
     * that it is done in the same turn as the failure it answers: the app's own shutdown after a
     * failed start cannot end the process before the switch and the restart.
     */
    rollBack: fromCallback<{ type: string }, { trial: UpgradeTrial; reason: string }, UpgradeEvent>(() => {}),
  },
  delays: {
    /**
     * How long `restarting` is shown before the app is asked to restart: a client polling
     * /api/upgrade/status every few hundred milliseconds sees running → restarting → completed
     * (the API goes with the old process, and the new one reports completed).
     */
    announceRestart: RESTART_ANNOUNCE_MS,
    /** What is left of the trial's deadline (upgrade.start_deadline from the new release's start) on the injected clock. */
    trialDeadline: ({ context }) => (context.trial ? Math.max(0, context.trial.deadline_at_ms - context.clock()) : 0),
  },
  guards: {
    /** One upgrade task at a time: refused while one runs or the restart it asked for is under way. */
    upgradeIdle: and([not(stateIn("running")), not(stateIn("restarting")), not(stateIn("trial")), not(stateIn("confirmed")), not(stateIn("rollingBack"))]),
    /** Apply needs an install directory to switch (HTTP 409 upgrade_not_installed). */
    installedRelease: ({ event }) => event.type === "UPGRADE.APPLY" && event.installed,
    skipped: ({ event }) => outputOf(event).outcome === "skipped",
    restoredCompleted: ({ context }) => context.restored?.state === "completed",
    restoredFailed: ({ context }) => context.restored?.state === "failed",
    trialPending: ({ context }) => context.trial !== null,
  },
  actions: {
    /** Asks the application to restart into the new release (provided by actors/app.actor.ts). */
    requestRestart: () => {},
    /** Restarts the process into the release switched back to, at once: a start past its deadline may never finish (provided). */
    restartIntoPrevious: () => {},
    restore: assign(({ context }) => {
      const r = context.restored;
      return r ? { started_at_ms: r.started_at_ms, completed_at_ms: r.completed_at_ms, error: r.error, installed_version: r.installed_version, target_version: r.installed_version } : {};
    }),
    recordTrial: assign(({ context }) => {
      const t = context.trial;
      return t ? { started_at_ms: t.started_at_ms, installed_version: t.to_version, target_version: t.to_version } : {};
    }),
    recordConfirmed: assign(({ event }) => {
      const r = (event as unknown as { output: RestoredUpgrade }).output;
      return { started_at_ms: r.started_at_ms, completed_at_ms: r.completed_at_ms, error: r.error, installed_version: r.installed_version, target_version: r.installed_version };
    }),
    /** The reason stays in `error` while rolling back; recordRolledBack adds where to. */
    recordStartFailed: assign(({ context, event }) => ({
      error: `release ${context.trial?.to_version ?? "?"} failed to start: ${(event.type === "TRIAL.START_FAILED" ? event.error : "").split("\n")[0]}`,
    })),
    recordDeadlineMissed: assign(({ context }) => ({
      error: `release ${context.trial?.to_version ?? "?"} did not reach serving within ${(context.trial?.start_deadline_ms ?? 0) / 1000}s (upgrade.start_deadline)`,
    })),
    recordRolledBack: assign(({ context }) => ({
      completed_at_ms: context.clock(),
      error: `${context.error ?? ""}; rolled back to ${context.trial?.from_version ?? "?"}`,
      installed_version: context.trial?.from_version ?? context.installed_version,
      target_version: context.trial?.from_version ?? context.target_version,
    })),
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
    trial: input.trial ?? null,
  }),
  on: {
    "UPGRADE.APPLY": { guard: and(["upgradeIdle", "installedRelease"]), target: ".running", actions: "recordStart" },
  },
  states: {
    booting: {
      always: [
        { guard: "trialPending", target: "trial", actions: "recordTrial" },
        { guard: "restoredCompleted", target: "completed", actions: "restore" },
        { guard: "restoredFailed", target: "failed", actions: "restore" },
        { target: "idle" },
      ],
    },
    idle: {},
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
    trial: {
      invoke: { id: "confirmHealth", src: "confirmHealth" },
      on: {
        "TRIAL.HEALTHY": "confirmed",
        "TRIAL.START_FAILED": { target: "rollingBack", actions: "recordStartFailed" },
      },
      after: { trialDeadline: { target: "rollingBack", actions: "recordDeadlineMissed" } },
    },
    confirmed: {
      invoke: {
        id: "confirmTrial",
        src: "confirmTrial",
        input: ({ context }) => context.trial as UpgradeTrial,
        onDone: { target: "completed", actions: "recordConfirmed" },
        onError: { target: "failed", actions: "recordFailure" },
      },
    },
    rollingBack: {
      invoke: {
        id: "rollBack",
        src: "rollBack",
        input: ({ context }) => ({ trial: context.trial as UpgradeTrial, reason: context.error ?? "" }),
        // Not switched back: this process carries on; the next start finds the attempt unconfirmed and tries again.
        onError: { target: "failed", actions: "recordFailure" },
      },
      // restartIntoPrevious reads the reason before recordRolledBack adds where to (in a real process it does not return).
      on: { "TRIAL.ROLLED_BACK": { target: "failed", actions: ["restartIntoPrevious", "recordRolledBack"] } },
    },
    completed: {},
    skipped: {},
    failed: {},
  },
});

/**
 * The state the API names (spec: Upgrade states). booting is instantaneous and shows as idle; the
 * trial finishes the restart (restarting), confirmed is the completed upgrade being recorded, and
 * rollingBack a failed one whose restart into the old release is under way.
 */
export function upgradeState(value: unknown): UpgradeState {
  switch (value) {
    case "booting":
      return "idle";
    case "trial":
      return "restarting";
    case "confirmed":
      return "completed";
    case "rollingBack":
      return "failed";
    default:
      return value as UpgradeState;
  }
}

/** A restart is still to come: into the new release (restarting), or back into the old one (rollingBack). */
export function upgradeRestartRequired(value: unknown): boolean {
  return value === "restarting" || value === "rollingBack";
}
