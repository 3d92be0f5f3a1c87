// DNS over TCP (or TLS: DoT) to one upstream address through a bounded pool of reused connections.
// Without pipelining a connection carries one query at a time; with it, many, matched by ID.
// A query that waits for a free connection waits in a bounded queue; a query caught on a reused
// connection that the upstream closed (the usual idle-close race) moves once to another one.

import net from "node:net";
import type { DnsResponse } from "../../dns/response.js";
import type { PendingSocket } from "../../net/pending-socket.js";
import { acceptAnswer, freeId, packetWithId, UpstreamError, type Ticket } from "./exchange.js";
import { connectTls, tlsFailure, type TlsClientSetup } from "./tls-client.js";

const DOT_ALPN = ["dot"];

/** Queries in flight on one pipelined connection. */
const MAX_PIPELINE = 1024;
/** Queries queued for a connection slot, per pool. */
const MAX_WAITERS = 1024;
/** A kept connection (min_conns) that could not be made is tried again after this, doubling up to the cap. */
const REOPEN_FIRST_MS = 1_000;
const REOPEN_MAX_MS = 30_000;

/** A connection as the pool uses it: a socket, or a stand-in while a proxy connects. */
export type StreamSocket = net.Socket | PendingSocket;
/** Opens the TCP connection to host:port another way than net.connect (from a bind address, through a proxy). */
export type Dialer = (host: string, port: number) => StreamSocket;

export interface TcpPoolOptions {
  host: string;
  port: number;
  family: 4 | 6;
  maxConns: number;
  /** 0 closes a connection as soon as it has nothing in flight. */
  idleTimeoutMs: number;
  pipeline: boolean;
  connectTimeoutMs: number;
  /** DoT: connections are TLS with this setup. */
  tls?: TlsClientSetup;
  /** Called for each connection opened (metrics). */
  onConnect?: () => void;
  /** Connections kept open even when idle, opened by `fill()` and again when one closes (≤ maxConns). */
  minConns?: number;
  /** How connections are opened; net.connect when absent. */
  dial?: Dialer;
}

interface TcpPending {
  query: Buffer;
  ticket: Ticket;
  resolve(answer: DnsResponse): void;
  reject(err: UpstreamError): void;
  conn: TcpConn | null;
  id: number;
  retried: boolean;
}

class TcpConn {
  readonly socket: StreamSocket;
  readonly pending = new Map<number, TcpPending>();
  /** Answers received so far; a connection that answered before is a reused one. */
  answered = 0;
  connected = false;
  closed = false;
  error: Error | null = null;
  private idleTimer: NodeJS.Timeout | null = null;
  private connectTimer: NodeJS.Timeout | null;
  private rest: Buffer | null = null;

  constructor(
    private readonly pool: TcpPool,
    opts: TcpPoolOptions,
  ) {
    // Queries written before the handshake completes are sent once it has.
    const dialed = opts.dial?.(opts.host, opts.port);
    this.socket = opts.tls ? connectTls(opts.tls, opts.host, opts.port, DOT_ALPN, dialed) : (dialed ?? net.connect({ host: opts.host, port: opts.port, family: opts.family }));
    this.socket.setNoDelay(true);
    this.socket.unref();
    opts.onConnect?.();
    this.connectTimer = setTimeout(() => this.socket.destroy(new Error(`connect timed out after ${opts.connectTimeoutMs}ms`)), opts.connectTimeoutMs);
    this.socket.on(opts.tls ? "secureConnect" : "connect", () => {
      this.connected = true;
      this.clearConnectTimer();
    });
    this.socket.on("data", (chunk: Buffer) => this.onData(chunk));
    this.socket.on("error", (err) => {
      this.error = opts.tls ? new Error(tlsFailure(err)) : err;
    });
    this.socket.on("close", () => {
      this.clearConnectTimer();
      this.stopIdle();
      this.pool.onClosed(this);
    });
  }

  private clearConnectTimer(): void {
    if (this.connectTimer) {
      clearTimeout(this.connectTimer);
      this.connectTimer = null;
    }
  }

