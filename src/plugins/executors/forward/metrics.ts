// forward's metrics: per call, per upstream exchange, and per upstream connection.

import type { DnsResponse } from "../../../dns/response.js";
import { UpstreamError, type CancelScope } from "../../../engine/upstream/exchange.js";
import type { Entrant } from "../../../engine/upstream/racing.js";
import type { Upstream } from "../../../engine/upstream/upstream.js";
import { DNS_DURATION_BUCKETS, type Cell, type MetricsHub, type Observer } from "../../../observability/metrics.js";

export interface ConnStats {
  opened: Cell;
  resumed: Cell;
}

export interface CallStats {
  query: Cell;
  success: Cell;
  error: Cell;
  timeout: Cell;
  duration: Observer;
}

export function callStats(metrics: MetricsHub, prefix: string, what: string, labels: Record<string, string>): CallStats {
  const names = Object.keys(labels);
  const c = (suffix: string, help: string): Cell => metrics.counter(`${prefix}_${suffix}`, help, names)(labels);
  return {
    query: c("query_total", `${what}: queries started`),
    success: c("success_total", `${what}: queries that produced an answer`),
    error: c("error_total", `${what}: queries that failed (timeouts included)`),
    timeout: c("timeout_total", `${what}: queries that failed by timing out`),
    duration: metrics.histogram(`${prefix}_query_duration_seconds`, `${what}: time to an answer, seconds`, names, DNS_DURATION_BUCKETS)(labels),
  };
}

export function connStats(metrics: MetricsHub, labels: Record<string, string>): ConnStats {
  const names = Object.keys(labels);
  return {
    opened: metrics.counter("forward_upstream_connections_total", "Per upstream: connections opened (TCP, TLS, or HTTP/2 sessions for https://)", names)(labels),
    resumed: metrics.counter("forward_upstream_tls_resumed_total", "Per upstream: TLS handshakes that resumed an earlier session", names)(labels),
  };
}

/** Calls of a `consensus` forward in which no verdict had a majority. */
export function noConsensusCell(metrics: MetricsHub, tag: string): Cell {
  return metrics.counter("forward_no_consensus_total", "response_selection consensus: calls that failed because no answer had a majority", ["plugin_tag"])({ plugin_tag: tag });
}

/** An upstream that counts its own exchanges. */
export class MeteredUpstream implements Entrant {
  constructor(
    readonly upstream: Upstream,
    private readonly stats: CallStats,
  ) {}

  get name(): string {
    return this.upstream.name;
  }

  get timeoutMs(): number {
    return this.upstream.timeoutMs;
  }

  exchange(query: Buffer, scope: CancelScope | null, budgetMs?: number): Promise<DnsResponse> {
    const s = this.stats;
    s.query.value++;
    const started = performance.now();
    return this.upstream.exchange(query, scope, budgetMs).then(
      (answer) => {
        s.success.value++;
        s.duration.observe((performance.now() - started) / 1000);
        return answer;
      },
      (err: unknown) => {
        // A race loser that was cancelled neither succeeded nor failed.
        const kind = err instanceof UpstreamError ? err.kind : "error";
        if (kind !== "cancelled") s.error.value++;
        if (kind === "timeout") s.timeout.value++;
        throw err;
      },
    );
  }
}
