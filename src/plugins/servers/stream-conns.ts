// Bounds for DNS over a stream (TCP and TLS): a connection cap that evicts the connection idle
// longest to admit a new one, an idle timeout counted from the last complete query or answer,
// a deadline to finish a started frame (and a TLS handshake), at most MAX_INFLIGHT queries per
// connection, and backpressure on unsent answers. It works on accepted sockets only, never on the
// server, so a TLS listener hands its (net.Socket-derived) TLSSockets here unchanged. A client that
// half-closes (shutdown(SHUT_WR) after its queries) still gets every answer in flight, then the
// connection ends: the listener's sockets allow half-open connections.

import type net from "node:net";
import type tls from "node:tls";
import type { Cell } from "../../observability/metrics.js";
import { detachedStats, MAX_INFLIGHT, UNSENT_CLOSE_BYTES, UNSENT_PAUSE_BYTES, type Remote, type StreamHandler, type StreamLimits, type StreamStats } from "./stream-limits.js";


const EMPTY = Buffer.alloc(0);

class Conn {
  /** Neighbours in the table's list, least recently active first. */
  prev: Conn | null = null;
  next: Conn | null = null;
  lastActive: number;
  /** When the frame being read began; -1 when none is (or the connection is not being read). */
  frameStarted = -1;
  /** Reading stopped because more than UNSENT_PAUSE_BYTES of answers wait to be sent. */
  stalled = false;
  /** Since when answers have waited unsent (seen by the sweep, or at a stall); -1 when none wait. */
  unsentSince = -1;
  inflight = 0;
  closed = false;
  /** The client half-closed: no more queries; the connection ends once its answers are written. */
  private readEnded = false;
  /** Received bytes not yet framed (complete frames are held here only while reading is paused). */
  private pending: Buffer = EMPTY;
  /** Bytes of an oversized frame still to discard. */
  private skip = 0;
  private pumping = false;
  private remote: Remote;
  /** The TLS server name has been read into `remote` (after the handshake, at the first query). */
  private named = false;

  constructor(
    private readonly table: StreamConnections,
    readonly socket: net.Socket,
    now: number,
    remote: Remote | null,
  ) {
    this.lastActive = now;
    this.remote = remote ?? { address: socket.remoteAddress ?? "", port: socket.remotePort ?? 0 };
  }

  /**
   * May be evicted: nothing in flight, and nothing unsent or answers that have already sat unsent
   * since a sweep (a client that does not read must not hold a slot against one that does).
   */
  get evictable(): boolean {
    return this.inflight === 0 && (this.socket.writableLength === 0 || this.unsentSince >= 0);
  }

  onData(chunk: Buffer): void {
    if (this.closed) return;
    let data = chunk;
    if (this.skip > 0) {
      if (data.length <= this.skip) {
        this.skip -= data.length;
        if (this.skip === 0) this.frameStarted = -1;
        return;
      }
      data = data.subarray(this.skip);
      this.skip = 0;
      this.frameStarted = -1;
    }
    this.pending = this.pending.length === 0 ? data : Buffer.concat([this.pending, data]);
    this.pump();
  }

  onDrain(): void {
    if (this.closed) return;
    this.unsentSince = -1;
    if (!this.stalled) return;
    this.stalled = false;
    this.pump();
  }

  /** The client sent FIN: a partial frame can never complete; end once the answers are out. */
  onEnd(): void {
    if (this.closed) return;
    this.readEnded = true;
    if (!this.hasFrame()) {
      this.pending = EMPTY;
      this.skip = 0;
      this.frameStarted = -1;
    }
    this.finishIfDone();
  }

  /** After a half-close: every complete frame answered, so our side ends too (after the writes). */
  private finishIfDone(): void {
    if (!this.readEnded || this.closed || this.pumping || this.inflight > 0 || this.hasFrame()) return;
    this.pending = EMPTY;
    this.skip = 0;
    this.frameStarted = -1;
    this.socket.end();
  }

  /** A whole frame (or an oversized frame's header) waits in `pending`. */
  private hasFrame(): boolean {
    const p = this.pending;
    if (p.length < 2) return false;
    const len = (p[0] << 8) | p[1];
    return len > this.table.limits.maxFrame ? p.length >= 14 : p.length >= len + 2;
  }

  /** Answers every complete frame it may, then reads on or pauses. */
  private pump(): void {
    this.pumpFrames();
    this.finishIfDone();
  }

