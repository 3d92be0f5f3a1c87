// A sequence compiled into closures. Rules run in order; matchers are ANDed left to right and stop
// at the first miss; executors return Next/Stop/Return. The loop stays synchronous until an
// executor returns a promise, so queries answered locally never touch the microtask queue.

import { negativeSoaBlock } from "../dns/negative.js";
import { EMPTY_BLOCK } from "../dns/reply.js";
import type { DnsContext, PathEvent } from "./context.js";
import type { ExecExpr } from "./expr.js";
import { isPromise, MAX_CALL_DEPTH, Step, type Continuation, type Executor, type Matcher, type StepResult } from "./types.js";

export interface CompiledMatcher {
  tag: string;
  /** Includes the reference's own negation. */
  match: (ctx: DnsContext) => boolean;
}

export type RuleAction = (ctx: DnsContext, next: Continuation) => StepResult;

export interface CompiledRule {
  matchers: CompiledMatcher[];
  action: RuleAction;
  /** The rule's result is the sequence's result: continuation executors (they run the rest themselves) and goto. */
  continuation: boolean;
  /** Path event identity: executor tag or builtin name. */
  kind: "executor" | "builtin";
  tag: string;
}

/** A query nested sequences deeper than MAX_CALL_DEPTH; it fails (SERVFAIL) instead of exhausting the JS stack. */
export class CallDepthError extends Error {
  constructor(tag: string) {
    super(`sequence '${tag}' would nest deeper than the maximum call depth of ${MAX_CALL_DEPTH}`);
    this.name = "CallDepthError";
  }
}

const OUTCOME: Record<Step, PathEvent["outcome"]> = { [Step.Next]: "next", [Step.Stop]: "stop", [Step.Return]: "return" };

/** Turns a parsed builtin (or a resolved executor) into a rule action. */
export function builtinAction(e: ExecExpr, target: Executor | null): RuleAction {
  if ("ref" in e || "quick" in e) throw new Error("not a builtin");
  switch (e.builtin) {
    case "accept":
      return () => Step.Stop;
    case "return":
      return () => Step.Return;
    case "reject": {
      const rcode = e.rcode;
      if (e.soaTtl === null) {
        return (ctx) => {
          ctx.reply(rcode);
          return Step.Stop;
        };
      }
      // The SOA's owner points at the question name: a query without a question gets none.
      const soa = negativeSoaBlock(e.soaTtl);
      return (ctx) => {
        if (ctx.query.questions.length > 0) ctx.reply(rcode, EMPTY_BLOCK, soa);
        else ctx.reply(rcode);
        return Step.Stop;
      };
    }
    case "mark": {
      const marks = e.marks;
      return (ctx) => {
        for (const m of marks) ctx.addMark(m);
        return Step.Next;
      };
    }
    case "jump": {
      const seq = target as Executor;
      // Only Stop ends the caller; Next and Return both resume it.
      const resume = (s: Step): Step => (s === Step.Stop ? Step.Stop : Step.Next);
      return (ctx) => {
        const r = seq.execute(ctx, null);
        return isPromise(r) ? r.then(resume) : resume(r);
      };
    }
    case "goto": {
      const seq = target as Executor;
      return (ctx) => seq.execute(ctx, null);
    }
  }
}

export function executorAction(ex: Executor): RuleAction {
  return (ctx, next) => ex.execute(ctx, next);
}

type Test = (ctx: DnsContext) => boolean;

/** A rule's matchers ANDed into one function (used when no execution path is recorded). */
function conjunction(ms: CompiledMatcher[]): Test | null {
  if (ms.length === 0) return null;
  if (ms.length === 1) return ms[0].match;
  const fns = ms.map((m) => m.match);
  return (ctx) => {
    for (let i = 0; i < fns.length; i++) if (!fns[i](ctx)) return false;
    return true;
  };
}

export class CompiledSequence implements Executor {
  private readonly conts: Continuation[];
  private readonly tests: (Test | null)[];

  constructor(
    readonly tag: string,
    private readonly rules: CompiledRule[],
  ) {
    // One continuation per rule, made once: "the rules after rule i".
    this.conts = rules.map((_, i) => (ctx: DnsContext) => this.runFrom(ctx, i + 1));
    this.tests = rules.map((r) => conjunction(r.matchers));
  }

  execute(ctx: DnsContext): StepResult {
    const depth = ctx.callDepth;
    if (depth >= MAX_CALL_DEPTH) throw new CallDepthError(this.tag);
    ctx.callDepth = depth + 1;
    let res: StepResult;
    try {
      res = this.runFrom(ctx, 0);
    } catch (err) {
      ctx.callDepth = depth;
      throw err;
    }
    // A promise leaves the depth raised: the caller's runFrom puts back its own level when it resumes.
    if (!isPromise(res)) ctx.callDepth = depth;
    return res;
  }

  runFrom(ctx: DnsContext, start: number): StepResult {
    const rules = this.rules;
    const tests = this.tests;
    const level = ctx.callDepth;
    for (let i = start; i < rules.length; i++) {
      const rule = rules[i];
      const test = tests[i];
      if (test !== null && !(ctx.path === null ? test(ctx) : this.matches(rule, ctx, i))) continue;
      const res = ctx.path === null ? rule.action(ctx, this.conts[i]) : this.recorded(rule, ctx, i);
      if (rule.continuation) return res;
      if (isPromise(res)) return this.resume(res, ctx, level, i + 1);
      if (res !== Step.Next) return res;
    }
    return Step.Next;
  }

  // Apart from runFrom(): a closure there would make every call allocate its scope, synchronous rules included.
  private resume(res: Promise<Step>, ctx: DnsContext, level: number, after: number): Promise<Step> {
    return res.then((s) => {
      ctx.callDepth = level;
      return s === Step.Next ? this.runFrom(ctx, after) : s;
    });
  }

  private matches(rule: CompiledRule, ctx: DnsContext, index: number): boolean {
    const ms = rule.matchers;
    for (let j = 0; j < ms.length; j++) {
      const ok = ms[j].match(ctx);
      if (ctx.path !== null) ctx.path.push({ sequenceTag: this.tag, nodeIndex: index, kind: "matcher", tag: ms[j].tag, outcome: ok ? "matched" : "not_matched" });
      if (!ok) return false;
    }
    return true;
  }

  /** Runs a rule while writing its execution-path events. */
  private recorded(rule: CompiledRule, ctx: DnsContext, index: number): StepResult {
    const path = ctx.path as PathEvent[];
    const event = (outcome: PathEvent["outcome"]): void => {
      path.push({ sequenceTag: this.tag, nodeIndex: index, kind: rule.kind, tag: rule.tag, outcome });
    };
    if (rule.kind === "executor") event("entered");
    let res: StepResult;
    try {
      res = rule.action(ctx, this.conts[index]);
    } catch (err) {
      event("error");
      throw err;
    }
    if (!isPromise(res)) {
      event(OUTCOME[res]);
      return res;
    }
    return res.then(
      (s) => {
        event(OUTCOME[s]);
        return s;
      },
      (err: unknown) => {
        event("error");
        throw err;
      },
    );
  }
}

/** Wraps a matcher (already carrying mode and negation) with the tag it reports under. */
export function compiledMatcher(tag: string, m: Matcher): CompiledMatcher {
  return { tag, match: m.match.bind(m) };
}
