// Failed queries (answered SERVFAIL because an executor failed) are counted per reason, not logged
// one by one: an upstream outage used to write a warning per query from the DNS thread. Now the
// first failure of each reason in a period is logged at once, with its query and error; the rest
// are counted (`server_query_failures_total{reason}`), and when the period ends one line sums
// them up. At debug level every failure is logged too. A period starts with a failure and lasts `log.failure_summary` (10 s by default); with
// no failure nothing is logged and no timer runs.

import { ForwardError } from "../../engine/upstream/racing.js";
import { UpstreamError } from "../../engine/upstream/exchange.js";
import { CallDepthError } from "../../engine/sequence.js";
import type { Logger } from "../../observability/logger.js";
import type { Cell, MetricsHub } from "../../observability/metrics.js";
import type { CreateContext } from "../../registry/types.js";

export const FAILURE_REASONS = ["upstream_timeout", "upstream_failed", "call_depth", "encode", "executor"] as const;
export type FailureReason = (typeof FAILURE_REASONS)[number];

/** A failure's reason: a short, fixed set (a metric label), whatever the error's message says. */
export function failureReason(err: unknown): FailureReason {
  if (err instanceof ForwardError) return err.timedOut ? "upstream_timeout" : "upstream_failed";
  if (err instanceof UpstreamError) return err.kind === "timeout" ? "upstream_timeout" : "upstream_failed";
  if (err instanceof CallDepthError) return "call_depth";
  return "executor";
}

/** The error as logged (built only when a line is written: a failed query costs a counter otherwise). */
const errText = (reason: FailureReason, err: unknown): string => `${reason === "encode" ? "response could not be encoded: " : ""}${err instanceof Error ? err.message : String(err)}`;

/** The per-reason counters of one server plugin (shared by its protocols). */
export function failureCounters(metrics: MetricsHub, tag: string): Record<FailureReason, Cell> {
  const counter = metrics.counter("server_query_failures_total", "Queries answered SERVFAIL because an executor failed, by reason", ["plugin_tag", "reason"]);
  return Object.fromEntries(FAILURE_REASONS.map((reason) => [reason, counter({ plugin_tag: tag, reason })])) as Record<FailureReason, Cell>;
}

export class FailureLog {
  /** Failures of each reason in the current period (the first was logged). */
  private readonly counts = new Map<FailureReason, number>();
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly log: Logger,
    private readonly counters: Record<FailureReason, Cell>,
    private readonly periodMs: number,
  ) {}

  record(reason: FailureReason, qname: string, qtype: number, err: unknown): void {
    this.counters[reason].value++;
    // Every failure with its error at debug level (nothing is built unless debug is on).
    if (this.log.isLevelEnabled("debug")) this.log.debug({ reason, qname, qtype, err: errText(reason, err) }, "query failed");
    const n = this.counts.get(reason) ?? 0;
    this.counts.set(reason, n + 1);
    if (n > 0) return;
    this.log.warn({ reason, qname, qtype, err: errText(reason, err), summary_every_ms: this.periodMs }, "query failed; answering SERVFAIL");
    if (this.timer === null) {
      this.timer = setTimeout(() => this.summarise(), this.periodMs);
      this.timer.unref();
    }
  }

  /** Ends the period: one line for the failures not logged one by one. */
  private summarise(): void {
    this.timer = null;
    const more = [...this.counts].filter(([, n]) => n > 1).map(([reason, n]) => [reason, n - 1] as const);
    this.counts.clear();
    if (more.length === 0) return;
    const total = more.reduce((sum, [, n]) => sum + n, 0);
    this.log.warn({ failed: Object.fromEntries(more), period_ms: this.periodMs }, `${total} more queries failed in the last ${this.periodMs / 1000}s (${more.map(([r, n]) => `${r}: ${n}`).join(", ")}); answered SERVFAIL`);
  }

  /** The last summary now (the server is going away). */
  close(): void {
    if (this.timer === null) return;
    clearTimeout(this.timer);
    this.summarise();
  }
}

/** A server plugin's failure log (one for all its protocols and routes), closed with the plugin. */
export const serverFailureLog = (ctx: CreateContext): FailureLog => new FailureLog(ctx.log, failureCounters(ctx.services.metrics, ctx.tag), ctx.failureSummaryMs);