  private pumpFrames(): void {
    if (this.pumping || this.closed) return;
    this.pumping = true;
    const socket = this.socket;
    const maxFrame = this.table.limits.maxFrame;
    const now = Date.now();
    let framed = false;
    for (;;) {
      let heldBack = false;
      // Answers ready at once (cache, local data) for frames of one chunk leave in one write.
      socket.cork();
      while (this.pending.length >= 2 && this.inflight < MAX_INFLIGHT && !this.closed) {
        if (socket.writableLength > UNSENT_PAUSE_BYTES) {
          heldBack = true;
          break;
        }
        const p = this.pending;
        const len = (p[0] << 8) | p[1];
        if (len > maxFrame) {
          if (p.length < 14) break;
          const header = Buffer.from(p.subarray(2, 14));
          const rest = len - 12;
          if (p.length - 14 >= rest) {
            this.pending = p.subarray(14 + rest);
            framed = true;
          } else {
            // Answered now; the frame's deadline still runs until its last byte is skipped.
            this.skip = rest - (p.length - 14);
            this.pending = EMPTY;
          }
          this.dispatch(header, true);
        } else {
          if (p.length < len + 2) break;
          this.pending = p.subarray(len + 2);
          this.dispatch(p.subarray(2, len + 2), false);
          framed = true;
        }
      }
      socket.uncork();
      // Uncorking may have handed the held-back answers to the kernel: frame on if so.
      if (!heldBack || this.closed || socket.writableLength > UNSENT_PAUSE_BYTES) break;
    }
    this.pumping = false;
    if (this.closed) return;
    if (framed) this.table.touch(this, now);
    if (!this.checkUnsent(now)) return;
    if (this.stalled || this.inflight >= MAX_INFLIGHT) {
      socket.pause();
      // Time spent unread is ours, not the client's: the frame deadline restarts on resume.
      this.frameStarted = -1;
      return;
    }
    if (!this.readEnded && (this.skip > 0 || this.pending.length > 0)) {
      if (framed || this.frameStarted < 0) this.frameStarted = now;
      // Keep only the partial frame, not the whole chunk it was cut from.
      if (this.pending.length > 0) this.pending = Buffer.from(this.pending);
    } else {
      this.frameStarted = -1;
    }
    if (socket.isPaused()) socket.resume();
  }

  /** Applies the unsent bounds; false when the connection was closed for them. */
  private checkUnsent(now: number): boolean {
    const unsent = this.socket.writableLength;
    if (unsent > UNSENT_CLOSE_BYTES) {
      this.close(this.table.stats.closedUnsent);
      return false;
    }
    if (unsent > UNSENT_PAUSE_BYTES && !this.stalled) {
      this.stalled = true;
      if (this.unsentSince < 0) this.unsentSince = now;
      this.table.stats.paused.value++;
    }
    return true;
  }

  private dispatch(query: Buffer, oversized: boolean): void {
    if (!this.named) {
      this.named = true;
      const name = (this.socket as Partial<tls.TLSSocket>).servername;
      if (typeof name === "string" && name !== "") this.remote = { ...this.remote, serverName: name.toLowerCase() };
    }
    this.inflight++;
    let answered = false;
    this.table.handler(
      query,
      this.remote,
      (answer) => {
        if (answered) return;
        answered = true;
        this.answered(answer);
      },
      oversized,
    );
  }

  private answered(answer: Buffer): void {
    this.inflight--;
    if (this.closed) return;
    const socket = this.socket;
    if (answer.length > 0 && socket.writable) {
      const frame = Buffer.allocUnsafe(answer.length + 2);
      frame.writeUInt16BE(answer.length, 0);
      answer.copy(frame, 2);
      socket.write(frame);
      if (this.pumping) return;
      const now = Date.now();
      this.table.touch(this, now);
      if (!this.checkUnsent(now)) return;
      if (this.stalled) {
        socket.pause();
        this.frameStarted = -1;
        return this.finishIfDone();
      }
    }
    // A connection paused at MAX_INFLIGHT reads on once one of its answers is out.
    if (!this.pumping && !this.stalled && socket.isPaused()) this.pump();
    else this.finishIfDone();
  }

  close(reason: Cell | null): void {
    if (this.closed) return;
    this.closed = true;
    if (reason) reason.value++;
    this.table.unlink(this);
    this.pending = EMPTY;
    this.socket.destroy();
  }
}

/** The connections of one listener and the limits they live under. */
export class StreamConnections {
  limits: StreamLimits;
  stats: StreamStats = detachedStats();
  private head: Conn | null = null;
  private tail: Conn | null = null;
  private count = 0;
  private sweeper: NodeJS.Timeout | null = null;

