// One DoH connection's accounting, and the listener's limits and metrics. A request holds its
// connection busy (not evictable at max_conns, not idle) only once its body is complete: a request
// whose body never arrives costs its sender the slot, not everyone else. A request abandoned before
// its body was complete (reset at request_timeout, or by the client) does not refresh the
// connection either, so reopening such requests does not keep a connection alive past idle_timeout.
// The body bytes a connection's unfinished HTTP/2 requests hold together are bounded.

import http2 from "node:http2";
import type net from "node:net";
import type { Cell, MetricsHub } from "../../observability/metrics.js";

/** Body bytes of unfinished HTTP/2 requests one connection may hold; the stream passing it is reset. */
export const MAX_CONN_BODY_BYTES = 256 * 1024;

export interface HttpLimits {
  maxConns: number;
  idleMs: number;
  requestMs: number;
}

export interface HttpStats {
  open: Cell;
  evicted: Cell;
  refused: Cell;
  closedIdle: Cell;
  closedRequest: Cell;
  closedStalled: Cell;
}

export function httpStats(metrics: MetricsHub, tag: string): HttpStats {
  const labels = { plugin_tag: tag };
  const names = ["plugin_tag"] as const;
  const closed = metrics.counter("server_http_conn_closed_total", "DoH connections (or HTTP/2 streams, reason request) closed by a limit: idle, request (request_timeout) or stalled (requests unfinished for idle_timeout)", ["plugin_tag", "reason"]);
  return {
    open: metrics.gauge("server_http_connections", "Open DoH connections", names)(labels),
    evicted: metrics.counter("server_http_conn_evicted_total", "Idle DoH connections closed to admit a new one at max_conns", names)(labels),
    refused: metrics.counter("server_http_conn_refused_total", "DoH connections refused at max_conns because none was idle", names)(labels),
    closedIdle: closed({ ...labels, reason: "idle" }),
    closedRequest: closed({ ...labels, reason: "request" }),
    closedStalled: closed({ ...labels, reason: "stalled" }),
  };
}

export function detachedStats(): HttpStats {
  return { open: { value: 0 }, evicted: { value: 0 }, refused: { value: 0 }, closedIdle: { value: 0 }, closedRequest: { value: 0 }, closedStalled: { value: 0 } };
}

export class HttpConn {
  /** Requests with their whole body (or none) that are not finished: they keep the connection busy. */
  active = 0;
  /** When the last such request finished, or the connection opened. */
  lastDone: number;
  /** Handed to Node's http or http2 server (TLS handshake and protocol detection done). */
  ready = false;
  session: http2.ServerHttp2Session | null = null;
  /** HTTP/2 streams whose request body is being read, with when it started (not counted in `active`). */
  readonly bodies = new Map<http2.ServerHttp2Stream, number>();
  /** Bytes received so far of the bodies in `bodies`. */
  bodyBytes = 0;
  /** When the HTTP/1.1 request being read started its body; 0 when none is being read. */
  h1BodySince = 0;
  pausedByUs = false;
  /** An idle HTTP/2 session sent GOAWAY and is closing; the next sweep ends it if it has not. */
  closing = false;
  closed = false;

  constructor(
    readonly raw: net.Socket,
    readonly opened: number,
    /** The peer, or the client a PROXY header named. */
    public remoteAddress: string,
    public remotePort: number,
  ) {
    this.lastDone = opened;
  }
}

export const CONN = Symbol("doh-conn");
/** Set on a stream once its body is complete and it counts in its connection's `active`. */
const COUNTED = Symbol("doh-counted");
/** Body bytes of a stream still in its connection's `bodies`. */
const BYTES = Symbol("doh-body-bytes");
export type Tagged<T> = T & { [CONN]?: HttpConn; [COUNTED]?: boolean; [BYTES]?: number };

/** The stream no longer waits for its body (read, reset or closed); false when it was not waiting. */
export function stopWaiting(conn: HttpConn, stream: Tagged<http2.ServerHttp2Stream>): boolean {
  if (!conn.bodies.delete(stream)) return false;
  conn.bodyBytes -= stream[BYTES] ?? 0;
  stream[BYTES] = 0;
  return true;
}

/**
 * When the oldest request body this connection is still receiving started (HTTP/2 streams in
 * `bodies`, which keeps them in the order they started, or the HTTP/1.1 request); 0 when none.
 */
export function bodyWaitingSince(conn: HttpConn): number {
  for (const started of conn.bodies.values()) return started;
  return conn.h1BodySince;
}

/** A counted request finished: the connection is fresh again. */
export function finished(conn: HttpConn): void {
  conn.active--;
  conn.lastDone = Date.now();
}

/**
 * Starts the accounting of an HTTP/2 stream (shared listeners, not closures: this runs for every
 * request). A stream without a body counts at once; one with a body when its body has been read.
 */
export function trackStream(conn: HttpConn, stream: Tagged<http2.ServerHttp2Stream>): void {
  stream[CONN] = conn;
  stream.on("error", ignore);
  stream.on("close", streamClosed);
  if (stream.endAfterHeaders) {
    stream[COUNTED] = true;
    conn.active++;
    return;
  }
  conn.bodies.set(stream, Date.now());
  stream.on("data", bodyChunk);
  stream.once("end", bodyRead);
}

function bodyChunk(this: Tagged<http2.ServerHttp2Stream>, chunk: Buffer): void {
  const conn = this[CONN];
  if (!conn?.bodies.has(this)) return;
  this[BYTES] = (this[BYTES] ?? 0) + chunk.length;
  conn.bodyBytes += chunk.length;
  if (conn.bodyBytes <= MAX_CONN_BODY_BYTES) return;
  stopWaiting(conn, this);
  this.close(http2.constants.NGHTTP2_ENHANCE_YOUR_CALM);
}

function streamClosed(this: Tagged<http2.ServerHttp2Stream>): void {
  const conn = this[CONN];
  if (!conn) return;
  stopWaiting(conn, this);
  if (this[COUNTED]) finished(conn);
}

function bodyRead(this: Tagged<http2.ServerHttp2Stream>): void {
  const conn = this[CONN];
  // Not waiting any more (reset by the sweep, or closed): it never counts.
  if (!conn || !stopWaiting(conn, this)) return;
  this[COUNTED] = true;
  conn.active++;
}

/** An HTTP/1.1 request carries a body (it counts once that body is read). */
export function hasBody(headers: { "content-length"?: string; "transfer-encoding"?: string }): boolean {
  const length = headers["content-length"];
  return headers["transfer-encoding"] !== undefined || (length !== undefined && length !== "0");
}

export function ignore(): void {
  /* stream errors (a reset by the client) end the stream; its 'close' does the accounting */
}
