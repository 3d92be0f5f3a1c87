// The process logger: pino writing JSON lines to stdout (and a file when configured), plus any
// extra sinks (the in-memory ring that feeds /api/logs). Lines below the level never reach a sink.

import { createWriteStream } from "node:fs";
import type { Writable } from "node:stream";
import { multistream, pino, type DestinationStream, type Level, type Logger, type StreamEntry } from "pino";
import type { LogLevel } from "../config/schema.js";

export type { Logger };

export function pinoLevel(level: LogLevel): Level | "silent" {
  return level === "off" ? "silent" : level;
}

export interface LoggerOptions {
  level: LogLevel;
  file?: string;
  sinks?: DestinationStream[];
  /** Defaults to stdout; tests pass their own stream. */
  stdout?: Writable;
}

export function createLogger(options: LoggerOptions): Logger {
  const streams: StreamEntry[] = [{ level: "trace", stream: options.stdout ?? process.stdout }];
  if (options.file) streams.push({ level: "trace", stream: createWriteStream(options.file, { flags: "a" }) });
  for (const sink of options.sinks ?? []) streams.push({ level: "trace", stream: sink });
  return pino(
    {
      level: pinoLevel(options.level),
      base: null,
      // Credentials never reach a log line, whatever a caller passes.
      redact: {
        paths: ["password", "*.password", "authorization", "*.authorization", "token", "*.token", "release_host_token", "*.release_host_token"],
        censor: "[redacted]",
      },
    },
    multistream(streams),
  );
}

/** A logger that discards everything (tools and tests that do not care). */
export function silentLogger(): Logger {
  return pino({ level: "silent" });
}
