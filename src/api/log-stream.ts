// One client of GET /api/logs/stream. It receives batches of SSE frames that were serialised once
// for every client (./log-broadcast.ts) and writes them in chunks of about CHUNK_BYTES when the
// broadcaster gives it its turn. While the socket is backpressured, or the broadcaster has no time
// left for it, it holds at most QUEUE_LIMIT frames (references into the shared batches), dropping
// the oldest and saying so with an `event: dropped` frame, so a slow reader never grows memory and
// costs O(1) per batch.

import type { Writable } from "node:stream";
import { levelRank, type LogEntry, type LogLevelName, type LogRing } from "../observability/log-ring.js";

/** Entries one connection may hold while its socket is backpressured. */
export const QUEUE_LIMIT = 1000;
/** Bytes per socket write: bounds what a backpressured socket holds in user space to HWM + one chunk. */
export const CHUNK_BYTES = 16 * 1024;
const HEARTBEAT_FRAME = ": heartbeat\n\n";

/** What a connection has done so far (tests and diagnostics). */
export interface LogStreamStats {
  /** Entries waiting for the socket to drain now. */
  queued: number;
  /** Highest `queued` ever reached (never above QUEUE_LIMIT). */
  maxQueued: number;
  /** Entries dropped because the queue was full. */
  dropped: number;
  /** Log frames written. */
  sent: number;
  /** Bytes the socket layer holds in user space (bounded by its high-water mark plus one chunk). */
  buffered: number;
}

export function logFrame(entry: LogEntry): string {
  // JSON.stringify escapes CR/LF inside strings, so the payload is always one `data:` line.
  return `id: ${entry.id}\nevent: log\ndata: ${JSON.stringify(entry)}\n\n`;
}

/** Frames for one level filter, and the same frames joined into write-sized buffers (built once, on first use). */
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

/** FIFO of frame ranges in shared arrays, capped at `capacity` frames by dropping the oldest. */
class FrameQueue {
  private readonly ranges: { frames: readonly string[]; start: number }[] = [];
  size = 0;

  constructor(readonly capacity: number) {}

  /** Queues frames[start..]; returns how many of the oldest frames were dropped to stay within capacity. */
  push(frames: readonly string[], start: number): number {
    if (start >= frames.length) return 0;
    this.ranges.push({ frames, start });
    this.size += frames.length - start;
    let dropped = 0;
    while (this.size > this.capacity) {
      const head = this.ranges[0];
      const excess = this.size - this.capacity;
      const held = head.frames.length - head.start;
      if (held <= excess) {
        this.ranges.shift();
        this.size -= held;
        dropped += held;
      } else {
        head.start += excess;
        this.size -= excess;
        dropped += excess;
      }
    }
    return dropped;
  }

  /** Removes frames from the front up to about `maxBytes` and returns them joined, with their count. */
  take(maxBytes: number): { text: string; count: number } {
    const parts: string[] = [];
    let bytes = 0;
    while (this.ranges.length > 0 && bytes < maxBytes) {
      const head = this.ranges[0];
      const frame = head.frames[head.start++];
      parts.push(frame);
      bytes += frame.length;
      this.size--;
      if (head.start === head.frames.length) this.ranges.shift();
    }
    return { text: parts.join(""), count: parts.length };
  }

  clear(): void {
    this.ranges.length = 0;
    this.size = 0;
  }
}

export class LogStreamConnection {
  readonly minRank: number;
  private readonly queue: FrameQueue;
  /** True between a write() that returned false and the next 'drain'. */
  private blocked = false;
  /** Dropped entries not yet reported to the client. */
  private unreported = 0;
  private closed = false;
  private readonly counters = { maxQueued: 0, dropped: 0, sent: 0 };
  private readonly onDrain = (): void => {
    this.blocked = false;
    // The queue is written on the broadcaster's next turn, inside its time budget.
    this.wake();
  };

  constructor(
    private readonly out: Writable,
    minLevel: LogLevelName,
    /** Asks the broadcaster for a turn (this connection has something to write). */
    private readonly wake: () => void = () => undefined,
    queueLimit = QUEUE_LIMIT,
  ) {
    this.minRank = levelRank(minLevel);
    this.queue = new FrameQueue(queueLimit);
  }

  /** Replayed entries (already filtered by level), serialised for this client alone and written at once. */
  replay(entries: readonly LogEntry[]): void {
    if (entries.length > 0) this.send(new FrameBatch(entries.map(logFrame)));
  }

  /** True when a turn would write something now: frames are waiting and the socket takes them. */
  get ready(): boolean {
    return !this.closed && !this.blocked && (this.queue.size > 0 || this.unreported > 0);
  }

  /** This client's turn: what it holds first, then `batch` (frames at or above its level), until the socket pushes back. */
  send(batch: FrameBatch | null): void {
    if (this.closed) return;
    if (this.blocked || this.queue.size > 0 || this.unreported > 0) {
      if (batch) this.enqueue(batch.frames, 0);
      this.writeQueue();
      return;
    }
    if (!batch) return;
    let start = 0;
    for (const chunk of batch.chunks()) {
      this.counters.sent += chunk.end - start;
      start = chunk.end;
      this.write(chunk.data);
      if (this.blocked) {
        this.enqueue(batch.frames, start);
        return;
      }
    }
  }

  /** No turn this time: keeps `batch` for later (O(1)), dropping the oldest beyond the queue limit. */
  hold(batch: FrameBatch | null): void {
    if (!this.closed && batch) this.enqueue(batch.frames, 0);
  }

  /** A comment frame; skipped while the socket is backpressured (the stream is not idle then). */
  heartbeat(): void {
    if (!this.closed && !this.blocked) this.write(HEARTBEAT_FRAME);
  }

  stats(): LogStreamStats {
    return { queued: this.queue.size, ...this.counters, buffered: this.out.writableLength };
  }

  /** Stops writing and releases the queue; safe to call more than once. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.out.off("drain", this.onDrain);
    this.queue.clear();
  }

  private enqueue(frames: readonly string[], start: number): void {
    const dropped = this.queue.push(frames, start);
    this.unreported += dropped;
    this.counters.dropped += dropped;
    if (this.queue.size > this.counters.maxQueued) this.counters.maxQueued = this.queue.size;
  }

  private write(data: string | Buffer): void {
    if (this.out.write(data)) return;
    this.blocked = true;
    this.out.once("drain", this.onDrain);
  }

  private writeQueue(): void {
    if (this.blocked) return;
    if (this.unreported > 0) {
      const dropped = this.unreported;
      this.unreported = 0;
      this.write(`event: dropped\ndata: ${JSON.stringify({ dropped })}\n\n`);
    }
    while (!this.blocked && this.queue.size > 0) {
      const { text, count } = this.queue.take(CHUNK_BYTES);
      this.counters.sent += count;
      this.write(text);
    }
  }
}

/**
 * Entries to replay on connect, oldest first. With a usable Last-Event-ID: every entry after it
 * that is still in the ring (all of them when the id is from an earlier process, i.e. newer than
 * anything here); otherwise the last `tail` entries. Both pass the level filter.
 */
export function replayEntries(ring: LogRing, lastEventId: string | null, tail: number, minLevel: LogLevelName): LogEntry[] {
  const last = lastEventId !== null && /^\d{1,15}$/.test(lastEventId.trim()) ? Number(lastEventId.trim()) : null;
  if (last === null) return tail > 0 ? ring.tail(tail, minLevel) : [];
  const newest = ring.tail(1)[0];
  const all = ring.tail(ring.capacity, minLevel);
  if (!newest || last > newest.id) return all;
  return all.filter((e) => e.id > last);
}
