// DNS over HTTPS (RFC 8484) to one upstream address: one HTTP/2 session reused for every query,
// each query a POST stream of `application/dns-message` with ID 0 (cache-friendly, as the RFC
// asks). The session closes after `idleTimeoutMs` without a query; a session the upstream closed
// or sent GOAWAY on is replaced, and a query caught on a reused one moves once to the new one.

import http2 from "node:http2";
import type { DnsResponse } from "../../dns/response.js";
import { acceptAnswer, packetWithId, UpstreamError, type Ticket } from "./exchange.js";
import type { Dialer } from "./tcp.js";
import { connectTls, tlsFailure, type TlsClientSetup } from "./tls-client.js";

/** An answer body larger than a DNS message is not one. */
const MAX_ANSWER_BYTES = 65_535;
const H2_ALPN = ["h2"];
const { NGHTTP2_CANCEL } = http2.constants;

export interface DohOptions {
  /** Resolved address to connect to. */
  ip: string;
  port: number;
  /** `:authority` of the requests: the configured host (and port when not 443). */
  authority: string;
  path: string;
  tls: TlsClientSetup;
  idleTimeoutMs: number;
  connectTimeoutMs: number;
  onConnect?: () => void;
  /** Keep a session open even when idle (min_conns ≥ 1), opened by `fill()` and again when it closes. */
  keepOpen?: boolean;
  /** How the connection under TLS is opened; tls.connect's own when absent. */
  dial?: Dialer;
}

/** A kept session that could not be opened is tried again after this, doubling up to the cap. */
const REOPEN_FIRST_MS = 1_000;
const REOPEN_MAX_MS = 30_000;

class Session {
  connected = false;
  answered = 0;
  active = 0;
  dead = false;
  error: string | null = null;
  idleTimer: NodeJS.Timeout | null = null;
  constructor(readonly h2: http2.ClientHttp2Session) {}
}

export class DohTransport {
  private session: Session | null = null;
  private closing = false;
  private failReason: UpstreamError | null = null;
  private reopenTimer: NodeJS.Timeout | null = null;
  private reopenDelayMs = REOPEN_FIRST_MS;

  constructor(private readonly opts: DohOptions) {}

  /** keepOpen: opens the session now. */
  fill(): void {
    if (this.opts.keepOpen && !this.closing) this.current();
  }

