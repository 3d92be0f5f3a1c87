// `query_recorder`: records every query that passes through the rest of the sequence (request,
// response, execution path, client, instance, time, error) in SQLite, in PostgreSQL (one store
// shared by several instances), or both, off the DNS thread, with routes to page, filter and
// aggregate them and a live stream.

import { definePlugin } from "../../../registry/types.js";
import { recorderControl } from "./control.js";
import { QueryRecorder } from "./executor.js";

export { QueryRecorder } from "./executor.js";

interface RecorderArgs {
  path?: string;
  postgres?: { url: string; schema: string; statement_timeout_ms: number; connect_timeout_ms: number };
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
  // SQLite, PostgreSQL, or both (the routes then read PostgreSQL).
  anyOf: [{ required: ["path"] }, { required: ["postgres"] }],
  properties: {
    path: { type: "string", minLength: 1, maxLength: 4096 },
    postgres: {
      type: "object",
      additionalProperties: false,
      required: ["url"],
      properties: {
        url: { type: "string", pattern: "^postgres(ql)?://", maxLength: 4096 },
        // A PostgreSQL schema (namespace) of its own; instances that share a store name the same one.
        schema: { type: "string", pattern: "^[a-z_][a-z0-9_]{0,50}$", default: "sluice_recorder" },
        statement_timeout_ms: { type: "integer", minimum: 100, maximum: 600_000, default: 10_000 },
        connect_timeout_ms: { type: "integer", minimum: 100, maximum: 60_000, default: 3000 },
      },
    },
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
  summary: "Records every query through the rest of the sequence in SQLite and/or a PostgreSQL store shared by instances (off the DNS thread); routes to page, filter and aggregate them, and a live stream.",
  dataFiles: (args) => (args.path === undefined ? [] : [{ path: args.path, sqlite: true, queries: true }]),
  schema,
  control: recorderControl,
  create(args, ctx) {
    const pg = args.postgres;
    return new QueryRecorder(
      {
        tag: ctx.tag,
        instance: ctx.instance,
        path: args.path === undefined ? null : ctx.resolvePath(args.path),
        postgres: pg === undefined ? null : { url: pg.url, schema: pg.schema, statementTimeoutMs: pg.statement_timeout_ms, connectTimeoutMs: pg.connect_timeout_ms },
        queueSize: args.queue_size,
        batchSize: args.batch_size,
        flushIntervalMs: args.flush_interval_ms,
        memoryTail: args.memory_tail,
        retentionMs: Math.round(args.retention_days * 86_400_000),
        cleanupIntervalMs: Math.max(1000, Math.round(args.cleanup_interval_hours * 3_600_000)),
        maxRecords: args.max_records,
        process: ctx.services.process,
      },
      ctx.services.metrics,
      ctx.log,
    );
  },
});
