// Response schemas of the download plugin's routes (control.ts); webui/src/shapes.ts derives the
// dashboard's types from them. No imports: the dashboard's typecheck reads this file.

const itemSchema = {
  type: "object",
  required: ["index", "url", "path", "running", "last_run_ms", "last_success_ms", "last_error", "size_bytes"],
  properties: {
    index: { type: "integer" },
    url: { type: "string" },
    path: { type: "string" },
    running: { type: "boolean" },
    last_run_ms: { type: ["integer", "null"] },
    last_success_ms: { type: ["integer", "null"] },
    last_error: { type: ["string", "null"] },
    size_bytes: { type: ["integer", "null"] },
  },
} as const;

export const downloadBatchSchema = {
  type: "object",
  required: ["ok", "total", "succeeded", "failed"],
  properties: { ok: { type: "boolean" }, total: { type: "integer" }, succeeded: { type: "integer" }, failed: { type: "integer" } },
} as const;

export const downloadsSchema = { type: "object", required: ["ok", "items"], properties: { ok: { type: "boolean" }, items: { type: "array", items: itemSchema } } } as const;