  /** A kept session ended: a new one at once when it had connected, later (backing off) when it never did. */
  private refill(connected: boolean): void {
    if (!this.opts.keepOpen || this.closing || this.reopenTimer || (this.session && !this.session.dead)) return;
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

  /** Sends `query` (with ID 0) and resolves with the matching answer. */
  exchange(query: Buffer, ticket: Ticket): Promise<DnsResponse> {
    return new Promise<DnsResponse>((resolve, reject) => {
      if (ticket.reason) return reject(ticket.reason);
      if (this.closing) return reject(new UpstreamError("https: upstream closed"));
      this.send(query, ticket, resolve, reject, false);
    });
  }

  private current(): Session {
    const s = this.session;
    if (s && !s.dead) return s;
    const o = this.opts;
    const h2 = http2.connect(`https://${o.authority}`, {
      createConnection: () => connectTls(o.tls, o.ip, o.port, H2_ALPN, o.dial?.(o.ip, o.port)),
      settings: { enablePush: false },
    });
    const session = new Session(h2);
    this.session = session;
    o.onConnect?.();
    const connectTimer = setTimeout(() => h2.destroy(new Error(`connect timed out after ${o.connectTimeoutMs}ms`)), o.connectTimeoutMs);
    h2.once("connect", () => {
      session.connected = true;
      clearTimeout(connectTimer);
    });
    h2.on("error", (err: Error) => {
      session.error = tlsFailure(err);
    });
    h2.on("goaway", () => this.retire(session));
    h2.once("close", () => {
      clearTimeout(connectTimer);
      this.retire(session);
      this.refill(session.connected);
    });
    h2.unref();
    return session;
  }

  /** No new stream goes to `s`; it closes once its streams are done. */
  private retire(s: Session): void {
    s.dead = true;
    if (this.session === s) this.session = null;
    if (s.idleTimer) clearTimeout(s.idleTimer);
    s.idleTimer = null;
    if (s.active === 0 && !s.h2.destroyed) s.h2.close();
  }

  private send(query: Buffer, ticket: Ticket, resolve: (a: DnsResponse) => void, reject: (e: UpstreamError) => void, retried: boolean): void {
    const s = this.current();
    let stream: http2.ClientHttp2Stream;
    try {
      stream = s.h2.request({ ":method": "POST", ":path": this.opts.path, "content-type": "application/dns-message", accept: "application/dns-message" });
    } catch (err) {
      // Stream IDs used up or the session is going away: once more on a fresh session.
      this.retire(s);
      if (!retried) return this.send(query, ticket, resolve, reject, true);
      return reject(new UpstreamError(`https: ${(err as Error).message}`));
    }
    s.active++;
    if (s.idleTimer) {
      clearTimeout(s.idleTimer);
      s.idleTimer = null;
    }
    let status = 0;
    let size = 0;
    const chunks: Buffer[] = [];
    let settled = false;
    const settle = (): boolean => {
      if (settled) return false;
      settled = true;
      ticket.release();
      return true;
    };
    ticket.wait((reason) => {
      if (!settle()) return;
      stream.close(NGHTTP2_CANCEL);
      reject(reason);
    });
    stream.on("response", (headers) => {
      status = Number(headers[":status"]);
    });
    stream.on("data", (chunk: Buffer) => {
      size += chunk.length;
      if (size <= MAX_ANSWER_BYTES) return void chunks.push(chunk);
      if (settle()) reject(new UpstreamError(`https: answer body over ${MAX_ANSWER_BYTES} bytes`));
      stream.close(NGHTTP2_CANCEL);
    });
    stream.on("end", () => {
      if (settled) return;
      if (status !== 200) {
        settle();
        return reject(new UpstreamError(`https: HTTP status ${status}`));
      }
      const answer = acceptAnswer(Buffer.concat(chunks, size), query, 0);
      settle();
      if (!answer) return reject(new UpstreamError("https: the body is not an answer to the query"));
      s.answered++;
      resolve(answer);
    });
    let failure: string | null = null;
    stream.on("error", (err: Error) => {
      // A session that failed (TLS, connect) cancels its pending streams with the reason as the cause.
      const cause = err.cause instanceof Error ? err.cause : err;
      failure = tlsFailure(cause);
    });
    stream.once("close", () => {
      s.active--;
      if (s.dead) {
        if (s.active === 0 && !s.h2.destroyed) s.h2.close();
      } else if (s.active === 0 && !this.opts.keepOpen) {
        s.idleTimer = setTimeout(() => this.retire(s), this.opts.idleTimeoutMs);
        s.idleTimer.unref();
      }
      if (settled) return;
      if (this.failReason) {
        settle();
        return reject(this.failReason);
      }
      // The session ended under a query: retry once when it had worked before (an idle close race).
      if ((s.dead || s.h2.destroyed) && s.answered > 0 && !retried && !ticket.reason && !this.closing) {
        settled = true;
        return this.send(query, ticket, resolve, reject, true);
      }
      settle();
      reject(new UpstreamError(`https: ${s.error ?? failure ?? (stream.rstCode ? `stream reset (code ${stream.rstCode})` : "connection closed by the upstream")}`));
    });
    stream.end(packetWithId(query, 0, false));
  }

  /** Stops taking queries. With `fail`, in-flight ones fail now; otherwise they finish first. */
  close(fail: UpstreamError | null): void {
    this.closing = true;
    if (this.reopenTimer) clearTimeout(this.reopenTimer);
    this.reopenTimer = null;
    this.failReason = fail;
    const s = this.session;
    if (!s) return;
    this.retire(s);
    if (fail) s.h2.destroy();
  }
}
