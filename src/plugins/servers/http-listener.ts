// An HTTP listener for DoH: one TCP port serving HTTP/1.1 and HTTP/2, told apart by ALPN over TLS
// and by the first bytes in cleartext (the HTTP/2 preface; Node's cleartext http2 server alone
// refuses HTTP/1.1). Node's http and http2 servers parse, without listening themselves; connections
// are accepted, counted and bounded here: max_conns (a connection holding an unfinished body evicted
// first, then the one idle longest), idle_timeout, request_timeout (TLS handshake and protocol
// detection, HTTP/1.1 headers and request, HTTP/2 request bodies), at most MAX_INFLIGHT requests per
// connection, and requests that never finish (a client that does not read its answers). A request
// holds its connection busy only once its body is complete (http-conn.ts).

import http, { type IncomingMessage, type ServerResponse } from "node:http";
import http2 from "node:http2";
import type net from "node:net";
import tls from "node:tls";
import type { Cell } from "../../observability/metrics.js";
import { bodyWaitingSince, CONN, detachedStats, finished, hasBody, HttpConn, ignore, stopWaiting, trackStream, type HttpLimits, type HttpStats, type Tagged } from "./http-conn.js";
import { H1Exchange, H2Exchange, sendError, type DohExchange } from "./doh-exchange.js";
import { Listener } from "./listener.js";
import { readStreamHeader, type ProxyPolicy } from "./proxy-protocol.js";
import { MAX_INFLIGHT } from "./stream-limits.js";


export type HttpHandler = (exchange: DohExchange) => void;

/** Largest request header block, HTTP/1.1 and HTTP/2 (a GET of a 4096-byte query is ~5.5 KB). */
const MAX_HEADER_BYTES = 16 * 1024;
/** Memory one HTTP/2 session may hold, MB (nghttp2's buffers and queued output). */
const H2_SESSION_MEMORY_MB = 1;
const H2_ALPN = ["h2", "http/1.1"];
const PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");

/** Node's handshake flag on a TLSSocket (not in the typings). */
type TlsHandshake = tls.TLSSocket & { secureConnecting: boolean };

export class HttpListener extends Listener<HttpHandler> {
  /** Set by the owner that starts last: new connections speak TLS with it; null for cleartext. */
  tls: tls.SecureContext | null = null;
  /** Set by the owner that starts last: new connections may open with a PROXY header; null: never. */
  proxy: ProxyPolicy | null = null;
  limits: HttpLimits = { maxConns: 256, idleMs: 30_000, requestMs: 5_000 };
  stats: HttpStats = detachedStats();
  private readonly conns = new Set<HttpConn>();
  private sweeper: NodeJS.Timeout | null = null;
  private readonly h1: http.Server;
  private readonly h2: http2.Http2Server;

  constructor(
    key: string,
    readonly server: net.Server,
  ) {
    super(key);
    this.h1 = http.createServer({ maxHeaderSize: MAX_HEADER_BYTES, connectionsCheckingInterval: 250 }, (req, res) => this.onRequest(req, res));
    this.h1.keepAliveTimeout = 0;
    // Node checks headersTimeout/requestTimeout only for a server that emitted 'listening'.
    this.h1.emit("listening");
    this.h2 = http2.createServer({
      maxSessionMemory: H2_SESSION_MEMORY_MB,
      maxHeaderListPairs: 64,
      maxSessionRejectedStreams: 100,
      maxSessionInvalidFrames: 100,
      settings: { maxConcurrentStreams: MAX_INFLIGHT, maxHeaderListSize: MAX_HEADER_BYTES, enablePush: false },
    });
    this.h2.on("stream", (stream, headers) => this.onStream(stream, headers));
    this.h2.on("session", (session: Tagged<http2.ServerHttp2Session>) => {
      const conn = this.handing;
      if (!conn) return;
      conn.session = session;
      session[CONN] = conn;
    });
    this.configure(this.limits);
    server.on("connection", (socket: net.Socket) => this.accept(socket));
    server.on("error", () => {
      /* accept failures (EMFILE) concern one connection */
    });
  }

  /** The connection being handed to the http2 server (its 'session' event is synchronous). */
  private handing: HttpConn | null = null;

  address(): { address: string; port: number } {
    const a = this.server.address() as net.AddressInfo;
    return { address: a.address, port: a.port };
  }