  private onData(chunk: Buffer): void {
    const data = this.rest ? Buffer.concat([this.rest, chunk]) : chunk;
    let pos = 0;
    while (data.length - pos >= 2) {
      const len = (data[pos] << 8) | data[pos + 1];
      if (data.length - pos - 2 < len) break;
      // The common case (one whole frame per read) is used in place; otherwise the frame is copied out.
      const frame = pos === 0 && len + 2 === data.length ? data.subarray(2) : Buffer.from(data.subarray(pos + 2, pos + 2 + len));
      pos += 2 + len;
      this.onFrame(frame);
      if (this.closed) return;
    }
    this.rest = pos < data.length ? Buffer.from(data.subarray(pos)) : null;
  }

  private onFrame(frame: Buffer): void {
    if (frame.length < 12) return;
    const id = (frame[0] << 8) | frame[1];
    const p = this.pending.get(id);
    if (!p) return;
    const answer = acceptAnswer(frame, p.query, id);
    if (!answer) return;
    this.pending.delete(id);
    this.answered++;
    p.ticket.release();
    p.resolve(answer);
    this.pool.onFree(this);
  }

  startIdle(ms: number): void {
    this.stopIdle();
    if (ms === 0) {
      this.pool.idleExpired(this);
      return;
    }
    this.idleTimer = setTimeout(() => this.pool.idleExpired(this), ms);
    this.idleTimer.unref();
  }

  stopIdle(): void {
    if (this.idleTimer) {
      clearTimeout(this.idleTimer);
      this.idleTimer = null;
    }
  }
}

export class TcpPool {
  private readonly conns = new Set<TcpConn>();
  private readonly waiters: TcpPending[] = [];
  private closing = false;
  private readonly minConns: number;
  private reopenTimer: NodeJS.Timeout | null = null;
  private reopenDelayMs = REOPEN_FIRST_MS;

  /** Prefix of failure messages: `tcp` or `tls`. */
  private readonly label: string;

  constructor(private readonly opts: TcpPoolOptions) {
    this.label = opts.tls ? "tls" : "tcp";
    this.minConns = Math.min(opts.minConns ?? 0, opts.maxConns);
  }

  /** Opens connections until `minConns` are open or opening. */
  fill(): void {
    while (!this.closing && this.conns.size < this.minConns) this.conns.add(new TcpConn(this, this.opts));
  }

  /** An idle connection's time is up: it closes unless the pool keeps it (min_conns). */
  idleExpired(conn: TcpConn): void {
    if (this.conns.size <= this.minConns && !this.closing) return;
    this.retire(conn);
  }

  /** A kept connection closed: another at once when it had connected, later (backing off) when it never did. */
  private refill(connected: boolean): void {
    if (this.closing || this.conns.size >= this.minConns || this.reopenTimer) return;
    if (connected) {
      this.reopenDelayMs = REOPEN_FIRST_MS;
      return this.fill();
    }
    this.reopenTimer = setTimeout(() => {
      this.reopenTimer = null;
      this.fill();
    }, this.reopenDelayMs);
    this.reopenTimer.unref();
    this.reopenDelayMs = Math.min(this.reopenDelayMs * 2, REOPEN_MAX_MS);
  }

  /** Connections currently open or opening. */
  get size(): number {
    return this.conns.size;
  }

  /** Sends `query` (its ID is replaced by ours) and resolves with the matching answer. */
  exchange(query: Buffer, ticket: Ticket): Promise<DnsResponse> {
    return new Promise<DnsResponse>((resolve, reject) => {
      if (ticket.reason) return reject(ticket.reason);
      if (this.closing) return reject(new UpstreamError(`${this.label}: upstream closed`));
      const p: TcpPending = { query, ticket, resolve, reject, conn: null, id: -1, retried: false };
      ticket.wait((reason) => this.abandon(p, reason));
      this.dispatch(p);
    });
  }

