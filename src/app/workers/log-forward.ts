// A data-plane worker's log lines in its primary's log ring, so GET /api/logs, the log stream and the
// dashboard's Logs page show every process's (each worker's lines carry `"worker": <n>`). The worker's
// ring entries go to the primary in batches every FORWARD_INTERVAL_MS, never a message per line: at
// debug level a worker logs per query. A batch holds at most MAX_BATCH lines; beyond that lines are
// dropped, and the primary logs how many with the next batch. The worker's own stdout keeps them all.

import type { Bus } from "../../bus.js";
import type { LogLevelName, LogRecord, LogRing } from "../../observability/log-ring.js";
import type { Logger } from "../../observability/logger.js";
import type { ChannelMessage } from "../../registry/process-role.js";

export const FORWARD_INTERVAL_MS = 250;
export const MAX_BATCH = 2000;
export const LOGS_MESSAGE = "logs";

/** One forwarded line: pino's JSON line with the level and time the worker's ring gave it. */
type Line = [line: string, level: LogLevelName, timeMs: number];

/** In a worker: forwards its ring's records (those already there, then each new one the bus tells of); returns the stop. */
export function forwardLogs(ring: LogRing, bus: Bus, send: (message: ChannelMessage) => boolean): () => void {
  let batch: Line[] = [];
  let dropped = 0;
  const add = (r: LogRecord): void => {
    if (batch.length < MAX_BATCH) batch.push([r.line, r.level, r.time_ms]);
    else dropped++;
  };
  for (const r of ring.records(ring.capacity)) add(r);
  bus.on("log", add);
  const flush = (): void => {
    if (batch.length === 0 && dropped === 0) return;
    send({ t: LOGS_MESSAGE, key: "", lines: batch, dropped });
    batch = [];
    dropped = 0;
  };
  const timer = setInterval(flush, FORWARD_INTERVAL_MS);
  timer.unref();
  return () => {
    clearInterval(timer);
    bus.off("log", add);
    flush();
  };
}

/** In the primary: a worker's batch into this process's ring (checked: it comes from another process). */
export function takeLogs(message: ChannelMessage, worker: number, ring: LogRing, log: Logger): void {
  const lines = Array.isArray(message.lines) ? (message.lines as unknown[]) : [];
  for (const item of lines) {
    if (!Array.isArray(item)) continue;
    const [line, level, time] = item as unknown[];
    if (typeof line === "string" && typeof level === "string" && typeof time === "number") ring.push(line, level as LogLevelName, time);
  }
  const dropped = typeof message.dropped === "number" ? message.dropped : 0;
  if (dropped > 0) log.warn({ target: "workers", worker, dropped }, "a worker logged faster than its lines could be forwarded; those are on its stdout only");
}