  constructor(
    readonly handler: StreamHandler,
    limits: StreamLimits,
  ) {
    this.limits = { ...limits };
  }

  get size(): number {
    return this.count;
  }

  /** New limits (a reload's new owner): they apply to open connections too. */
  configure(limits: StreamLimits): void {
    this.limits = { ...limits };
    if (this.sweeper) {
      clearInterval(this.sweeper);
      this.sweeper = null;
      this.startSweeper();
    }
  }

  /** Counts into `stats` from now on, moving the open-connection gauge over. */
  useStats(stats: StreamStats): void {
    this.stats.open.value -= this.count;
    stats.open.value += this.count;
    this.stats = stats;
  }

  /**
   * Takes a new connection. `handshaking`: a TLS socket whose handshake must finish within
   * frameMs, like a frame (a handshake in progress is idle, so it is the first to be evicted).
   * `remote`: the client named by a PROXY header (default: the socket's peer).
   */
  accept(socket: net.Socket, handshaking = false, remote: Remote | null = null): void {
    if (this.count >= this.limits.maxConns) {
      const victim = this.idlest();
      if (!victim) {
        this.stats.refused.value++;
        socket.destroy();
        return;
      }
      this.stats.evicted.value++;
      victim.close(null);
    }
    const now = Date.now();
    const conn = new Conn(this, socket, now, remote);
    this.link(conn);
    if (handshaking) {
      conn.frameStarted = now;
      socket.once("secure", () => {
        conn.frameStarted = -1;
        this.touch(conn, Date.now());
      });
    }
    socket.setNoDelay(true);
    socket.on("data", (chunk: Buffer) => conn.onData(chunk));
    socket.on("drain", () => conn.onDrain());
    socket.on("end", () => conn.onEnd());
    socket.on("close", () => conn.close(null));
    socket.on("error", () => conn.close(null));
  }

  closeAll(): void {
    while (this.head) this.head.close(null);
  }

  /** The connection active longest ago that has nothing in flight and nothing unsent. */
  private idlest(): Conn | null {
    for (let c = this.head; c !== null; c = c.next) if (c.evictable) return c;
    return null;
  }

  /** Marks `conn` as just active: it moves to the end of the eviction order. */
  touch(conn: Conn, now: number): void {
    conn.lastActive = now;
    if (this.tail === conn) return;
    this.detach(conn);
    this.append(conn);
  }

  private link(conn: Conn): void {
    this.append(conn);
    this.count++;
    this.stats.open.value++;
    if (!this.sweeper) this.startSweeper();
  }

  unlink(conn: Conn): void {
    this.detach(conn);
    this.count--;
    this.stats.open.value--;
    if (this.count === 0 && this.sweeper) {
      clearInterval(this.sweeper);
      this.sweeper = null;
    }
  }

  private append(conn: Conn): void {
    conn.prev = this.tail;
    conn.next = null;
    if (this.tail) this.tail.next = conn;
    else this.head = conn;
    this.tail = conn;
  }

  private detach(conn: Conn): void {
    if (conn.prev) conn.prev.next = conn.next;
    else if (this.head === conn) this.head = conn.next;
    if (conn.next) conn.next.prev = conn.prev;
    else if (this.tail === conn) this.tail = conn.prev;
    conn.prev = null;
    conn.next = null;
  }

  /** One timer per listener, a few ticks per shortest limit; deadlines are checked, not armed per query. */
  private startSweeper(): void {
    const tick = Math.min(1000, Math.max(20, Math.floor(Math.min(this.limits.idleMs, this.limits.frameMs) / 4)));
    this.sweeper = setInterval(() => this.sweep(), tick);
    this.sweeper.unref();
  }

  private sweep(): void {
    const now = Date.now();
    const { idleMs, frameMs } = this.limits;
    for (let c = this.head; c !== null; ) {
      const next = c.next;
      const unsent = c.socket.writableLength;
      // 'drain' only follows a refused write; a buffer emptied otherwise is noticed here.
      if (unsent === 0) c.onDrain();
      else if (c.unsentSince < 0) c.unsentSince = now;
      if (c.unsentSince >= 0 && now - c.unsentSince >= idleMs) {
        c.close(this.stats.closedUnsent);
      } else if (!c.stalled && c.frameStarted >= 0 && now - c.frameStarted >= frameMs) {
        c.close(this.stats.closedFrame);
      } else if (c.inflight === 0 && unsent === 0 && now - c.lastActive >= idleMs) {
        c.close(this.stats.closedIdle);
      }
      c = next;
    }
  }
}
