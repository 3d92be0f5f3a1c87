// What bounds a DNS stream listener (TCP and DoT) and what it counts: the limits, the fixed
// per-connection bounds, the handler's shape, and the metrics (open connections, evictions,
// refusals, closes by limit, backpressure pauses). The connections themselves: stream-conns.ts.

import type { Cell, MetricsHub } from "../../observability/metrics.js";

export interface Remote {
  address: string;
  port: number;
  /** The TLS server name (SNI) the client asked for, lower-case; absent over plain TCP or without SNI. */
  serverName?: string;
}

/**
 * Answers one frame. `oversized`: the frame was longer than `maxFrame`; `query` then holds only
 * its first 12 bytes (the rest was discarded unread). `reply` with an empty buffer sends nothing,
 * and is a no-op once the connection is gone.
 */
export type StreamHandler = (query: Buffer, remote: Remote, reply: (answer: Buffer) => void, oversized: boolean) => void;

export interface StreamLimits {
  maxConns: number;
  idleMs: number;
  frameMs: number;
  /** Longest frame read whole; longer ones keep their header and the rest is skipped. */
  maxFrame: number;
}

/** Queries of one connection being answered at once; past it the connection is not read. */
export const MAX_INFLIGHT = 128;
/** Unsent answer bytes above which a connection is not read until they drain. */
export const UNSENT_PAUSE_BYTES = 64 * 1024;
/** Unsent answer bytes above which a connection is closed at once (answers still in flight). */
export const UNSENT_CLOSE_BYTES = 1024 * 1024;

export interface StreamStats {
  open: Cell;
  evicted: Cell;
  refused: Cell;
  closedIdle: Cell;
  closedFrame: Cell;
  closedUnsent: Cell;
  paused: Cell;
}

export function streamStats(metrics: MetricsHub, tag: string): StreamStats {
  const labels = { plugin_tag: tag };
  const names = ["plugin_tag"] as const;
  const closed = metrics.counter("server_tcp_conn_closed_total", "Connections closed by a limit: idle, frame (frame_timeout) or unsent (answers not read)", ["plugin_tag", "reason"]);
  return {
    open: metrics.gauge("server_tcp_connections", "Open DNS connections", names)(labels),
    evicted: metrics.counter("server_tcp_conn_evicted_total", "Idle connections closed to admit a new one at max_conns", names)(labels),
    refused: metrics.counter("server_tcp_conn_refused_total", "Connections refused at max_conns because none was idle", names)(labels),
    closedIdle: closed({ ...labels, reason: "idle" }),
    closedFrame: closed({ ...labels, reason: "frame" }),
    closedUnsent: closed({ ...labels, reason: "unsent" }),
    paused: metrics.counter("server_tcp_backpressure_total", "Times a connection stopped being read because its unsent answers passed the bound", names)(labels),
  };
}

export function detachedStats(): StreamStats {
  return { open: { value: 0 }, evicted: { value: 0 }, refused: { value: 0 }, closedIdle: { value: 0 }, closedFrame: { value: 0 }, closedUnsent: { value: 0 }, paused: { value: 0 } };
}
