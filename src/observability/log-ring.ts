// The last log entries in memory (for GET /api/logs and the log stream), fed by pino after its
// level filter. Each entry is parsed once from pino's JSON line.

import { Writable } from "node:stream";
import type { Bus } from "../bus.js";

export const LOG_LEVEL_NAMES = ["trace", "debug", "info", "warn", "error", "fatal"] as const;
export type LogLevelName = (typeof LOG_LEVEL_NAMES)[number];

const PINO_LEVELS: Record<number, LogLevelName> = { 10: "trace", 20: "debug", 30: "info", 40: "warn", 50: "error", 60: "fatal" };

export interface LogEntry {
  /** Starts at 1, increases by one per entry for the life of the process. */
  id: number;
  /** Unix ms. */
  time_ms: number;
  level: LogLevelName;
  /** Where it came from: app, api, registry, plugin:<tag>, ... */
  target: string;
  message: string;
  /** Every other field of the log call (structured, never credentials). */
  fields: Record<string, unknown>;
}

export function levelRank(level: LogLevelName): number {
  return LOG_LEVEL_NAMES.indexOf(level);
}

export class LogRing {
  private readonly buffer: (LogEntry | undefined)[];
  private next = 0;
  private count = 0;
  private lastId = 0;

  constructor(
    readonly capacity: number,
    private readonly bus: Bus,
  ) {
    this.buffer = new Array<LogEntry | undefined>(capacity);
  }

  push(entry: Omit<LogEntry, "id">): LogEntry {
    const full: LogEntry = { id: ++this.lastId, ...entry };
    this.buffer[this.next] = full;
    this.next = (this.next + 1) % this.capacity;
    this.count = Math.min(this.count + 1, this.capacity);
    this.bus.emit("log", full);
    return full;
  }

  /** The newest `limit` entries at or above `minLevel`, oldest first. */
  tail(limit: number, minLevel: LogLevelName = "trace"): LogEntry[] {
    const min = levelRank(minLevel);
    const out: LogEntry[] = [];
    for (let i = 1; i <= this.count && out.length < limit; i++) {
      const e = this.buffer[(this.next - i + this.capacity) % this.capacity] as LogEntry;
      if (levelRank(e.level) >= min) out.push(e);
    }
    return out.reverse();
  }

  /** A pino destination: each JSON line becomes an entry. */
  sink(): Writable {
    return new Writable({
      write: (chunk: Buffer, _enc, done) => {
        for (const line of chunk.toString("utf8").split("\n")) {
          if (line.length > 0) this.ingest(line);
        }
        done();
      },
    });
  }

  private ingest(line: string): void {
    let parsed: Record<string, unknown>;
    try {
      parsed = JSON.parse(line) as Record<string, unknown>;
    } catch {
      return;
    }
    const { level, time, target, msg, ...fields } = parsed;
    this.push({
      time_ms: typeof time === "number" ? time : Date.now(),
      level: PINO_LEVELS[level as number] ?? "info",
      target: typeof target === "string" ? target : "sluice",
      message: typeof msg === "string" ? msg : "",
      fields,
    });
  }
}
