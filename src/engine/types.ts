// The tiny chain interface every plugin kind implements.

import type { DnsContext } from "./context.js";

/** What an executor tells the sequence running it. */
export const Step = {
  /** Continue with the next rule. */
  Next: 0,
  /** End the whole pipeline. */
  Stop: 1,
  /** End the current sequence; the caller decides whether to resume (jump does, $child does not). */
  Return: 2,
} as const;
export type Step = (typeof Step)[keyof typeof Step];

/**
 * The deepest nesting of sequence runs (jump, goto, `$sequence`) one query may make; `check` refuses
 * deeper chains (counting fallbacks too) and the engine fails a query that goes deeper (SERVFAIL).
 */
export const MAX_CALL_DEPTH = 64;

/** Executors return synchronously when they can; only I/O makes them return a promise. */
export type StepResult = Step | Promise<Step>;

/** The rest of the current sequence, handed to continuation executors (cache, redirect, ...). */
export type Continuation = (ctx: DnsContext) => StepResult;

export interface Executor {
  /** `next` is the remainder of the enclosing sequence, or null when called outside one. */
  execute(ctx: DnsContext, next: Continuation | null): StepResult;
  /** True for continuation executors: the sequence returns their result as its own. */
  readonly continuation?: boolean;
}

export interface Matcher {
  match(ctx: DnsContext): boolean;
}

export interface DomainProvider {
  containsName(name: string): boolean;
}

export interface IpProvider {
  /** `ip` is 4 or 16 bytes, IPv4-mapped IPv6 already unmapped. */
  containsIp(ip: Uint8Array): boolean;
}

export const runNext = (ctx: DnsContext, next: Continuation | null): StepResult => (next ? next(ctx) : Step.Next);

export function isPromise<T>(v: T | Promise<T>): v is Promise<T> {
  return typeof (v as Promise<T> | null)?.then === "function";
}
