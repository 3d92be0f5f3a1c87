// Response schemas of the cron plugin's routes (control.ts); webui/src/shapes.ts derives the
// dashboard's types from them. No imports: the dashboard's typecheck reads this file.

const nullable = <const S extends object>(schema: S) => ({ anyOf: [schema, { type: "null" }] }) as const;

export const jobStatusSchema = {
  type: "object",
  required: ["schedule", "interval_ms", "next_run_ms", "current_run", "last_manual_run"],
  properties: {
    schedule: { type: ["string", "null"] },
    interval_ms: { type: ["integer", "null"] },
    next_run_ms: { type: ["integer", "null"] },
    current_run: nullable({
      type: "object",
      required: ["run_id", "trigger", "status", "started_at_ms"],
      properties: { run_id: { type: "integer" }, trigger: { type: "string", enum: ["manual", "schedule", "interval"] }, status: { type: "string", enum: ["pending", "running"] }, started_at_ms: { type: "integer" } },
    }),
    last_manual_run: nullable({
      type: "object",
      required: ["run_id", "status", "executor_error_count", "completed_at_ms"],
      properties: { run_id: { type: "integer" }, status: { type: "string", enum: ["completed", "completed_with_errors", "failed", "cancelled"] }, executor_error_count: { type: "integer" }, completed_at_ms: { type: "integer" } },
    }),
  },
} as const;

export const cronJobsStatusSchema = {
  type: "object",
  required: ["ok", "jobs"],
  properties: { ok: { type: "boolean" }, jobs: { type: "object", additionalProperties: jobStatusSchema } },
} as const;

export const cronRunAcceptedSchema = {
  type: "object",
  required: ["ok", "job", "status", "trigger", "run_id"],
  properties: { ok: { type: "boolean" }, job: { type: "string" }, status: { type: "string" }, trigger: { type: "string" }, run_id: { type: "integer" } },
} as const;