  private dispatch(p: TcpPending): void {
    const conn = this.pick();
    if (conn) this.assign(conn, p);
    else if (this.waiters.length >= MAX_WAITERS) this.fail(p, new UpstreamError(`${this.label}: too many queries waiting for a connection`));
    else this.waiters.push(p);
  }

  /** A connection with room for one more query, opening one when that is allowed and useful. */
  private pick(): TcpConn | null {
    let best: TcpConn | null = null;
    for (const c of this.conns) {
      const load = c.pending.size;
      if (this.opts.pipeline) {
        if (load < MAX_PIPELINE && (best === null || load < best.pending.size)) best = c;
      } else if (load === 0) {
        if (c.connected) return c;
        best ??= c;
      }
    }
    if (best && (best.pending.size === 0 || this.conns.size >= this.opts.maxConns)) return best;
    if (this.conns.size < this.opts.maxConns) {
      const conn = new TcpConn(this, this.opts);
      this.conns.add(conn);
      return conn;
    }
    return best;
  }

  private assign(conn: TcpConn, p: TcpPending): void {
    p.conn = conn;
    p.id = freeId(conn.pending);
    conn.pending.set(p.id, p);
    conn.stopIdle();
    conn.socket.write(packetWithId(p.query, p.id, true));
  }

  private fail(p: TcpPending, err: UpstreamError): void {
    p.ticket.release();
    p.reject(err);
  }

  private abandon(p: TcpPending, reason: UpstreamError): void {
    const waiting = this.waiters.indexOf(p);
    if (waiting >= 0) this.waiters.splice(waiting, 1);
    else if (p.conn && p.conn.pending.get(p.id) === p) {
      p.conn.pending.delete(p.id);
      this.onFree(p.conn);
    }
    p.reject(reason);
  }

  /** A query on `conn` finished: hand the room to a waiting query, or let the connection idle. */
  onFree(conn: TcpConn): void {
    if (conn.closed) return;
    const room = (): boolean => (this.opts.pipeline ? conn.pending.size < MAX_PIPELINE : conn.pending.size === 0);
    while (this.waiters.length > 0 && room()) this.assign(conn, this.waiters.shift() as TcpPending);
    if (conn.pending.size === 0) {
      if (this.closing) this.retire(conn);
      else conn.startIdle(this.opts.idleTimeoutMs);
    }
  }

  /** Closes an idle connection. */
  retire(conn: TcpConn): void {
    if (conn.closed || conn.pending.size > 0) return;
    conn.closed = true;
    this.conns.delete(conn);
    conn.socket.destroy();
  }

  onClosed(conn: TcpConn): void {
    const wasOpen = !conn.closed;
    conn.closed = true;
    this.conns.delete(conn);
    const reason = conn.error ? conn.error.message : "connection closed by the upstream";
    const moved = [...conn.pending.values()];
    conn.pending.clear();
    for (const p of moved) {
      p.conn = null;
      if (wasOpen && !this.closing && !p.retried && conn.answered > 0 && !p.ticket.reason) {
        p.retried = true;
        this.dispatch(p);
      } else {
        this.fail(p, new UpstreamError(`${this.label}: ${reason}`));
      }
    }
    this.pump();
    if (this.minConns > 0) this.refill(conn.connected);
  }

  /** Gives queued queries the connections that became possible. */
  private pump(): void {
    while (this.waiters.length > 0 && !this.closing) {
      const conn = this.pick();
      if (!conn) return;
      this.assign(conn, this.waiters.shift() as TcpPending);
    }
  }

  /** Stops taking queries. With `fail`, in-flight ones fail now; otherwise they finish first. */
  close(fail: UpstreamError | null): void {
    this.closing = true;
    if (this.reopenTimer) clearTimeout(this.reopenTimer);
    this.reopenTimer = null;
    const waiting = this.waiters.splice(0);
    for (const p of waiting) this.fail(p, fail ?? new UpstreamError(`${this.label}: upstream closed`));
    for (const conn of [...this.conns]) {
      if (fail) {
        const all = [...conn.pending.values()];
        conn.pending.clear();
        for (const p of all) this.fail(p, fail);
      }
      this.retire(conn);
    }
  }
}
