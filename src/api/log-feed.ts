// The source of GET /api/logs/stream: log records go to every open client at a cost that does not
// scale with clients × entries, and that DNS work always outranks:
//  - one bus listener (only while a client is connected) collects records;
//  - at the start of each of the SSE broadcaster's turns (./sse-client.ts: at most every BATCH_MS,
//    after the loop's I/O callbacks) the records are parsed and serialised once, one batch is built
//    per level filter in use, and each client is handed its batch by reference (O(1));
//  - the broadcaster writes them within its budget, the clients it does not reach keep them in
//    their bounded queues, and clients that fall behind get `event: dropped`.

import type { Bus } from "../bus.js";
import { LOG_LEVEL_NAMES, type LogEntry, type LogRecord, type LogRing } from "../observability/log-ring.js";
import type { EventSink } from "../registry/control.js";
import { sseBroadcast, type SseBroadcast } from "./sse-client.js";

/** Entries one log stream client may hold while its socket is backpressured. */
export const QUEUE_LIMIT = 1000;

export function logFrame(entry: LogEntry): string {
  // JSON.stringify escapes CR/LF inside strings, so the payload is always one `data:` line.
  return `id: ${entry.id}\nevent: log\ndata: ${JSON.stringify(entry)}\n\n`;
}

export class LogFeed {
  /** Each client's sink with the lowest level rank it receives. */
  private readonly sinks = new Map<EventSink, number>();
  private pending: LogRecord[] = [];
  private readonly onLog = (record: LogRecord): void => {
    this.pending.push(record);
    this.broadcast.wake();
  };
  private readonly flush = (): void => this.distribute();

  constructor(
    private readonly bus: Bus,
    private readonly broadcast: SseBroadcast = sseBroadcast,
  ) {}

  /**
   * Subscribes a client; returns what unsubscribes it. Records logged before this call are handed
   * to the others first, so the caller's replay from the ring and the live batches neither overlap
   * nor leave a gap.
   */
  add(sink: EventSink, minRank: number): () => void {
    this.distribute();
    if (this.sinks.size === 0) {
      this.bus.on("log", this.onLog);
      this.broadcast.addFeed(this.flush);
    }
    this.sinks.set(sink, minRank);
    return () => this.remove(sink);
  }

  private remove(sink: EventSink): void {
    if (!this.sinks.delete(sink) || this.sinks.size > 0) return;
    this.bus.off("log", this.onLog);
    this.broadcast.removeFeed(this.flush);
    this.pending = [];
  }

  /** Hands every client the pending records at or above its level, serialised once for all. */
  private distribute(): void {
    if (this.pending.length === 0) return;
    // Only what some client shows is parsed (a stream at level=error costs nothing for debug lines).
    const lowest = Math.min(...this.sinks.values());
    const records = lowest === 0 ? this.pending : this.pending.filter((r) => r.rank >= lowest);
    this.pending = [];
    const frames = records.map((r) => logFrame(r.entry()));
    const batches = new Array<string[] | undefined>(LOG_LEVEL_NAMES.length);
    for (const [sink, rank] of this.sinks) {
      let batch = batches[rank];
      if (batch === undefined) {
        batch = rank === lowest ? frames : frames.filter((_, i) => records[i].rank >= rank);
        batches[rank] = batch;
      }
      sink.send(batch);
    }
  }
}

/**
 * Records to replay on connect, oldest first. With a usable Last-Event-ID: every record after it
 * that is still in the ring (all of them when the id is from an earlier process, i.e. newer than
 * anything here); otherwise the last `tail` records. Both pass the level filter.
 */
export function replayRecords(ring: LogRing, lastEventId: string | null, tail: number, minRank: number): LogRecord[] {
  const minLevel = LOG_LEVEL_NAMES[minRank];
  const last = lastEventId !== null && /^\d{1,15}$/.test(lastEventId.trim()) ? Number(lastEventId.trim()) : null;
  if (last === null) return tail > 0 ? ring.records(tail, minLevel) : [];
  const newest = ring.records(1)[0];
  const all = ring.records(ring.capacity, minLevel);
  if (!newest || last > newest.id) return all;
  return all.filter((r) => r.id > last);
}
