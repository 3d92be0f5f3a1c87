// Response schema of every matcher's GET status and POST mode (control.ts); webui/src/shapes.ts derives
// the dashboard's types from it. Imports only the mode names (a file without imports): the
// dashboard's typecheck reads this file.

import { MATCHER_MODES } from "../../registry/matcher-modes.js";

export const matcherStatusSchema = {
  type: "object",
  required: ["ok", "matcher", "mode", "until_ms"],
  properties: {
    ok: { type: "boolean" },
    matcher: { type: "string" },
    mode: { type: "string", enum: MATCHER_MODES },
    until_ms: { type: ["integer", "null"], description: "When a timed mode returns to normal by itself (Unix ms); null otherwise" },
  },
} as const;