  maxConns(): number {
    return this.limits.maxConns;
  }

  get size(): number {
    return this.conns.size;
  }

  /** New limits (a reload's new owner): they apply to open connections too. */
  configure(limits: HttpLimits): void {
    this.limits = { ...limits };
    this.h1.headersTimeout = limits.requestMs;
    this.h1.requestTimeout = limits.requestMs;
    if (this.sweeper) {
      clearInterval(this.sweeper);
      this.sweeper = null;
      this.startSweeper();
    }
  }

  /** Counts into `stats` from now on, moving the open-connection gauge over. */
  useStats(stats: HttpStats): void {
    this.stats.open.value -= this.conns.size;
    stats.open.value += this.conns.size;
    this.stats = stats;
  }

  private accept(raw: net.Socket): void {
    if (this.conns.size >= this.limits.maxConns) {
      const victim = this.idlest();
      if (!victim) {
        this.stats.refused.value++;
        raw.destroy();
        return;
      }
      this.stats.evicted.value++;
      this.drop(victim, null);
    }
    const conn = new HttpConn(raw, Date.now(), raw.remoteAddress ?? "", raw.remotePort ?? 0);
    this.conns.add(conn);
    this.stats.open.value++;
    if (!this.sweeper) this.startSweeper();
    raw.setNoDelay(true);
    raw.on("error", () => raw.destroy());
    raw.on("close", () => this.unlink(conn));
    const proxy = this.proxy;
    if (proxy === null) return this.start(conn, raw);
    // The header comes first (before TLS); the sweep's request_timeout bounds it like a handshake.
    readStreamHeader(raw, proxy, this.limits.requestMs, (client) => {
      if (client === null || conn.closed) return;
      conn.remoteAddress = client.address;
      conn.remotePort = client.port;
      this.start(conn, raw);
    });
  }

  private start(conn: HttpConn, raw: net.Socket): void {
    const context = this.tls;
    if (context === null) return this.detect(conn, raw);
    const secure = new tls.TLSSocket(raw, { isServer: true, secureContext: context, ALPNProtocols: H2_ALPN });
    secure.on("error", () => raw.destroy());
    secure.once("secure", () => {
      // What tls.Server does before 'secureConnection': without it http2 waits for a 'secureConnect' that never comes.
      (secure as TlsHandshake).secureConnecting = false;
      this.hand(conn, secure, secure.alpnProtocol === "h2");
    });
  }

  /** Cleartext: HTTP/2 with prior knowledge starts with the preface; anything else is HTTP/1.1. */
  private detect(conn: HttpConn, raw: net.Socket): void {
    let seen: Buffer = Buffer.alloc(0);
    const onData = (chunk: Buffer): void => {
      seen = seen.length === 0 ? chunk : Buffer.concat([seen, chunk]);
      const n = Math.min(seen.length, PREFACE.length);
      const prefix = seen.subarray(0, n).equals(PREFACE.subarray(0, n));
      if (prefix && n < PREFACE.length) return;
      raw.off("data", onData);
      raw.pause();
      raw.unshift(seen);
      this.hand(conn, raw, prefix);
      // The HTTP/1.1 parser reads through the stream; HTTP/2 takes the handle and the buffered bytes.
      if (!prefix) raw.resume();
    };
    raw.on("data", onData);
    // Paused after a PROXY header was read.
    raw.resume();
  }

  private hand(conn: HttpConn, socket: Tagged<net.Socket>, h2: boolean): void {
    if (conn.closed) return;
    conn.ready = true;
    socket[CONN] = conn;
    if (!h2) {
      this.h1.emit("connection", socket);
      return;
    }
    this.handing = conn;
    try {
      this.h2.emit("connection", socket);
    } finally {
      this.handing = null;
    }
  }

