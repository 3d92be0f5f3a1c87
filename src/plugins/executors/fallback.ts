// `fallback`: runs a primary executor and brings in a secondary when the primary is slow or fails.

import type { DnsContext } from "../../engine/context.js";
import { isPromise, Step, type Executor, type StepResult } from "../../engine/types.js";
import type { Cell } from "../../observability/metrics.js";
import { ArgError, definePlugin, type ArgProblem } from "../../registry/types.js";

interface FallbackArgs {
  primary: string;
  secondary: string;
  /** Milliseconds. */
  threshold: number;
  always_standby: boolean;
  short_circuit: boolean;
}

const TAG = /^\$?[^\s/?#$&]+$/;
/** Branch tags are bare; a leading `$` is tolerated. */
const bareTag = (t: string): string => (t.startsWith("$") ? t.slice(1) : t);

/** A branch either produced a response or failed with a reason. */
type Outcome = { ok: true; branch: DnsContext } | { ok: false; reason: string };

/** Runs one branch on its own copy of the context; success means no error and a response. */
function runBranch(exec: Executor, ctx: DnsContext): Outcome | Promise<Outcome> {
  const branch = ctx.copy();
  const settle = (): Outcome => (branch.response !== null ? { ok: true, branch } : { ok: false, reason: "no response" });
  let res: StepResult;
  try {
    res = exec.execute(branch, null);
  } catch (err) {
    return { ok: false, reason: (err as Error).message };
  }
  if (!isPromise(res)) return settle();
  return res.then(settle, (err: unknown) => ({ ok: false, reason: err instanceof Error ? err.message : String(err) }));
}

class BothFailedError extends Error {
  constructor(primary: string, secondary: string, primaryReason: string, secondaryReason: string) {
    super(`fallback: both branches failed (primary '${primary}': ${primaryReason}; secondary '${secondary}': ${secondaryReason})`);
    this.name = "BothFailedError";
  }
}

interface Counters {
  primary: Cell;
  primaryError: Cell;
  secondary: Cell;
}

class Fallback implements Executor {
  private readonly done: Step;

  constructor(
    private readonly args: FallbackArgs,
    private readonly primary: Executor,
    private readonly secondary: Executor,
    private readonly counters: Counters,
  ) {
    this.done = args.short_circuit ? Step.Stop : Step.Next;
  }

  execute(ctx: DnsContext): StepResult {
    this.counters.primary.value++;
    if (this.args.always_standby) return this.standby(ctx);
    const first = runBranch(this.primary, ctx);
    if (!isPromise(first)) {
      if (first.ok) return this.win(ctx, first.branch);
      this.counters.primaryError.value++;
      return this.onlySecondary(ctx, first.reason);
    }
    return this.race(ctx, first);
  }

  private win(ctx: DnsContext, branch: DnsContext): Step {
    ctx.adopt(branch);
    return this.done;
  }

  private startSecondary(ctx: DnsContext): Outcome | Promise<Outcome> {
    this.counters.secondary.value++;
    return runBranch(this.secondary, ctx);
  }

  /** The primary failed before the secondary started: the secondary alone decides. */
  private onlySecondary(ctx: DnsContext, primaryReason: string): StepResult {
    const second = this.startSecondary(ctx);
    const decide = (o: Outcome): Step => {
      if (o.ok) return this.win(ctx, o.branch);
      throw new BothFailedError(this.args.primary, this.args.secondary, primaryReason, o.reason);
    };
    return isPromise(second) ? second.then(decide) : decide(second);
  }

  /** Normal mode: the secondary starts at the threshold or when the primary fails; first success wins. */
  private race(ctx: DnsContext, first: Promise<Outcome>): Promise<Step> {
    return new Promise<Step>((resolve, reject) => {
      let settled = false;
      let primaryReason: string | null = null;
      let secondaryReason: string | null = null;
      let secondaryStarted = false;
      const finish = (o: Outcome): boolean => {
        if (settled || !o.ok) return false;
        settled = true;
        clearTimeout(timer);
        resolve(this.win(ctx, o.branch));
        return true;
      };
      const bothFailed = (): void => {
        if (settled || primaryReason === null || secondaryReason === null) return;
        settled = true;
        reject(new BothFailedError(this.args.primary, this.args.secondary, primaryReason, secondaryReason));
      };
      const startSecondary = (): void => {
        if (secondaryStarted || settled) return;
        secondaryStarted = true;
        clearTimeout(timer);
        const onSecondary = (o: Outcome): void => {
          if (finish(o) || o.ok) return;
          secondaryReason = o.reason;
          bothFailed();
        };
        const second = this.startSecondary(ctx);
        if (isPromise(second)) void second.then(onSecondary);
        else onSecondary(second);
      };
      const timer = setTimeout(startSecondary, this.args.threshold);
      void first.then((o) => {
        if (finish(o) || o.ok) return;
        this.counters.primaryError.value++;
        primaryReason = o.reason;
        startSecondary();
        bothFailed();
      });
    });
  }

  /** always_standby: both start now; a secondary success waits for the threshold or a primary failure. */
  private standby(ctx: DnsContext): StepResult {
    const first = runBranch(this.primary, ctx);
    if (!isPromise(first) && first.ok) return this.win(ctx, first.branch);
    const second = this.startSecondary(ctx);
    if (!isPromise(first) && !first.ok) {
      this.counters.primaryError.value++;
      const decide = (o: Outcome): Step => {
        if (o.ok) return this.win(ctx, o.branch);
        throw new BothFailedError(this.args.primary, this.args.secondary, first.reason, o.reason);
      };
      return isPromise(second) ? second.then(decide) : decide(second);
    }
    return new Promise<Step>((resolve, reject) => {
      let settled = false;
      let thresholdPassed = false;
      let primaryReason: string | null = null;
      let secondaryReason: string | null = null;
      let held: DnsContext | null = null;
      const win = (branch: DnsContext): void => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        resolve(this.win(ctx, branch));
      };
      const check = (): void => {
        if (settled) return;
        if (held !== null && (thresholdPassed || primaryReason !== null)) win(held);
        else if (primaryReason !== null && secondaryReason !== null) {
          settled = true;
          clearTimeout(timer);
          reject(new BothFailedError(this.args.primary, this.args.secondary, primaryReason, secondaryReason));
        }
      };
      const timer = setTimeout(() => {
        thresholdPassed = true;
        check();
      }, this.args.threshold);
      void first.then((o) => {
        if (o.ok) return win(o.branch);
        this.counters.primaryError.value++;
        primaryReason = o.reason;
        check();
      });
      const onSecondary = (o: Outcome): void => {
        if (o.ok) held = o.branch;
        else secondaryReason = o.reason;
        check();
      };
      if (isPromise(second)) void second.then(onSecondary);
      else onSecondary(second);
    });
  }
}

