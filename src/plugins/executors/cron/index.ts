// `cron`: runs lists of executors in the background, on a 5-field schedule or at an interval, and
// on demand through the API. Each job is an actor (machines/cron-job.machine.ts) under the
// plugin's cron:<tag> actor (machines/cron.machine.ts); this file holds what a run does. It is
// not a pipeline step: calling it from a sequence is an error. See docs/plugins.md#cron.

import { syntheticContext } from "../../../engine/context.js";
import type { Executor, StepResult } from "../../../engine/types.js";
import type { CronRunInput, CronRunOutput, CronRunStatus, CronSchedule } from "../../../../machines/cron-job.machine.js";
import type { Cell } from "../../../observability/metrics.js";
import type { Logger } from "../../../observability/logger.js";
import { definePlugin, type ControlHandle, type ExecutorPlugin } from "../../../registry/types.js";
import { analyseCron, compileSchedule, cronSchema, intervalMs, parseExecutor, type CronArgs } from "./args.js";
import { cronControl } from "./control.js";
import type { Timing } from "./schedule.js";

/** The question a job's context carries (no client asked it; `.invalid` never resolves). */
export const CRON_QUERY_NAME = "cron.invalid";

interface Job extends CronSchedule {
  timing: Timing;
  /** Executors in order, each with the tag that names it in logs. */
  executors: { tag: string; exec: Executor }[];
}

export interface CronCounters {
  runs: Cell;
  skipped: Cell;
  errors: Cell;
}

export class CronPlugin implements ExecutorPlugin {
  constructor(
    readonly tag: string,
    readonly jobs: readonly Job[],
    readonly manualQueue: number,
    readonly counters: CronCounters,
    readonly log: Logger,
    private readonly self: ControlHandle,
  ) {}

  execute(): StepResult {
    throw new Error(`cron '${this.tag}' can only run as a background scheduler, not as a step of a pipeline`);
  }

  /** One run of a job (the job actor's `run` child): the executors in order on a fresh context; `signal` cancels it. */
  async run(input: CronRunInput, signal: AbortSignal): Promise<CronRunOutput> {
    const job = this.jobs.find((j) => j.job === input.job);
    if (!job) throw new Error(`cron '${this.tag}' has no job '${input.job}'`);
    const ctx = syntheticContext(
      CRON_QUERY_NAME,
      new Map<string, string | number>([
        ["cron.plugin_tag", this.tag],
        ["cron.job_name", job.job],
        ["cron.scheduled_at_unix_ms", input.scheduled_at_ms],
        ["cron.trigger_kind", input.trigger],
      ]),
    );
    ctx.signal = signal;
    const fields = { job: job.job, run_id: input.run_id, trigger: input.trigger };
    this.log.info(fields, "cron run started");
    let errors = 0;
    let ran = 0;
    for (const { tag, exec } of job.executors) {
      if (signal.aborted) break;
      ran++;
      try {
        // Plain execute: no continuation, and Stop/Return do not end the run.
        await exec.execute(ctx, null);
      } catch (err) {
        errors++;
        this.counters.errors.value++;
        this.log.warn({ ...fields, executor: tag, err: (err as Error).message }, "cron executor failed; the job goes on with the next one");
      }
    }
    const status: CronRunStatus = signal.aborted ? "cancelled" : errors === 0 ? "completed" : errors === ran ? "failed" : "completed_with_errors";
    this.log.info({ ...fields, status, executor_error_count: errors }, "cron run finished");
    return { status, executor_error_count: errors };
  }

  /**
   * Stops every job (an active run ends `cancelled`); the cron actor answers once every job has
   * stopped, which is after their runs have returned (the plugin actor stops it only after this).
   */
  async destroy(): Promise<void> {
    try {
      await this.self.ask({ type: "CRON.STOP" });
    } catch {
      // No actor (the plugin never became ready), so no job and no run.
    }
  }
}

export const cron = definePlugin<CronArgs, "executor", CronPlugin>({
  type: "cron",
  kind: "executor",
  feature: "cron",
  summary: "Runs executors in the background on a schedule or an interval, and on demand through the API.",
  schema: cronSchema,
  check: (args, env) => analyseCron(args, env).problems,
  dependencies: (args, env) => analyseCron(args, env).deps,
  async create(args, ctx) {
    const jobs: Job[] = [];
    for (const [i, j] of args.jobs.entries()) {
      const executors: Job["executors"] = [];
      for (const [k, text] of j.executors.entries()) {
        const ref = parseExecutor(text, (w) => ctx.isExecutorType(w), ["jobs", i, "executors", k]);
        if ("tag" in ref) {
          executors.push({ tag: ref.tag, exec: ctx.executor(ref.tag) });
        } else {
          const tag = `qs.cron.${ctx.tag}.${i}.${k}.${ref.type}`;
          executors.push({ tag, exec: await ctx.quickExecutor(ref.quick, tag) });
        }
      }
      const cronPattern = j.schedule === undefined ? null : compileSchedule(j.schedule, args.timezone, ["jobs", i, "schedule"]);
      const every = j.interval === undefined ? null : intervalMs(j.interval, ["jobs", i, "interval"]);
      jobs.push({ job: j.name, schedule: j.schedule?.trim() ?? null, interval_ms: every, timing: { cron: cronPattern, interval_ms: every }, executors });
    }
    const m = ctx.services.metrics;
    const labels = { plugin_tag: ctx.tag };
    const counters: CronCounters = {
      runs: m.counter("cron_job_run_total", "cron: job runs started (every trigger)", ["plugin_tag"])(labels),
      skipped: m.counter("cron_job_skipped_total", "cron: scheduled triggers skipped because the job's previous run was still active", ["plugin_tag"])(labels),
      errors: m.counter("cron_executor_error_total", "cron: executor errors in job runs (later executors still run)", ["plugin_tag"])(labels),
    };
    return new CronPlugin(ctx.tag, jobs, args.manual_queue, counters, ctx.log, ctx.control(ctx.tag));
  },
  control: cronControl,
});