  private onRequest(req: IncomingMessage, res: ServerResponse): void {
    const socket = req.socket as Tagged<net.Socket>;
    const conn = socket[CONN];
    if (!conn) return void res.destroy();
    // Busy only once the body is complete: a body that never ends does not hold the slot.
    let counted = false;
    let over = false;
    const count = (): void => {
      if (counted || over) return;
      counted = true;
      conn.active++;
      if (conn.active >= MAX_INFLIGHT && !conn.pausedByUs) {
        conn.pausedByUs = true;
        socket.pause();
      }
    };
    if (hasBody(req.headers)) {
      conn.h1BodySince = Date.now();
      req.once("end", () => {
        conn.h1BodySince = 0;
        count();
      });
    } else count();
    res.once("close", () => {
      over = true;
      conn.h1BodySince = 0;
      if (!counted) return;
      finished(conn);
      if (conn.pausedByUs && conn.active < MAX_INFLIGHT) {
        conn.pausedByUs = false;
        socket.resume();
      }
    });
    this.dispatch(new H1Exchange(req, res, conn.remoteAddress, conn.remotePort));
  }

  private onStream(stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders): void {
    const conn = (stream.session as Tagged<http2.ServerHttp2Session> | undefined)?.[CONN];
    if (!conn) return void stream.close(http2.constants.NGHTTP2_INTERNAL_ERROR);
    trackStream(conn, stream);
    this.dispatch(new H2Exchange(stream, headers, conn.remoteAddress, conn.remotePort));
  }

  private dispatch(ex: DohExchange): void {
    const handler = this.handler;
    if (handler) handler(ex);
    else sendError(ex, "server_unavailable", "the server is being reconfigured");
  }


  /**
   * The connection to close for a new one, among those with no request open: first one still
   * receiving a request body, the body that started longest ago (a client that never finishes its
   * bodies gives its slots up before anyone else, however fresh its connections); otherwise the one
   * whose last request finished longest ago (a connection in its handshake counts from its opening).
   */
  private idlest(): HttpConn | null {
    let holder: HttpConn | null = null;
    let holderSince = Infinity;
    let idle: HttpConn | null = null;
    for (const c of this.conns) {
      if (c.active > 0) continue;
      const since = bodyWaitingSince(c);
      if (since > 0 && since < holderSince) {
        holder = c;
        holderSince = since;
      } else if (since === 0 && (idle === null || c.lastDone < idle.lastDone)) idle = c;
    }
    return holder ?? idle;
  }

  private drop(conn: HttpConn, reason: Cell | null): void {
    if (conn.closed) return;
    if (reason) reason.value++;
    this.unlink(conn);
    conn.raw.destroy();
  }

  private unlink(conn: HttpConn): void {
    if (conn.closed) return;
    conn.closed = true;
    this.conns.delete(conn);
    this.stats.open.value--;
    conn.session?.destroy();
    if (this.conns.size === 0 && this.sweeper) {
      clearInterval(this.sweeper);
      this.sweeper = null;
    }
  }

  /** One timer per listener, a few ticks per shortest limit. */
  private startSweeper(): void {
    const tick = Math.min(1000, Math.max(20, Math.floor(Math.min(this.limits.idleMs, this.limits.requestMs) / 4)));
    this.sweeper = setInterval(() => this.sweep(), tick);
    this.sweeper.unref();
  }

  private sweep(): void {
    const now = Date.now();
    const { idleMs, requestMs } = this.limits;
    for (const c of [...this.conns]) {
      if (!c.ready) {
        if (now - c.opened >= requestMs) this.drop(c, this.stats.closedRequest);
        continue;
      }
      for (const [stream, started] of c.bodies) {
        if (now - started < requestMs) continue;
        stopWaiting(c, stream);
        this.stats.closedRequest.value++;
        stream.close(http2.constants.NGHTTP2_CANCEL);
      }
      if (c.closing) {
        this.drop(c, null);
        continue;
      }
      if (now - c.lastDone < idleMs) continue;
      if (c.active === 0 && c.session) {
        // GOAWAY first: the client learns the connection is going, and no request is caught by the close.
        c.closing = true;
        this.stats.closedIdle.value++;
        c.session.close();
        continue;
      }
      // Nothing finished for idle_timeout: an idle connection, or one whose answers are not read.
      this.drop(c, c.active === 0 ? this.stats.closedIdle : this.stats.closedStalled);
    }
  }

  close(): Promise<void> {
    if (this.sweeper) clearInterval(this.sweeper);
    this.sweeper = null;
    // Neither listens; closing them stops the HTTP/1.1 timeout checker (the callbacks get "not running").
    this.h1.close(ignore);
    this.h2.close(ignore);
    return new Promise((resolve) => {
      this.server.close(() => resolve());
      for (const c of [...this.conns]) this.drop(c, null);
    });
  }
}
