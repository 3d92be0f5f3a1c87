// The timer of one cron job (invoked by machines/cron-job.machine.ts as `scheduler`): it tells the
// job each next run time (JOB.NEXT) and, when that time has come, the trigger (JOB.TICK). The wait is
// a delayed transition read from the context, so a model test drives it with xstate's SimulatedClock;
// when and how often the job runs is `nextRun` (the job's schedule or interval, from the plugin) and
// "now" is `clock`, both injected. A run missed while the process was busy is not replayed: the next
// run is always after now.

import { assign, sendParent, setup } from "xstate";

/** The first run after `now` that follows `previous` (null: never again). */
export type NextRun = (now: number, previous: number | null) => number | null;

export type CronTimerTrigger = "schedule" | "interval";

export interface CronTimerInput {
  trigger: CronTimerTrigger;
  clock: () => number;
  nextRun: NextRun;
}

export interface CronTimerContext extends CronTimerInput {
  /** The run being waited for (null: the schedule never comes round again). */
  next: number | null;
}

/** Told to the job actor. */
export type CronTimerReport = { type: "JOB.TICK"; trigger: CronTimerTrigger; scheduled_at_ms: number } | { type: "JOB.NEXT"; next_run_ms: number | null };

/** Node timers overflow past 2^31 ms; a longer wait is taken in steps. */
export const MAX_WAIT_MS = 2 ** 31 - 1;

export const cronTimerMachine = setup({
  types: {
    context: {} as CronTimerContext,
    input: {} as CronTimerInput,
  },
  delays: {
    cronTimerWait: ({ context }) => Math.min(MAX_WAIT_MS, Math.max(0, (context.next ?? 0) - context.clock())),
  },
  guards: {
    cronTimerNever: ({ context }) => context.next === null,
    /** The timer may wake early (a wait taken in steps, or a clock that moved back). */
    cronTimerDue: ({ context }) => context.next !== null && context.clock() >= context.next,
  },
  actions: {
    reportNext: sendParent(({ context }): CronTimerReport => ({ type: "JOB.NEXT", next_run_ms: context.next })),
    reportDue: sendParent(({ context }): CronTimerReport => ({ type: "JOB.TICK", trigger: context.trigger, scheduled_at_ms: context.next ?? context.clock() })),
    advance: assign({ next: ({ context }) => context.nextRun(context.clock(), context.next) }),
  },
}).createMachine({
  id: "cronTimer",
  initial: "waiting",
  context: ({ input }) => ({ ...input, next: input.nextRun(input.clock(), null) }),
  entry: "reportNext",
  states: {
    waiting: {
      always: { guard: "cronTimerNever", target: "never" },
      after: {
        // Re-entered after each wake-up, so the next wait is read from the context again.
        cronTimerWait: [{ guard: "cronTimerDue", target: "waiting", reenter: true, actions: ["reportDue", "advance", "reportNext"] }, { target: "waiting", reenter: true }],
      },
    },
    never: {},
  },
});
