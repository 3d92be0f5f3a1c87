// `query_recorder`: records every query that passes through the rest of the sequence (request,
// response, execution path, client, time, error) in SQLite, off the DNS thread, with routes to
// page, filter and aggregate them and a live stream.

import { definePlugin } from "../../../registry/types.js";
import { recorderControl } from "./control.js";
import { QueryRecorder } from "./executor.js";

export { QueryRecorder } from "./executor.js";

interface RecorderArgs {
  path: string;
  queue_size: number;
  batch_size: number;
  flush_interval_ms: number;
  memory_tail: number;
  retention_days: number;
  cleanup_interval_hours: number;
  max_records: number;
}

const schema = {
  type: "object",
  additionalProperties: false,
  required: ["path"],
  properties: {
    path: { type: "string", minLength: 1, maxLength: 4096 },
    queue_size: { type: "integer", minimum: 1, maximum: 1_000_000, default: 8192 },
    batch_size: { type: "integer", minimum: 1, maximum: 65_535, default: 256 },
    flush_interval_ms: { type: "integer", minimum: 1, maximum: 60_000, default: 200 },
    memory_tail: { type: "integer", minimum: 1, maximum: 100_000, default: 1024 },
    // Fractions are allowed (a retention of hours, a cleanup every few minutes).
    retention_days: { type: "number", exclusiveMinimum: 0, maximum: 36_500, default: 7 },
    cleanup_interval_hours: { type: "number", exclusiveMinimum: 0, maximum: 168, default: 1 },
    max_records: { type: "integer", minimum: 0, maximum: 1_000_000_000, default: 1_000_000 },
  },
} as const;

export const queryRecorder = definePlugin<RecorderArgs, "executor", QueryRecorder>({
  type: "query_recorder",
  kind: "executor",
  feature: "query-recorder",
  summary: "Records every query through the rest of the sequence in SQLite (off the DNS thread); routes to page, filter and aggregate them, and a live stream.",
  schema,
  control: recorderControl,
  create(args, ctx) {
    return new QueryRecorder(
      {
        tag: ctx.tag,
        path: ctx.resolvePath(args.path),
        queueSize: args.queue_size,
        batchSize: args.batch_size,
        flushIntervalMs: args.flush_interval_ms,
        memoryTail: args.memory_tail,
        retentionMs: Math.round(args.retention_days * 86_400_000),
        cleanupIntervalMs: Math.max(1000, Math.round(args.cleanup_interval_hours * 3_600_000)),
        maxRecords: args.max_records,
      },
      ctx.services.metrics,
      ctx.log,
    );
  },
});
