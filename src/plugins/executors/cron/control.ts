// The cron plugin's control plane: the cron:<tag> actor with one child per job
// (machines/cron.machine.ts, machines/cron-job.machine.ts) bound to this instance's schedules, runs
// and metrics, and the routes under /api/plugins/<tag>/: POST jobs/<name>/run starts a manual run
// (202 once accepted, before it ends); GET jobs/status shows each job's current run and latest
// manual result.

import { fromCallback, type AnyActorRef } from "xstate";
import { cronJobMachine, type CronJobContext, type CronRunCancel, type CronRunInput, type CronRunReport } from "../../../../machines/cron-job.machine.js";
import { cronMachine, type CronContext, type CronRunAccepted } from "../../../../machines/cron.machine.js";
import { type PluginControl, type PluginRoute } from "../../../registry/control.js";
import type { CronPlugin } from "./index.js";
import { nextRun } from "./schedule.js";
import { cronJobsStatusSchema, cronRunAcceptedSchema, type jobStatusSchema } from "./schemas.js";
import type { FromSchema } from "../../../config/schema-type.js";

/** One job's status record from its actor's context (spec: Cron job status). */
export function jobStatus(c: CronJobContext): FromSchema<typeof jobStatusSchema> {
  return { schedule: c.schedule, interval_ms: c.interval_ms, next_run_ms: c.next_run_ms, current_run: c.current, last_manual_run: c.last_manual };
}

const jobsOf = (plugin: { concern: { snapshot(): { context: unknown } } }): Record<string, AnyActorRef> => (plugin.concern.snapshot().context as CronContext).jobs as Record<string, AnyActorRef>;

const routes: PluginRoute<CronPlugin>[] = [
  {
    method: "POST",
    role: "operator",
    path: "jobs/:job/run",
    audit: (req) => `run job ${req.params.job ?? ""}`,
    summary: "Start a job now (manual trigger); 202 once the run is accepted, before it ends",
    description:
      "The run goes through the plugin's manual queue: manual runs of one plugin run one at a time, in order, and `current_run.status` is `pending` while one waits. The job's schedule is unchanged.",
    status: 202,
    errors: ["cron_job_not_found", "cron_job_already_running", "cron_unavailable"],
    schema: {
      params: { type: "object", required: ["job"], properties: { job: { type: "string", minLength: 1, maxLength: 512, description: "The job name (URL-encoded)" } } },
      response: { 202: cronRunAcceptedSchema },
    },
    async handle(req, plugin) {
      const job = req.params.job ?? "";
      const accepted = (await plugin.concern.ask({ type: "CRON.RUN", job })) as CronRunAccepted;
      return { ok: true, job, status: "started", trigger: "manual", run_id: accepted.run_id };
    },
  },
  {
    method: "GET",
    role: "viewer",
    path: "jobs/status",
    summary: "Every job's schedule, next run, current run and latest manual result",
    schema: {
      response: { 200: cronJobsStatusSchema },
    },
    handle(_req, plugin) {
      const jobs = jobsOf(plugin);
      return { ok: true, jobs: Object.fromEntries(plugin.view.jobs.map((j) => [j.job, jobStatus((jobs[j.job]?.getSnapshot() as { context: CronJobContext }).context)])) };
    },
  },
];

export const cronControl: PluginControl<CronPlugin> = {
  // With data-plane workers, the primary runs the jobs (a worker's providers follow its reloads).
  primaryOnly: true,
  concern: (cron, env) => {
    const job = cronJobMachine.provide({
      actors: {
        // One run: RUN.CANCEL (or the job actor going away) aborts it; the job hears when the executors have returned.
        run: fromCallback<CronRunCancel, CronRunInput>(({ input, sendBack, receive }) => {
          const abort = new AbortController();
          receive(() => abort.abort());
          cron.run(input, abort.signal).then(
            (output) => sendBack({ type: "JOB.RAN", output } satisfies CronRunReport),
            (error: unknown) => sendBack({ type: "JOB.RUN_FAILED", error } satisfies CronRunReport),
          );
          return () => abort.abort();
        }),
      },
      actions: {
        countRun: () => {
          cron.counters.runs.value++;
        },
        logCancelled: ({ context }) => {
          if (context.current) env.log.info({ job: context.job, run_id: context.current.run_id, trigger: context.current.trigger, was: context.current.status }, "cron run cancelled");
        },
        countSkipped: ({ context }, params: { trigger: string }) => {
          cron.counters.skipped.value++;
          env.log.warn({ job: context.job, trigger: params.trigger, run_id: context.current?.run_id }, "cron trigger skipped: the job's previous run is still active");
        },
      },
    });
    return {
      id: `cron:${env.tag}`,
      logic: cronMachine.provide({ actors: { job } }),
      input: {
        tag: env.tag,
        clock: Date.now,
        queueSize: cron.manualQueue,
        jobs: cron.jobs.map((j) => ({ job: j.job, schedule: j.schedule, interval_ms: j.interval_ms, nextRun: (now: number, previous: number | null) => nextRun(j.timing, now, previous) })),
      },
    };
  },
  routes,
};
