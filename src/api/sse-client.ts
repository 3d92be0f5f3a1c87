// The clients of every Server-Sent Events stream of the API (logs, plugin streams, actors) and the one
// broadcaster that writes for all of them. A source's frames are queued per client by reference
// (O(1)); the writes happen in turns of the broadcaster, at most every BATCH_MS, after the loop's I/O
// callbacks (DNS), within TURN_BUDGET_MS, each batch joined into write-sized chunks once for every
// client. A client the turn does not reach keeps its frames and goes first next time; a slow
// reader's bounded queue drops the oldest and says so with `event: dropped`.

import type { Writable } from "node:stream";
import { Turns } from "./turns.js";

/** Bytes per socket write: bounds what a backpressured socket holds in user space to its high-water mark + one chunk. */
export const CHUNK_BYTES = 16 * 1024;

/** What a client has done so far (tests and diagnostics). */
export interface StreamStats {
  /** Frames waiting for the socket now. */
  queued: number;
  /** Highest `queued` ever reached (never above the client's capacity). */
  maxQueued: number;
  /** Frames dropped because the queue was full. */
  dropped: number;
  /** Frames written. */
  sent: number;
  /** Bytes the response holds in user space. */
  buffered: number;
}

/** Frames sent to one or many clients, and the same frames joined into write-sized buffers (built once, on first use). */
export class FrameBatch {
  private chunkList: { data: Buffer; end: number }[] | null = null;

  constructor(readonly frames: readonly string[]) {}

  chunks(): readonly { data: Buffer; end: number }[] {
    if (this.chunkList) return this.chunkList;
    const list: { data: Buffer; end: number }[] = [];
    let start = 0;
    let bytes = 0;
    for (let i = 0; i < this.frames.length; i++) {
      bytes += this.frames[i].length;
      if (bytes >= CHUNK_BYTES || i === this.frames.length - 1) {
        list.push({ data: Buffer.from(this.frames.slice(start, i + 1).join(""), "utf8"), end: i + 1 });
        start = i + 1;
        bytes = 0;
      }
    }
    this.chunkList = list;
    return list;
  }
}

/**
 * Frames a client may hold while its socket is backpressured, unless its stream says otherwise: a
 * few of the largest batches a source sends at once (the recorder sends at most 2 048 records per commit).
 */
export const STREAM_QUEUE = 8192;

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
 * waits for 'drain'), unless its stream says otherwise: the socket drains it between turns, and it
 * is mostly references to the chunks every client shares.
 */
export const SOCKET_BYTES = 1024 * 1024;
const HEARTBEAT_FRAME = ": heartbeat\n\n";

/** Frames of one shared array still to write, from `start`. */
interface Range {
  frames: readonly string[];
  start: number;
  /** Index of the shared chunk that begins at `start`; -1 when `start` is not a chunk boundary (the oldest were dropped). */
  chunk: number;
}

/**
 * One client of an event stream. What the source sends is queued by reference (O(1)); it is written
 * when the broadcaster gives the client its share of a turn, as the write-sized chunks every client
 * shares, until the response holds `socketBytes`. At most `capacity` frames wait; beyond that the
 * oldest are dropped (to a chunk boundary, so writes stay shared) and the client is told with an
 * `event: dropped` frame.
 */
export class SseClient {
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
    readonly capacity = STREAM_QUEUE,
    /** User-space bytes the response may hold before this client waits for 'drain' (0: wait whenever write() says so). */
    private readonly socketBytes = SOCKET_BYTES,
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
  stats(): StreamStats {
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
    // is given empties at once: only what stays in user space beyond socketBytes counts as backpressure.
    if (this.out.write(data) || this.out.writableLength < this.socketBytes) return;
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

/**
 * Writes every client's frames in turns. A feed (a source that collects what it sends between turns,
 * like the log stream's) is flushed to its clients at the start of each turn.
 */
export class SseBroadcast {
  private clients: SseClient[] = [];
  /** Index of the client that goes first next turn (rotates so every client gets turns). */
  private cursor = 0;
  private readonly feeds = new Set<() => void>();
  /** True while a turn runs: what a feed adds then is written by this turn, not a new one. */
  private turning = false;
  private readonly turns = new Turns((deadline, late) => {
    this.turning = true;
    try {
      for (const flush of this.feeds) flush();
      return this.turn(deadline, late);
    } finally {
      this.turning = false;
    }
  });

  /** Asks for a turn (frames were added, or a client's socket drained). */
  readonly wake = (): void => {
    if (!this.turning) this.turns.request();
  };

  addFeed(flush: () => void): void {
    this.feeds.add(flush);
  }

  removeFeed(flush: () => void): void {
    this.feeds.delete(flush);
  }

  get size(): number {
    return this.clients.length;
  }

  add(client: SseClient): void {
    this.clients.push(client);
  }

  remove(client: SseClient): void {
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

/** Every event stream client of the process shares one broadcaster, so the time they take is bounded in all. */
export const sseBroadcast = new SseBroadcast();
