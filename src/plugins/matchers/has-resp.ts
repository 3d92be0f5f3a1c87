// `has_resp`: true once an earlier executor has produced a response.

import { ArgError, definePlugin } from "../../registry/types.js";

export const hasRespMatcher = definePlugin<Record<string, never>, "matcher">({
  type: "has_resp",
  kind: "matcher",
  feature: "core",
  summary: "Matches when a response is already set.",
  schema: { type: "object", additionalProperties: false, properties: {} },
  shorthand(raw) {
    if (raw !== undefined && raw !== null && raw !== "") throw new ArgError("has_resp takes no arguments");
    return {};
  },
  quickSetup: (param) => param,
  create: () => ({ match: (ctx) => ctx.response !== null }),
});
