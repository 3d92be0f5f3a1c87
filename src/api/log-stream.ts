// One client of GET /api/logs/stream: writes SSE frames straight to the socket while the client
// keeps up, holds at most QUEUE_LIMIT entries while the socket is backpressured (dropping the
// oldest and saying so with an `event: dropped` frame), so a slow reader never grows memory.

import type { Writable } from "node:stream";
import { levelRank, type LogEntry, type LogLevelName, type LogRing } from "../observability/log-ring.js";

/** Entries one connection may hold while its socket is backpressured. */
export const QUEUE_LIMIT = 1000;
/** Comment frame interval that keeps proxies and clients from timing out an idle stream. */
export const HEARTBEAT_MS = 15_000;
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
  /** Bytes the socket layer holds in user space (bounded by its high-water mark plus one frame). */
  buffered: number;
}

export function logFrame(entry: LogEntry): string {
  // JSON.stringify escapes CR/LF inside strings, so the payload is always one `data:` line.
  return `id: ${entry.id}\nevent: log\ndata: ${JSON.stringify(entry)}\n\n`;
}

/** Fixed-size FIFO that overwrites nothing: the caller drops the oldest when it is full. */
class EntryQueue {
  private readonly slots: (LogEntry | undefined)[];
  private head = 0;
  size = 0;

  constructor(readonly capacity: number) {
    this.slots = new Array<LogEntry | undefined>(capacity);
  }

  push(entry: LogEntry): void {
    this.slots[(this.head + this.size) % this.capacity] = entry;
    this.size++;
  }

  shift(): LogEntry | undefined {
    if (this.size === 0) return undefined;
    const entry = this.slots[this.head];
    this.slots[this.head] = undefined;
    this.head = (this.head + 1) % this.capacity;
    this.size--;
    return entry;
  }

  clear(): void {
    this.slots.fill(undefined);
    this.head = 0;
    this.size = 0;
  }
}

export class LogStreamConnection {
  private readonly queue: EntryQueue;
  private readonly minRank: number;
  /** True between a write() that returned false and the next 'drain'. */
  private blocked = false;
  /** Dropped entries not yet reported to the client. */
  private unreported = 0;
  private closed = false;
  private readonly counters = { maxQueued: 0, dropped: 0, sent: 0 };
  private readonly onDrain = (): void => {
    this.blocked = false;
    this.flush();
  };

  constructor(
    private readonly out: Writable,
    minLevel: LogLevelName,
    queueLimit = QUEUE_LIMIT,
  ) {
    this.minRank = levelRank(minLevel);
    this.queue = new EntryQueue(queueLimit);
  }

  /** Takes one entry (replayed or live); entries below the level filter are ignored. */
  offer(entry: LogEntry): void {
    if (this.closed || levelRank(entry.level) < this.minRank) return;
    if (!this.blocked && this.queue.size === 0) {
      this.writeEntry(entry);
      return;
    }
    if (this.queue.size === this.queue.capacity) {
      this.queue.shift();
      this.unreported++;
      this.counters.dropped++;
    }
    this.queue.push(entry);
    if (this.queue.size > this.counters.maxQueued) this.counters.maxQueued = this.queue.size;
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

  private writeEntry(entry: LogEntry): void {
    this.counters.sent++;
    this.write(logFrame(entry));
  }

  private write(frame: string): void {
    if (this.out.write(frame)) return;
    this.blocked = true;
    this.out.once("drain", this.onDrain);
  }

  private flush(): void {
    if (this.closed) return;
    if (this.unreported > 0) {
      const dropped = this.unreported;
      this.unreported = 0;
      this.write(`event: dropped\ndata: ${JSON.stringify({ dropped })}\n\n`);
    }
    while (!this.blocked && this.queue.size > 0) this.writeEntry(this.queue.shift() as LogEntry);
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
