// Server-Sent Events shared by the API's streams: the Accept check, and the stream of a plugin route
// (src/registry/control.ts `stream: true`): headers, a heartbeat at once and every api.http.sse_heartbeat, and
// the log stream's fan-out (./log-broadcast.ts) for what the plugin sends. A source's `send` only
// queues a reference for that client (O(1)); the writes happen in turns of the one broadcaster
// below, at most every BATCH_MS, after the loop's I/O callbacks (DNS), within TURN_BUDGET_MS, each
// batch joined into write-sized chunks once for every client. A client the turn does not reach keeps
// its frames and goes first next time; a slow reader's bounded queue drops the oldest and says so
// with `event: dropped`.

import type { Writable } from "node:stream";
import type { FastifyReply } from "fastify";
import type { EventSink, OpenStream } from "../registry/control.js";
import { Turns } from "./turns.js";
import { FrameBatch, type LogStreamStats } from "./log-stream.js";

/** SSE unless the client only accepts other types (curl and fetch send `*\/*`). */
export function acceptsEventStream(accept: string | undefined): boolean {
  if (!accept) return true;
  return accept.split(",").some((part) => {
    const [type = "", ...params] = part.trim().toLowerCase().split(";");
    const refused = params.some((p) => /^\s*q=0(\.0*)?\s*$/.test(p));
    return !refused && (type.trim() === "text/event-stream" || type.trim() === "text/*" || type.trim() === "*/*");
  });
}

/**
 * Frames a plugin stream's client may hold while its socket is backpressured: a few of the largest
 * batches a source sends at once (the recorder sends at most 2 048 records per commit).
 */
export const PLUGIN_STREAM_QUEUE = 8192;

/** Frames sent to many clients are joined into write-sized chunks once, whichever client writes them first. */
const batches = new WeakMap<readonly string[], FrameBatch>();

function batchOf(frames: readonly string[]): FrameBatch {
  let b = batches.get(frames);
  if (!b) {
    b = new FrameBatch(frames);
    batches.set(frames, b);
  }
  return b;
}

/**
 * Bytes a client's response may hold in user space before it counts as backpressured (then it
 * waits for 'drain'): the socket drains it between turns, and it is mostly references to the
 * chunks every client shares.
 */
const SOCKET_BYTES = 1024 * 1024;
const HEARTBEAT_FRAME = ": heartbeat\n\n";

/** Frames of one shared array still to write, from `start`. */
interface Range {
  frames: readonly string[];
  start: number;
  /** Index of the shared chunk that begins at `start`; -1 when `start` is not a chunk boundary (the oldest were dropped). */
  chunk: number;
}

/**
 * One client of a plugin stream. What the source sends is queued by reference (O(1)); it is written
 * when the broadcaster gives the client its share of a turn, as the write-sized chunks every client
 * shares, until the response holds SOCKET_BYTES. At most `capacity` frames wait; beyond that the
 * oldest are dropped (to a chunk boundary, so writes stay shared) and the client is told with an
 * `event: dropped` frame.
 */
export class PluginStreamConnection {
  private readonly ranges: Range[] = [];
  private size = 0;
  /** True from a write that left SOCKET_BYTES or more in the response until its 'drain'. */
  private blocked = false;
  /** Dropped frames not yet reported to the client. */
  private unreported = 0;
  private closed = false;
  private readonly counters = { maxQueued: 0, dropped: 0, sent: 0 };
  private readonly onDrain = (): void => {
    this.blocked = false;
    this.wake();
  };

  constructor(
    private readonly out: Writable,
    /** Asks the broadcaster for a turn (this client has something to write). */
    private readonly wake: () => void,
    readonly capacity = PLUGIN_STREAM_QUEUE,
  ) {}

  /** Queues a shared array of frames (O(1): nothing is copied or joined here); drops the oldest beyond `capacity`. */
  add(frames: readonly string[]): void {
    if (this.closed || frames.length === 0) return;
    this.ranges.push({ frames, start: 0, chunk: 0 });
    this.size += frames.length;
    while (this.size > this.capacity) {
      const head = this.ranges[0];
      const n = Math.min(head.frames.length - head.start, this.size - this.capacity);
      if (n === head.frames.length - head.start) this.ranges.shift();
      else {
        head.start += n;
        head.chunk = -1;
      }
      this.drop(n);
    }
    if (this.size > this.counters.maxQueued) this.counters.maxQueued = this.size;
  }

  /** True when a turn would write something now: frames (or a drop notice) wait and the response takes them. */
  get ready(): boolean {
    return !this.closed && !this.blocked && (this.size > 0 || this.unreported > 0);
  }

  /** This client's share of a turn: the drop notice, then queued chunks, up to `maxBytes` or until the response pushes back; returns the bytes written. */
  turn(maxBytes = Infinity): number {
    if (!this.ready) return 0;
    this.align();
    let bytes = 0;
    if (this.unreported > 0) {
      const notice = `event: dropped\ndata: ${JSON.stringify({ dropped: this.unreported })}\n\n`;
      this.unreported = 0;
      bytes += notice.length;
      this.write(notice);
    }
    while (!this.blocked && this.size > 0 && bytes < maxBytes) {
      const head = this.ranges[0];
      const chunk = batchOf(head.frames).chunks()[head.chunk++];
      const count = chunk.end - head.start;
      head.start = chunk.end;
      if (head.start === head.frames.length) this.ranges.shift();
      this.size -= count;
      this.counters.sent += count;
      bytes += chunk.data.length;
      this.write(chunk.data);
    }
    return bytes;
  }

