// `script`: runs a configured program per query — never through a shell — with the query as JSON on
// stdin and as SLUICE_* environment variables, `${key}` templates in its arguments and env. The query
// waits for it (so its exit code can decide): 0 continues, a code listed in stop_exit_codes stops the
// pipeline, anything else (another code, a signal, the timeout, a program that cannot start, no room
// to run) applies error_mode. At most max_concurrent run at once; queue_size more may wait; beyond
// that a run is dropped (counted, error_mode). With `async: true` the query does not wait and the
// outcome is only counted and logged. See docs/plugins.md#script.

import { statSync } from "node:fs";
import type { DnsContext } from "../../../engine/context.js";
import { durationProblem, durationSchema, parseDuration } from "../../../engine/duration.js";
import { render, TemplateSet, type Template, type TemplateKey } from "../../../engine/template.js";
import { Step, type StepResult } from "../../../engine/types.js";
import { ArgError, definePlugin, type ArgProblem, type ExecutorPlugin } from "../../../registry/types.js";
import { errorModeSchema, failedStep, HookError, HookFailureLog, type ErrorMode } from "../hooks/failures.js";
import { WorkQueue } from "../hooks/work-queue.js";
import { commandProblem, runProgram, type RunResult } from "./run.js";

export interface ScriptArgs {
  command: string;
  args: string[];
  env: Record<string, string>;
  cwd?: string;
  timeout: number | string;
  error_mode: ErrorMode;
  max_output_bytes: number;
  stop_exit_codes: number[];
  max_concurrent: number;
  queue_size: number;
  async: boolean;
}

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** The environment variable of each template key: SLUICE_QNAME, SLUICE_CLIENT_IP, ... */
const envName = (key: TemplateKey): string => `SLUICE_${key.toUpperCase()}`;

/** Keys whose stdin JSON value is a number (null when the query has none). */
const NUMBERS = new Set<TemplateKey>(["qtype", "qclass", "client_port", "rcode", "cron_scheduled_at_unix_ms"]);
const LISTS = new Set<TemplateKey>(["marks", "resp_ip"]);

/** The query on stdin: the template keys with JSON types (absent values null, lists as arrays). */
function stdinJson(keys: readonly TemplateKey[], values: readonly string[]): string {
  const out: Record<string, unknown> = {};
  keys.forEach((k, i) => {
    const v = values[i];
    if (k === "has_resp") out[k] = v === "true";
    else if (k === "marks") out[k] = v === "" ? [] : v.split(",").map(Number);
    else if (LISTS.has(k)) out[k] = v === "" ? [] : v.split(",");
    else if (NUMBERS.has(k)) out[k] = v === "" ? null : Number(v);
    else if (k === "qname" || k === "client_ip" || k === "qtype_name" || k === "qclass_name") out[k] = v;
    else out[k] = v === "" ? null : v;
  });
  return JSON.stringify(out) + "\n";
}

interface Compiled {
  set: TemplateSet;
  args: Template[];
  env: [string, Template][];
  timeoutMs: number;
}

const isDirectory = (path: string): boolean => {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
};

function compile(a: ScriptArgs): Compiled {
  const problem = durationProblem("timeout", a.timeout, 1, 3_600_000);
  if (problem !== null) throw new ArgError(problem, ["timeout"]);
  if (a.command.trim() !== a.command) throw new ArgError("command has spaces around it (it names one program; put its arguments in args)", ["command"]);
  const set = TemplateSet.all();
  const args = a.args.map((t, i) => set.compile(t, ["args", i]));
  const env = Object.entries(a.env).map(([name, t]): [string, Template] => {
    if (!ENV_NAME.test(name)) throw new ArgError(`'${name}' is not an environment variable name`, ["env", name]);
    return [name, set.compile(t, ["env", name])];
  });
  return { set, args, env, timeoutMs: parseDuration(a.timeout) };
}

function checkArgs(a: ScriptArgs): ArgProblem[] {
  try {
    compile(a);
    return [];
  } catch (err) {
    if (err instanceof ArgError) return [{ path: err.path, message: err.message }];
    throw err;
  }
}

/** Why a finished run failed, or null when its exit code says continue or stop. */
function failure(r: RunResult, timeoutMs: number, stopCodes: ReadonlySet<number>): HookError | null {
  if (r.cancelled) return new HookError("the run was cancelled (the plugin is stopping)", "cancelled");
  if (r.timedOut) return new HookError(`no exit within ${timeoutMs}ms; the program was killed`, "timeout");
  if (r.code === null) return new HookError(`ended by signal ${r.signal ?? "?"}`, "signal");
  if (r.code === 0 || stopCodes.has(r.code)) return null;
  return new HookError(`exit code ${r.code}`, "exit");
}

