// `_true` / `_false`: constant matchers (useful as switches whose runtime mode the API flips).

import { ArgError, definePlugin } from "../../registry/types.js";

const noArgs = (type: string) => (raw: unknown): unknown => {
  if (raw !== undefined && raw !== null && raw !== "") throw new ArgError(`${type} takes no arguments`);
  return {};
};

const emptySchema = { type: "object", additionalProperties: false, properties: {} } as const;

export const trueMatcher = definePlugin<Record<string, never>, "matcher">({
  type: "_true",
  kind: "matcher",
  feature: "core",
  summary: "Always matches.",
  schema: emptySchema,
  shorthand: noArgs("_true"),
  quickSetup: (param) => param,
  create: () => ({ match: () => true }),
});

export const falseMatcher = definePlugin<Record<string, never>, "matcher">({
  type: "_false",
  kind: "matcher",
  feature: "core",
  summary: "Never matches.",
  schema: emptySchema,
  shorthand: noArgs("_false"),
  quickSetup: (param) => param,
  create: () => ({ match: () => false }),
});
