// One job of a `cron` plugin (systemId runtime:<n>/plugin:<tag>/cron:<tag>/<job>): idle → pending →
// running → idle, and stopped (final) when the plugin goes. A scheduled trigger (schedule or
// interval) starts a run at once from idle and is skipped (and counted) while a run is active; a
// manual trigger is accepted only from idle (guard cronJobNotRunning: HTTP 409) and waits in
// `pending` until the cron actor's manual queue starts it. The run is this actor's child `run`: the
// only record of it. JOB.CANCEL during a run asks it to stop and waits in `cancelling` until it has
// returned, so the plugin's destroy (which waits for every job to stop) outlasts its runs. The timer
// is machines/cron-timer.machine.ts; the executor chain (`run`) is provided by the plugin's control
// (src/plugins/executors/cron/control.ts).

import { assign, fromCallback, sendParent, sendTo, setup, spawnChild, stateIn, stopChild } from "xstate";
import { cronTimerMachine, type CronTimerReport, type NextRun } from "./cron-timer.machine.js";

export type CronTrigger = "manual" | "schedule" | "interval";
export type CronRunStatus = "completed" | "completed_with_errors" | "failed" | "cancelled";

/** The run shown as `current_run` by GET jobs/status. */
export interface CronCurrentRun {
  run_id: number;
  trigger: CronTrigger;
  status: "pending" | "running";
  /** When it was accepted (pending) or began running. */
  started_at_ms: number;
}

/** The latest manual run's result (`last_manual_run`). */
export interface CronManualResult {
  run_id: number;
  status: CronRunStatus;
  executor_error_count: number;
  completed_at_ms: number;
}

export interface CronRunInput {
  job: string;
  run_id: number;
  trigger: CronTrigger;
  /** When the trigger fired (the scheduled time for schedule and interval runs). */
  scheduled_at_ms: number;
}

export interface CronRunOutput {
  status: CronRunStatus;
  executor_error_count: number;
}

export interface CronSchedule {
  job: string;
  schedule: string | null;
  interval_ms: number | null;
}

export interface CronJobContext extends CronSchedule {
  tag: string;
  clock: () => number;
  /** When the schedule or interval next comes round (the timer's `nextRun`). */
  nextRun: NextRun;
  next_run_ms: number | null;
  /** run_id of the latest run (0 before the first); ids are shared by every trigger. */
  last_run_id: number;
  current: CronCurrentRun | null;
  scheduled_at_ms: number | null;
  last_manual: CronManualResult | null;
  runs: number;
  skipped: number;
}

/** What the `run` child tells its job when the executors have returned (JOB.RAN) or it broke. */
export type CronRunReport = { type: "JOB.RAN"; output: CronRunOutput } | { type: "JOB.RUN_FAILED"; error: unknown };

/** What the job tells its `run` child: stop early (the run then ends `cancelled`). */
export interface CronRunCancel {
  type: "RUN.CANCEL";
}

export type CronJobEvent = { type: "JOB.ENQUEUE"; requestId: string } | { type: "JOB.START" } | { type: "JOB.CANCEL" } | CronTimerReport | CronRunReport;

/** Told to the cron actor (machines/cron.machine.ts). */
export type CronJobReport = { type: "JOB.ACCEPTED"; job: string; requestId: string; run_id: number } | { type: "JOB.FINISHED"; job: string; trigger: CronTrigger };

export type CronJobInput = CronSchedule & { tag: string; clock: () => number; nextRun: NextRun };

