// Failed queries (answered SERVFAIL because an executor failed) are counted per reason, not logged
// one by one: an upstream outage used to write a warning per query from the DNS thread. Now the
// first failure of each reason in a period is logged at once, with its query and error; the rest
// are counted (`server_query_failures_total{reason}`), and when the period ends one line sums
// them up. At debug level every failure is logged too. A period starts with a failure and lasts `log.failure_summary` (10 s by default); with
// no failure nothing is logged and no timer runs.

import { ForwardError } from "../../engine/upstream/racing.js";
import { UpstreamError } from "../../engine/upstream/exchange.js";
import { CallDepthError } from "../../engine/sequence.js";
import { FailureDigest } from "../../observability/failure-digest.js";
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
  private readonly digest: FailureDigest;

  constructor(
    log: Logger,
    private readonly counters: Record<FailureReason, Cell>,
    periodMs: number,
  ) {
    this.digest = new FailureDigest(log, periodMs, {
      debug: "query failed",
      first: "query failed; answering SERVFAIL",
      more: (total, list, seconds) => `${total} more queries failed in the last ${seconds}s (${list}); answered SERVFAIL`,
    });
  }

  record(reason: FailureReason, qname: string, qtype: number, err: unknown): void {
    this.counters[reason].value++;
    this.digest.record(reason, () => ({ qname, qtype, err: errText(reason, err) }));
  }

  /** The last summary now (the server is going away). */
  close(): void {
    this.digest.close();
  }
}

/** A server plugin's failure log (one for all its protocols and routes), closed with the plugin. */
export const serverFailureLog = (ctx: CreateContext): FailureLog => new FailureLog(ctx.log, failureCounters(ctx.services.metrics, ctx.tag), ctx.failureSummaryMs);
