// Response schemas of every provider's routes (control.ts); webui/src/shapes.ts derives the
// dashboard's types from them. No imports: the dashboard's typecheck reads this file.

export const providerReloadedSchema = {
  type: "object",
  required: ["ok", "provider", "rules", "duration_ms"],
  properties: { ok: { type: "boolean" }, provider: { type: "string" }, rules: { type: "integer" }, duration_ms: { type: "integer" } },
} as const;

export const providerStatusSchema = {
  type: "object",
  required: ["ok", "provider", "status", "rules", "reloads", "failures", "last_error"],
  properties: {
    ok: { type: "boolean" },
    provider: { type: "string" },
    status: { type: "string", enum: ["idle", "reloading"], description: "reloading while a reload of this provider runs" },
    rules: { type: ["integer", "null"], description: "Rules in the snapshot serving now (null when the provider does not count them)" },
    reloads: { type: "integer", description: "Successful reloads since this configuration was loaded" },
    failures: { type: "integer", description: "Failed reloads since this configuration was loaded" },
    last_error: { type: ["string", "null"], description: "Error of the last reload when it failed; null after a success" },
  },
} as const;

