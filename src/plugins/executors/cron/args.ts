// The `cron` plugin's arguments: the schema, the job checks (names, schedule or interval, time
// zone) and the executors of each job, each `$tag`, a quick setup `type param` when `type` is an
// executor type, or else a bare tag. A job may not run its own cron plugin or any other cron.

import { Cron } from "croner";
import { durationSchema, parseDuration } from "../../../engine/duration.js";
import { ArgError, type ArgProblem, type CheckEnv, type DependencySpec } from "../../../registry/types.js";

export interface JobArgs {
  name: string;
  schedule?: string;
  interval?: number | string;
  executors: string[];
}

export interface CronArgs {
  timezone?: string;
  manual_queue: number;
  jobs: JobArgs[];
}

/** Default size of the manual-trigger queue (runs waiting for the manual slot). */
export const DEFAULT_MANUAL_QUEUE = 16;
export const MIN_INTERVAL_MS = 1000;

export const cronSchema = {
  type: "object",
  additionalProperties: false,
  required: ["jobs"],
  properties: {
    timezone: { type: "string", minLength: 1 },
    manual_queue: { type: "integer", minimum: 1, maximum: 1024, default: DEFAULT_MANUAL_QUEUE },
    jobs: {
      type: "array",
      minItems: 1,
      maxItems: 256,
      items: {
        type: "object",
        additionalProperties: false,
        required: ["name", "executors"],
        properties: {
          name: { type: "string", minLength: 1, maxLength: 128 },
          schedule: { type: "string" },
          interval: durationSchema,
          executors: { type: "array", minItems: 1, maxItems: 64, items: { type: "string", minLength: 1 } },
        },
      },
    },
  },
} as const;

const TAG = /^[^\s/?#$&]+$/;
const hasControlChars = (s: string): boolean => [...s].some((ch) => ch.charCodeAt(0) < 0x20 || ch.charCodeAt(0) === 0x7f);
const NICKNAMES = new Set(["@yearly", "@annually", "@monthly", "@weekly", "@daily", "@hourly"]);

export type ExecutorRef = { tag: string } | { quick: string; type: string };

/** `$tag`, `type param` (a quick setup when `type` is an executor type), or a bare tag. */
export function parseExecutor(text: string, isExecutorType: (word: string) => boolean, at: (string | number)[]): ExecutorRef {
  const t = text.trim();
  if (t.startsWith("$")) {
    const tag = t.slice(1).trim();
    if (!TAG.test(tag)) throw new ArgError(`'${text}' is not a valid $tag reference`, at);
    return { tag };
  }
  const word = t.split(/\s/, 1)[0] ?? "";
  if (word === "cron") throw new ArgError("a cron job cannot run another cron", at);
  if (isExecutorType(word)) return { quick: t, type: word };
  if (!TAG.test(t)) throw new ArgError(`'${text}' is neither an executor type of this build nor a plugin tag`, at);
  return { tag: t };
}

/** The 5-field expression (or @daily-style nickname) as a croner pattern; throws ArgError. */
export function compileSchedule(schedule: string, timezone: string | undefined, at: (string | number)[]): Cron {
  const text = schedule.trim();
  const fields = text.split(/\s+/).length;
  if (!NICKNAMES.has(text.toLowerCase()) && fields !== 5) {
    throw new ArgError(`'${schedule}' has ${fields} fields; a schedule has 5 (minute hour day-of-month month day-of-week); seconds are not supported`, at);
  }
  let cron: Cron;
  try {
    cron = new Cron(text, { mode: "5-part", paused: true, timezone });
  } catch (err) {
    throw new ArgError(`'${schedule}' is not a valid schedule: ${(err as Error).message}`, at);
  }
  if (cron.nextRun() === null) throw new ArgError(`'${schedule}' never comes round`, at);
  return cron;
}

/** Milliseconds between runs of an `interval` job; throws ArgError below 1 s. */
export function intervalMs(value: number | string, at: (string | number)[]): number {
  let ms: number;
  try {
    ms = parseDuration(value);
  } catch (err) {
    throw new ArgError((err as Error).message, at);
  }
  if (ms < MIN_INTERVAL_MS) throw new ArgError(`interval ${JSON.stringify(value)} is shorter than the minimum of 1s`, at);
  return ms;
}

function validTimezone(tz: string): boolean {
  try {
    new Intl.DateTimeFormat("en-US", { timeZone: tz });
    return true;
  } catch {
    return false;
  }
}

function jobProblems(job: JobArgs, i: number, timezone: string | undefined, names: Map<string, number>): ArgProblem[] {
  const problems: ArgProblem[] = [];
  const at = ["jobs", i];
  if (job.name.trim() !== job.name || job.name.trim() === "") problems.push({ path: [...at, "name"], message: "a job name may not start or end with spaces" });
  else if (hasControlChars(job.name)) problems.push({ path: [...at, "name"], message: "a job name may not contain control characters" });
  const first = names.get(job.name);
  if (first !== undefined) problems.push({ path: [...at, "name"], message: `duplicate job name (also jobs[${first}])` });
  else names.set(job.name, i);
  const hasSchedule = job.schedule !== undefined;
  const hasInterval = job.interval !== undefined;
  if (hasSchedule === hasInterval) problems.push({ path: at, message: "a job has exactly one of schedule and interval" });
  try {
    if (job.schedule !== undefined) compileSchedule(job.schedule, timezone, [...at, "schedule"]);
    if (job.interval !== undefined) intervalMs(job.interval, [...at, "interval"]);
  } catch (err) {
    if (!(err instanceof ArgError)) throw err;
    problems.push({ path: err.path, message: err.message });
  }
  return problems;
}

/** Problems and references of the whole args (quick setups are checked through `env`). */
export function analyseCron(args: CronArgs, env: CheckEnv): { problems: ArgProblem[]; deps: DependencySpec[] } {
  const problems: ArgProblem[] = [];
  const deps: DependencySpec[] = [];
  const timezone = args.timezone;
  if (timezone !== undefined && !validTimezone(timezone)) {
    problems.push({ path: ["timezone"], message: `'${timezone}' is not a time zone (use an IANA name such as Europe/Berlin or UTC)` });
  }
  const names = new Map<string, number>();
  args.jobs.forEach((job, i) => {
    problems.push(...jobProblems(job, i, timezone !== undefined && validTimezone(timezone) ? timezone : undefined, names));
    job.executors.forEach((text, j) => {
      const at = ["jobs", i, "executors", j];
      let ref: ExecutorRef;
      try {
        ref = parseExecutor(text, (w) => env.isExecutorType(w), at);
      } catch (err) {
        if (!(err instanceof ArgError)) throw err;
        problems.push({ path: err.path, message: err.message });
        return;
      }
      if ("tag" in ref) {
        deps.push({ argsPath: at, target: ref.tag, kind: "executor", refuseType: { type: "cron", reason: "a cron job cannot run another cron" } });
      } else {
        const out = env.quickSetup("executor", ref.quick, at);
        problems.push(...out.problems);
        deps.push(...out.deps);
      }
    });
  });
  return { problems, deps };
}
