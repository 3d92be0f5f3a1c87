// The TCP and DoT probe: connect (timed), TLS handshake (timed, with the version and ALPN agreed), one
// query (timed from write to answer), then two queries written back to back on the same connection:
// pipelining works when both are answered, in either order (RFC 7766 §6.2.1.1 lets a server reorder).

import net from "node:net";
import type { TLSSocket } from "node:tls";
import { acceptAnswer, packetWithId, randomId } from "../engine/upstream/exchange.js";
import { connectTls } from "../engine/upstream/tls-client.js";
import type { DnsResponse } from "../dns/response.js";
import { deadline, emptyResult, failureText, noteAnswer, round, shownMs, since, tlsSetup, type Pipelining, type ProbeResult, type ProbeSettings, type ProbeTarget } from "./result.js";

const DOT_ALPN = ["dot"];
/** A probe reads a few answers; anything larger than this many bytes pending is not DNS. */
const MAX_BUFFERED = 4 * 65_537;

/** A connection read as length-prefixed DNS frames; `until` waits for a condition over what arrived. */
class FramedConnection {
  readonly frames: Buffer[] = [];
  private pending = Buffer.alloc(0);
  private ended: Error | null = null;
  private check: (() => void) | null = null;

  constructor(readonly socket: net.Socket) {
    socket.on("data", (chunk: Buffer) => {
      this.pending = Buffer.concat([this.pending, chunk]);
      while (this.pending.length >= 2 && this.pending.length >= 2 + this.pending.readUInt16BE(0)) {
        this.frames.push(Buffer.from(this.pending.subarray(2, 2 + this.pending.readUInt16BE(0))));
        this.pending = this.pending.subarray(2 + this.pending.readUInt16BE(0));
      }
      if (this.pending.length > MAX_BUFFERED) socket.destroy(new Error("the upstream sent something that is not DNS"));
      this.check?.();
    });
    // The caller waits on its own flags for these two.
    socket.on("connect", () => this.check?.());
    socket.on("secureConnect", () => this.check?.());
    socket.on("error", (err) => {
      this.ended ??= err;
      this.check?.();
    });
    socket.on("close", () => {
      this.ended ??= new Error("connection closed by the upstream");
      this.check?.();
    });
  }

  /** Resolves once `done()` holds; rejects when the connection ends first or `ms` pass. */
  until(done: () => boolean, ms: number, what: string): Promise<void> {
    if (done()) return Promise.resolve();
    const limit = deadline(ms, `${what} within ${shownMs(ms)}`);
    return Promise.race([
      new Promise<void>((resolve, reject) => {
        this.check = () => {
          if (done()) resolve();
          else if (this.ended) reject(this.ended);
        };
        this.check();
      }),
      limit.expired,
    ]).finally(() => {
      limit.cancel();
      this.check = null;
    });
  }

  /** The answer to `query` sent with `id`, if it came; its arrival position too. */
  answer(query: Buffer, id: number): { resp: DnsResponse; at: number } | null {
    for (let i = 0; i < this.frames.length; i++) {
      const resp = acceptAnswer(this.frames[i], query, id);
      if (resp) return { resp, at: i };
    }
    return null;
  }
}

export async function probeStream(target: ProbeTarget, ip: string, settings: ProbeSettings): Promise<ProbeResult> {
  const tls = target.protocol === "tls";
  const result = emptyResult(target, ip.includes(":") ? `[${ip}]:${target.port}` : `${ip}:${target.port}`);
  const ms = settings.timeoutMs;
  const t0 = performance.now();
  let connectedAt = 0;
  let secureAt = 0;
  const socket = tls ? connectTls(tlsSetup(target, settings), ip, target.port, DOT_ALPN) : net.connect({ host: ip, port: target.port });
  socket.setNoDelay(true);
  socket.once("connect", () => (connectedAt = performance.now()));
  if (tls) socket.once("secureConnect", () => (secureAt = performance.now()));
  // Registered after the two above, so their times are set when it checks.
  const conn = new FramedConnection(socket);
  const query = settings.query;
  try {
    try {
      await conn.until(() => connectedAt > 0, ms, "no connection");
      result.connect_ms = round(connectedAt - t0);
      if (tls) {
        await conn.until(() => secureAt > 0, ms, "no TLS handshake");
        const s = socket as TLSSocket;
        result.tls_handshake_ms = round(secureAt - connectedAt);
        result.tls_version = s.getProtocol();
        result.alpn = typeof s.alpnProtocol === "string" ? s.alpnProtocol : null;
      }
      const id = randomId();
      const sent = performance.now();
      socket.write(packetWithId(query, id, true));
      await conn.until(() => conn.answer(query, id) !== null, ms, "no answer");
      noteAnswer(result, (conn.answer(query, id) as { resp: DnsResponse }).resp, since(sent));
    } catch (err) {
      result.error = failureText(err);
      return result;
    }
    result.pipelining = await pipelining(conn, query, ms);
  } finally {
    socket.destroy();
  }
  return result;
}

/** Two queries in one write, on the connection that answered the first. */
async function pipelining(conn: FramedConnection, query: Buffer, ms: number): Promise<Pipelining> {
  const a = randomId();
  let b = randomId();
  while (b === a) b = randomId();
  conn.socket.write(Buffer.concat([packetWithId(query, a, true), packetWithId(query, b, true)]));
  try {
    await conn.until(() => conn.answer(query, a) !== null && conn.answer(query, b) !== null, ms, "not both answered");
  } catch (err) {
    const got = [a, b].filter((id) => conn.answer(query, id) !== null).length;
    return { works: false, in_order: null, detail: `${got} of 2 queries sent back to back answered (${failureText(err)})` };
  }
  const inOrder = (conn.answer(query, a)?.at ?? 0) < (conn.answer(query, b)?.at ?? 0);
  return { works: true, in_order: inOrder, detail: `2 queries sent back to back on one connection, both answered${inOrder ? " in order" : ", out of order"}` };
}
