// `drop_resp`: forgets the response built so far, so later rules (or the server's empty NOERROR) answer.

import { Step } from "../../engine/types.js";
import { ArgError, definePlugin } from "../../registry/types.js";

export const dropResp = definePlugin<Record<string, never>, "executor">({
  type: "drop_resp",
  kind: "executor",
  feature: "core",
  summary: "Clears the response so far; the next rules start from no answer.",
  schema: { type: "object", additionalProperties: false, properties: {} },
  shorthand: (raw) => raw ?? {},
  quickSetup(param) {
    if (param.length > 0) throw new ArgError(`drop_resp takes no parameter (got '${param}')`);
    return {};
  },
  create() {
    return {
      execute(ctx) {
        ctx.response = null;
        return Step.Next;
      },
    };
  },
});
