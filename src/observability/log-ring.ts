// The last log entries in memory (for GET /api/logs and the log stream), fed by pino after its
// level filter. Logging stays cheap: the ring keeps pino's JSON line as it was written, with the
// level, time and id pino hands over beside it (the metadata a pino destination may ask for), and
// parses a line into an entry only when someone reads it (a GET, a stream's replay or live batch).

import type { DestinationStream } from "pino";
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

/** One line in the ring: what filters need is at hand, the rest is parsed from `line` on demand. */
export class LogRecord {
  constructor(
    readonly id: number,
    readonly level: LogLevelName,
    /** levelRank(level), kept so level filters compare numbers. */
    readonly rank: number,
    readonly time_ms: number,
    /** pino's JSON line, already redacted. */
    readonly line: string,
  ) {}

  /** The entry as the API shows it (parsed now: callers read a record once per answer or batch). */
  entry(): LogEntry {
    let parsed: Record<string, unknown>;
    try {
      parsed = JSON.parse(this.line) as Record<string, unknown>;
    } catch {
      // pino writes JSON; a line that is not is shown as it came.
      return { id: this.id, time_ms: this.time_ms, level: this.level, target: "sluice", message: this.line.trimEnd(), fields: {} };
    }
    const { level: _level, time: _time, target, msg, ...fields } = parsed;
    return {
      id: this.id,
      time_ms: this.time_ms,
      level: this.level,
      target: typeof target === "string" ? target : "sluice",
      message: typeof msg === "string" ? msg : "",
      fields,
    };
  }
}

/** The level at the start of a line pino wrote (`{"level":30,...`): for a writer that passed no metadata. */
const LEVEL_PREFIX = /^\{"level":(\d+)/;

export class LogRing {
  private readonly buffer: (LogRecord | undefined)[];
  private next = 0;
  private count = 0;
  private lastId = 0;

  constructor(
    readonly capacity: number,
    private readonly bus: Bus,
  ) {
    this.buffer = new Array<LogRecord | undefined>(capacity);
  }

  /** Adds one line (pino's JSON, one log call) with the level and time pino reported for it. */
  push(line: string, level: LogLevelName, timeMs: number): LogRecord {
    const record = new LogRecord(++this.lastId, level, levelRank(level), timeMs, line);
    this.buffer[this.next] = record;
    this.next = (this.next + 1) % this.capacity;
    this.count = Math.min(this.count + 1, this.capacity);
    this.bus.emit("log", record);
    return record;
  }

  /** The newest `limit` records at or above `minLevel`, oldest first. */
  records(limit: number, minLevel: LogLevelName = "trace"): LogRecord[] {
    const min = levelRank(minLevel);
    const out: LogRecord[] = [];
    for (let i = 1; i <= this.count && out.length < limit; i++) {
      const r = this.buffer[(this.next - i + this.capacity) % this.capacity] as LogRecord;
      if (r.rank >= min) out.push(r);
    }
    return out.reverse();
  }

  /** The newest `limit` entries at or above `minLevel`, oldest first. */
  tail(limit: number, minLevel: LogLevelName = "trace"): LogEntry[] {
    return this.records(limit, minLevel).map((r) => r.entry());
  }

  /**
   * A pino destination (for multistream): each write is one log call's line. It asks for pino's
   * metadata (Symbol.for("pino.metadata")): multistream sets lastLevel and lastTime (the time
   * field as written, ms since the epoch) before each write, so nothing is parsed here.
   */
  sink(): DestinationStream {
    const dest = {
      [Symbol.for("pino.metadata")]: true,
      lastLevel: undefined as number | string | undefined,
      lastTime: undefined as string | undefined,
      write: (line: string): void => {
        const level = typeof dest.lastLevel === "number" ? PINO_LEVELS[dest.lastLevel] : undefined;
        const time = dest.lastTime === undefined ? NaN : Number(dest.lastTime);
        this.push(line, level ?? levelOfLine(line), Number.isFinite(time) ? time : Date.now());
      },
    };
    return dest;
  }
}

function levelOfLine(line: string): LogLevelName {
  const m = LEVEL_PREFIX.exec(line);
  return (m && PINO_LEVELS[Number(m[1])]) || "info";
}