export const cronJobMachine = setup({
  types: {
    context: {} as CronJobContext,
    events: {} as CronJobEvent,
    input: {} as CronJobInput,
  },
  actors: {
    // Runs the executors; answers with JOB.RAN or JOB.RUN_FAILED and stops early on RUN.CANCEL. Never returns by default.
    run: fromCallback<CronRunCancel, CronRunInput>(() => undefined),
    scheduler: cronTimerMachine,
  },
  guards: {
    /** One active run per job: a manual trigger during a pending or running run is refused, not queued (HTTP 409). */
    cronJobNotRunning: stateIn("idle"),
  },
  actions: {
    /** Metrics and the log (provided by the plugin's control). */
    countRun: () => {},
    countSkipped: (_args, _params: { trigger: string }) => {},
    /** Logs the run a reload or shutdown cancelled (provided by the plugin's control). */
    logCancelled: () => {},
    acceptManual: assign(({ context }) => {
      const run_id = context.last_run_id + 1;
      return { last_run_id: run_id, scheduled_at_ms: context.clock(), current: { run_id, trigger: "manual" as const, status: "pending" as const, started_at_ms: context.clock() } };
    }),
    reportAccepted: sendParent(({ context, event }): CronJobReport => ({
      type: "JOB.ACCEPTED",
      job: context.job,
      requestId: (event as Extract<CronJobEvent, { type: "JOB.ENQUEUE" }>).requestId,
      run_id: context.last_run_id,
    })),
    acceptScheduled: assign(({ context, event }) => {
      const tick = event as Extract<CronJobEvent, { type: "JOB.TICK" }>;
      const run_id = context.last_run_id + 1;
      return { last_run_id: run_id, scheduled_at_ms: tick.scheduled_at_ms, current: { run_id, trigger: tick.trigger, status: "pending" as const, started_at_ms: context.clock() } };
    }),
    markRunning: assign(({ context }) => ({
      runs: context.runs + 1,
      current: context.current ? { ...context.current, status: "running" as const, started_at_ms: context.clock() } : null,
    })),
    recordSkipped: assign({ skipped: ({ context }) => context.skipped + 1 }),
    recordNext: assign({ next_run_ms: ({ event }) => (event as Extract<CronJobEvent, { type: "JOB.NEXT" }>).next_run_ms }),
    startRun: spawnChild("run", {
      id: "run",
      input: ({ context }): CronRunInput => ({
        job: context.job,
        run_id: context.current?.run_id ?? context.last_run_id,
        trigger: context.current?.trigger ?? "manual",
        scheduled_at_ms: context.scheduled_at_ms ?? context.clock(),
      }),
    }),
    cancelRun: sendTo("run", { type: "RUN.CANCEL" } satisfies CronRunCancel),
    endRun: stopChild("run"),
    recordDone: assign(({ context, event }) => {
      const out = (event as Extract<CronRunReport, { type: "JOB.RAN" }>).output;
      return finished(context, out.status, out.executor_error_count);
    }),
    recordFailed: assign(({ context }) => finished(context, "failed", 0)),
    recordCancelled: assign(({ context }) => finished(context, "cancelled", 0)),
    // Runs before the record action clears the current run.
    reportFinished: sendParent(({ context }): CronJobReport => ({ type: "JOB.FINISHED", job: context.job, trigger: context.current?.trigger ?? "manual" })),
  },
}).createMachine({
  id: "cronJob",
  initial: "idle",
  context: ({ input }) => ({
    ...input,
    next_run_ms: null,
    last_run_id: 0,
    current: null,
    scheduled_at_ms: null,
    last_manual: null,
    runs: 0,
    skipped: 0,
  }),
  invoke: {
    id: "scheduler",
    src: "scheduler",
    input: ({ context }) => ({ trigger: context.schedule !== null ? "schedule" : "interval", clock: context.clock, nextRun: context.nextRun }),
  },
  on: {
    "JOB.NEXT": { actions: "recordNext" },
    "JOB.ENQUEUE": { guard: "cronJobNotRunning", target: ".pending", actions: ["acceptManual", "reportAccepted"] },
    // The plugin is going (reload or shutdown): a run not yet started ends as `cancelled` at once.
    "JOB.CANCEL": { target: ".stopped", actions: ["logCancelled", "recordCancelled"] },
  },
  states: {
    idle: {
      on: { "JOB.TICK": { target: "running", actions: "acceptScheduled" } },
    },
    // Accepted; waits for its turn in the cron actor's manual queue.
    pending: {
      on: {
        "JOB.START": "running",
        "JOB.TICK": { actions: ["recordSkipped", { type: "countSkipped", params: ({ event }) => ({ trigger: event.trigger }) }] },
      },
    },
    // The run is a spawned child, not an invoke: it outlives `running` into `cancelling`.
    running: {
      entry: ["markRunning", "countRun", "startRun"],
      on: {
        "JOB.RAN": { target: "idle", actions: ["endRun", "reportFinished", "recordDone"] },
        "JOB.RUN_FAILED": { target: "idle", actions: ["endRun", "reportFinished", "recordFailed"] },
        "JOB.TICK": { actions: ["recordSkipped", { type: "countSkipped", params: ({ event }) => ({ trigger: event.trigger }) }] },
        "JOB.CANCEL": { target: "cancelling", actions: ["logCancelled", "cancelRun"] },
      },
    },
    // Told to stop; the job is stopped once its executors have returned (whatever they report, the run was cancelled).
    cancelling: {
      on: {
        "JOB.RAN": { target: "stopped", actions: ["endRun", "recordCancelled"] },
        "JOB.RUN_FAILED": { target: "stopped", actions: ["endRun", "recordCancelled"] },
        // Already cancelled: not stopped before the run has returned.
        "JOB.CANCEL": {},
      },
    },
    stopped: { type: "final" },
  },
});

/** Ends the current run: a manual one becomes `last_manual_run`; scheduled results are not kept. */
function finished(context: CronJobContext, status: CronRunStatus, errors: number): Partial<CronJobContext> {
  const run = context.current;
  if (!run) return { current: null, scheduled_at_ms: null };
  const last_manual = run.trigger === "manual" ? { run_id: run.run_id, status, executor_error_count: errors, completed_at_ms: context.clock() } : context.last_manual;
  return { current: null, scheduled_at_ms: null, last_manual };
}

