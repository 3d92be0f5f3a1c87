// A `cron` plugin's concern (cron:<tag>): one child actor per job (machines/cron-job.machine.ts,
// child id = the job name) and the manual-trigger queue. Manual runs of one plugin start one at a
// time in the order they were asked for; the others wait (`pending`) in a queue of `queueSize`.
// A manual trigger is refused when the plugin is stopping (cronAccepting), names no job
// (cronJobKnown), hits a job with an active run (cronJobIdle) or finds the queue full
// (cronQueueHasRoom). CRON.STOP (sent by the plugin's destroy) cancels every job and answers once
// they have all stopped, which for a running job is once its run has returned: the runs themselves
// are known only to the job actors.

import { and, assign, emit, enqueueActions, setup, stateIn, type ActorRefFrom } from "xstate";
import type { Answer, Asked } from "./concern.js";
import { cronJobMachine, type CronJobReport, type CronSchedule } from "./cron-job.machine.js";
import type { NextRun } from "./cron-timer.machine.js";

export type CronJobRef = ActorRefFrom<typeof cronJobMachine>;

export interface CronContext {
  tag: string;
  clock: () => number;
  queueSize: number;
  /** The job actors by job name (looked up as own keys only: names are the operator's). */
  jobs: Record<string, CronJobRef>;
  /** Jobs whose manual run waits for the one running now, oldest first. */
  queue: string[];
  /** The job whose manual run holds the manual slot. */
  manual: string | null;
  stopRequest: string | null;
}

export type CronEvent = ({ type: "CRON.RUN"; job: string } & Asked) | ({ type: "CRON.STOP" } & Asked) | CronJobReport;

export interface CronInput {
  tag: string;
  clock: () => number;
  queueSize: number;
  jobs: (CronSchedule & { nextRun: NextRun })[];
}

/** What CRON.RUN answers: the run's number. */
export interface CronRunAccepted {
  run_id: number;
}

const runEvent = (e: CronEvent): Extract<CronEvent, { type: "CRON.RUN" }> => e as Extract<CronEvent, { type: "CRON.RUN" }>;
const jobOf = (context: CronContext, name: string): CronJobRef | undefined => (Object.hasOwn(context.jobs, name) ? context.jobs[name] : undefined);

export const cronMachine = setup({
  types: {
    context: {} as CronContext,
    events: {} as CronEvent,
    emitted: {} as Answer,
    input: {} as CronInput,
  },
  actors: { job: cronJobMachine },
  guards: {
    /** The plugin is not being destroyed (HTTP 503 cron_unavailable). */
    cronAccepting: stateIn("active"),
    /** The job is one of this plugin's (HTTP 404 cron_job_not_found). */
    cronJobKnown: ({ context, event }) => jobOf(context, runEvent(event).job) !== undefined,
    /** One active run per job, as the job actor says (HTTP 409 cron_job_already_running). */
    cronJobIdle: ({ context, event }) => jobOf(context, runEvent(event).job)?.getSnapshot().value === "idle",
    /** The manual-trigger queue is bounded (HTTP 503 cron_unavailable when full). */
    cronQueueHasRoom: ({ context }) => context.queue.length < context.queueSize,
    cronJobsStopped: ({ context }) => Object.values(context.jobs).every((j) => j.getSnapshot().status !== "active"),
  },
  actions: {
    // The job goes to `pending` (and answers with its run_id); the queue starts it when the manual slot is free.
    enqueueManual: enqueueActions(({ enqueue, context, event }) => {
      const e = runEvent(event);
      const job = jobOf(context, e.job);
      if (!job) return;
      enqueue.sendTo(job, { type: "JOB.ENQUEUE", requestId: e.requestId });
      enqueue.assign({ queue: [...context.queue, e.job] });
    }),
    dispatch: enqueueActions(({ enqueue, context }) => {
      if (context.manual !== null || context.queue.length === 0) return;
      const [next, ...rest] = context.queue;
      enqueue.assign({ manual: next, queue: rest });
      const job = jobOf(context, next);
      if (job) enqueue.sendTo(job, { type: "JOB.START" });
    }),
    releaseSlot: assign(({ context, event }) => {
      const e = event as Extract<CronJobReport, { type: "JOB.FINISHED" }>;
      return e.trigger === "manual" && context.manual === e.job ? { manual: null } : {};
    }),
    answerAccepted: emit(({ event }): Answer => {
      const e = event as Extract<CronJobReport, { type: "JOB.ACCEPTED" }>;
      return { type: "answer", requestId: e.requestId, ok: true, output: { run_id: e.run_id } satisfies CronRunAccepted };
    }),
    cancelJobs: enqueueActions(({ enqueue, context }) => {
      for (const job of Object.values(context.jobs)) enqueue.sendTo(job, { type: "JOB.CANCEL" });
      enqueue.assign({ queue: [], manual: null });
    }),
    recordStop: assign({ stopRequest: ({ event }) => (event as Asked).requestId }),
    answerStopped: emit(({ context }): Answer => ({ type: "answer", requestId: context.stopRequest ?? "", ok: true, output: null })),
  },
}).createMachine({
  id: "cron",
  initial: "active",
  context: ({ input, spawn }) => ({
    tag: input.tag,
    clock: input.clock,
    queueSize: input.queueSize,
    jobs: Object.fromEntries(input.jobs.map((j) => [j.job, spawn("job", { id: j.job, input: { ...j, tag: input.tag, clock: input.clock } })])),
    queue: [],
    manual: null,
    stopRequest: null,
  }),
  on: {
    "CRON.RUN": { guard: and(["cronAccepting", "cronJobKnown", "cronJobIdle", "cronQueueHasRoom"]), actions: ["enqueueManual", "dispatch"] },
    "JOB.ACCEPTED": { actions: "answerAccepted" },
  },
  states: {
    active: {
      on: {
        "JOB.FINISHED": { actions: ["releaseSlot", "dispatch"] },
        "CRON.STOP": { target: "stopping", actions: "recordStop" },
      },
    },
    stopping: {
      entry: "cancelJobs",
      always: { guard: "cronJobsStopped", target: "stopped" },
    },
    // Not final: the actor lives until its plugin is destroyed, refusing triggers (cron_unavailable).
    stopped: { entry: "answerStopped" },
  },
});