function problems(args: FallbackArgs): ArgProblem[] {
  const out: ArgProblem[] = [];
  for (const field of ["primary", "secondary"] as const) {
    if (!TAG.test(args[field])) out.push({ path: [field], message: `'${args[field]}' is not an executor tag` });
  }
  if (out.length === 0 && bareTag(args.primary) === bareTag(args.secondary)) {
    out.push({ path: ["secondary"], message: "secondary must differ from primary" });
  }
  return out;
}

export const fallback = definePlugin<FallbackArgs, "executor">({
  type: "fallback",
  kind: "executor",
  feature: "core",
  summary: "Runs a primary executor; brings in a secondary when the primary is slow (threshold) or fails.",
  schema: {
    type: "object",
    additionalProperties: false,
    required: ["primary", "secondary"],
    properties: {
      primary: { type: "string", minLength: 1 },
      secondary: { type: "string", minLength: 1 },
      // Milliseconds; 0 is refused rather than silently meaning the default.
      threshold: { type: "integer", minimum: 1, maximum: 600_000, default: 500 },
      always_standby: { type: "boolean", default: false },
      short_circuit: { type: "boolean", default: false },
    },
  },
  check: problems,
  dependencies: (args) =>
    problems(args).length > 0
      ? []
      : [
          { argsPath: ["primary"], target: bareTag(args.primary), kind: "executor" },
          { argsPath: ["secondary"], target: bareTag(args.secondary), kind: "executor" },
        ],
  create(args, ctx) {
    const bad = problems(args);
    if (bad.length > 0) throw new ArgError(bad[0].message, bad[0].path);
    const labels = { plugin_tag: ctx.tag };
    const m = ctx.services.metrics;
    const counters: Counters = {
      primary: m.counter("fallback_primary_total", "fallback: queries started on the primary", ["plugin_tag"])(labels),
      primaryError: m.counter("fallback_primary_error_total", "fallback: primary runs that failed or gave no response", ["plugin_tag"])(labels),
      secondary: m.counter("fallback_secondary_total", "fallback: secondary runs started", ["plugin_tag"])(labels),
    };
    const primary = ctx.executor(bareTag(args.primary));
    const secondary = ctx.executor(bareTag(args.secondary));
    return new Fallback(args, primary, secondary, counters);
  },
});
