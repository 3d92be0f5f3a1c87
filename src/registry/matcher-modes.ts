// The names of the matcher runtime modes (matcher-mode.ts), alone in a file without imports so the
// response schemas that list them (src/plugins/matchers/schemas.ts) stay readable by the dashboard's typecheck.

export const MATCHER_MODES = ["normal", "always_false", "always_true"] as const;