  /** A comment frame; skipped while the response is backpressured (the stream is not idle then). */
  heartbeat(): void {
    if (!this.closed && !this.blocked) this.write(HEARTBEAT_FRAME);
  }

  /** What this client has done so far (tests and diagnostics). */
  stats(): LogStreamStats {
    return { queued: this.size, ...this.counters, buffered: this.out.writableLength };
  }

  /** Stops writing and releases the queue; safe to call more than once. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.out.off("drain", this.onDrain);
    this.ranges.length = 0;
    this.size = 0;
  }

  private drop(n: number): void {
    this.size -= n;
    this.unreported += n;
    this.counters.dropped += n;
  }

  /** After a drop the oldest range may start inside a shared chunk: the rest of that chunk is dropped too. */
  private align(): void {
    const head = this.ranges[0];
    if (!head || head.chunk >= 0) return;
    const chunks = batchOf(head.frames).chunks();
    // The first chunk that begins at or after `start`.
    let i = 0;
    let begin = 0;
    while (i < chunks.length && begin < head.start) begin = chunks[i++].end;
    this.drop(begin - head.start);
    if (i === chunks.length) this.ranges.shift();
    else {
      head.start = begin;
      head.chunk = i;
    }
  }

  private write(data: string | Buffer): void {
    // write() is false past the response's small high-water mark, but a socket that takes what it
    // is given empties at once: only what stays in user space counts as backpressure.
    if (this.out.write(data) || this.out.writableLength < SOCKET_BYTES) return;
    this.blocked = true;
    this.out.once("drain", this.onDrain);
  }
}

/**
 * Most bytes all clients are given in one turn (about 80 MB/s in all): the time a write takes here
 * is not its whole cost, the kernel's work for the sockets competes with DNS for the CPUs too.
 */
export const TURN_BYTES_ALL = 2 * 1024 * 1024;
/** Most bytes one client writes before the next one's share, so that a turn reaches many clients. */
const CLIENT_TURN_BYTES = 256 * 1024;

/** Writes every plugin stream client's frames in turns (the log stream's scheduling, ./log-broadcast.ts). */
export class PluginStreamBroadcast {
  private clients: PluginStreamConnection[] = [];
  /** Index of the client that goes first next turn (rotates so every client gets turns). */
  private cursor = 0;
  private readonly turns = new Turns((deadline, late) => this.turn(deadline, late));

  /** Asks for a turn (frames were added, or a client's socket drained). */
  readonly wake = (): void => this.turns.request();

  get size(): number {
    return this.clients.length;
  }

  add(client: PluginStreamConnection): void {
    this.clients.push(client);
  }

  remove(client: PluginStreamConnection): void {
    const i = this.clients.indexOf(client);
    if (i < 0) return;
    this.clients.splice(i, 1);
    if (i < this.cursor) this.cursor--;
    if (this.clients.length === 0) this.cursor = 0;
  }

  /** One turn: returns true when a client still has something to write. */
  private turn(deadline: number, late: boolean): boolean {
    const n = this.clients.length;
    let bytes = 0;
    let served = 0;
    // Round robin from the cursor, a client's share at a time, until the time or the bytes run out
    // or no client has anything to write; the first client not served goes first next turn.
    for (let idle = 0; idle < n; this.cursor++) {
      if (this.cursor >= n) this.cursor = 0;
      const client = this.clients[this.cursor];
      if (!client.ready) {
        idle++;
        continue;
      }
      // The first ready client always gets its share, so a client makes progress however busy the loop is.
      if (served > 0 && (bytes >= TURN_BYTES_ALL || performance.now() >= deadline)) break;
      // A late turn serves one client only, but with the turn's whole share of bytes.
      bytes += client.turn(late ? TURN_BYTES_ALL : Math.min(CLIENT_TURN_BYTES, TURN_BYTES_ALL - bytes));
      served++;
      idle = 0;
    }
    return this.clients.some((c) => c.ready);
  }
}

/** Every plugin stream client of the process shares one broadcaster, so the time they take is bounded in all. */
export const pluginStreams = new PluginStreamBroadcast();

/**
 * Commits `reply` (a route registered with @fastify/sse in manual mode) as an event stream and runs
 * the plugin's stream on it until the client goes or `release` is called; returns `release`.
 */
export function startPluginStream(reply: FastifyReply, open: OpenStream, heartbeatMs: number, onRelease: () => void): () => void {
  reply.sse.keepAlive();
  reply.sse.sendHeaders();
  // A drained socket asks for a turn; the turn writes what the client holds.
  const conn = new PluginStreamConnection(reply.raw, pluginStreams.wake);
  pluginStreams.add(conn);
  conn.heartbeat();
  const timer = setInterval(() => conn.heartbeat(), heartbeatMs);
  timer.unref();
  let close: (() => void) | null = null;
  let released = false;
  const release = (): void => {
    if (released) return;
    released = true;
    clearInterval(timer);
    pluginStreams.remove(conn);
    close?.();
    conn.close();
    onRelease();
  };
  reply.sse.onClose(release);
  const sink: EventSink = {
    send(frames) {
      if (frames.length === 0 || released) return;
      conn.add(frames);
      pluginStreams.wake();
    },
    end() {
      // What the source sent before it went is written (as far as the socket takes it) before the end.
      if (!released) conn.turn();
      release();
      reply.raw.end();
    },
  };
  try {
    close = open(sink, reply.sse.lastEventId);
  } catch (err) {
    release();
    reply.raw.end();
    throw err;
  }
  // The client may already be gone (then no close event will come).
  if (!reply.sse.isConnected || reply.raw.destroyed || !reply.raw.socket || reply.raw.socket.destroyed) release();
  return release;
}