export const script = definePlugin<ScriptArgs, "executor">({
  type: "script",
  kind: "executor",
  feature: "script",
  summary: "Runs a configured program (no shell) per query with the query on stdin and in SLUICE_* variables; its exit code continues or stops the pipeline.",
  schema: {
    type: "object",
    additionalProperties: false,
    required: ["command"],
    properties: {
      command: { type: "string", minLength: 1 },
      args: { type: "array", items: { type: "string" }, maxItems: 256, default: [] },
      env: { type: "object", additionalProperties: { type: "string" }, default: {} },
      cwd: { type: "string", minLength: 1 },
      timeout: { ...durationSchema, default: "5s" },
      error_mode: errorModeSchema,
      max_output_bytes: { type: "integer", minimum: 0, maximum: 1_048_576, default: 4096 },
      stop_exit_codes: { type: "array", items: { type: "integer", minimum: 1, maximum: 255 }, uniqueItems: true, default: [] },
      max_concurrent: { type: "integer", minimum: 1, maximum: 64, default: 4 },
      queue_size: { type: "integer", minimum: 0, maximum: 4096, default: 64 },
      async: { type: "boolean", default: false },
    },
  },
  check: (args) => checkArgs(args),
  create(args, ctx): ExecutorPlugin {
    const c = compile(args);
    // A path is relative to the working directory (-d); a bare name is looked up on PATH.
    const command = args.command.includes("/") ? ctx.resolvePath(args.command) : args.command;
    const cwd = args.cwd === undefined ? ctx.services.baseDir : ctx.resolvePath(args.cwd);
    const why = commandProblem(command, process.env);
    if (why !== null) throw new ArgError(why, ["command"]);
    if (!isDirectory(cwd)) throw new ArgError(`${cwd} is not a directory`, ["cwd"]);
    const m = ctx.services.metrics;
    const labels = { plugin_tag: ctx.tag };
    const runs = m.counter("script_run_total", "script: programs started", ["plugin_tag"])(labels);
    const stops = m.counter("script_stop_total", "script: runs whose exit code (stop_exit_codes) stopped the pipeline", ["plugin_tag"])(labels);
    const dropped = m.counter("script_dropped_total", "script: runs not started because max_concurrent runs were busy and queue_size more waited, or the plugin was stopping", ["plugin_tag"])(labels);
    const errorCell = m.counter("script_error_total", "script: runs that failed, by reason (exit, timeout, signal, spawn, cancelled)", ["plugin_tag", "reason"]);
    const failures = new HookFailureLog(ctx.log, "script failed", ctx.failureSummaryMs, (reason) => (reason === "dropped" ? dropped : errorCell({ ...labels, reason })));
    const queued = m.gauge("script_queued", "script: runs waiting for a free place (at most queue_size)", ["plugin_tag"])(labels);
    const queue = new WorkQueue(args.queue_size, args.max_concurrent, () => dropped.value++, queued);
    const stopCodes = new Set(args.stop_exit_codes);
    const keys = c.set.keys;
    const log = ctx.log;
    const full = new HookError("max_concurrent runs are busy and queue_size more wait; the run was dropped", "dropped");

    /** One run for captured values: its step (Next or Stop); a failure rejects with a HookError, counted and logged. */
    const run = async (values: string[], asked: number, signal: AbortSignal): Promise<Step> => {
      const left = c.timeoutMs - (performance.now() - asked);
      const env: NodeJS.ProcessEnv = { ...process.env };
      keys.forEach((k, i) => (env[envName(k)] = values[i]));
      for (const [name, t] of c.env) env[name] = render(t, values);
      let r: RunResult;
      try {
        if (left <= 0) throw new HookError(`waited ${c.timeoutMs}ms for a free run (max_concurrent) without starting`, "timeout");
        runs.value++;
        r = await runProgram({ command, args: c.args.map((t) => render(t, values)), env, cwd, input: stdinJson(keys, values), timeoutMs: left, maxOutputBytes: args.max_output_bytes, signal });
      } catch (err) {
        const e = err instanceof HookError ? err : new HookError(`${command} could not be started: ${(err as Error).message}`, "spawn");
        failures.record(e, { command });
        throw e;
      }
      if (log.isLevelEnabled("debug")) log.debug({ command, code: r.code, signal: r.signal, stdout: r.stdout, stderr: r.stderr, truncated: r.truncated }, "script finished");
      const e = failure(r, c.timeoutMs, stopCodes);
      if (e !== null) {
        failures.record(e, { command, code: r.code, stderr: r.stderr.slice(0, 512) });
        throw e;
      }
      if (r.code !== 0) {
        stops.value++;
        return Step.Stop;
      }
      return Step.Next;
    };

    const execute = (dns: DnsContext): StepResult => {
      const asked = performance.now();
      if (args.async) {
        if (queue.full) {
          failures.record(full, { command });
          return failedStep(args.error_mode, full);
        }
        const values = c.set.capture(dns);
        queue.offer((signal) => run(values, asked, signal).then(() => undefined, () => undefined));
        return Step.Next;
      }
      const values = c.set.capture(dns);
      let step: Step = Step.Next;
      const started = queue.submit(async (signal) => {
        step = await run(values, asked, dns.signal ? AbortSignal.any([signal, dns.signal]) : signal);
      });
      if (started === null) {
        failures.record(full, { command });
        return failedStep(args.error_mode, full);
      }
      return started.then(
        () => step,
        (err: unknown) => failedStep(args.error_mode, err instanceof HookError ? err : new HookError(String(err), "spawn")),
      );
    };

    return {
      execute,
      async destroy(): Promise<void> {
        await queue.close(c.timeoutMs);
        failures.close();
      },
    };
  },
});
