// `reload`: asks the application to reload its configuration file, as POST /api/reload does (the
// same app actor and guards), and continues once the request is accepted; the reload itself runs
// beside the serving configuration. Meant for cron jobs (`download` → `reload`).

import { Step } from "../../engine/types.js";
import { ArgError, definePlugin } from "../../registry/types.js";

export const reload = definePlugin<Record<string, never>, "executor">({
  type: "reload",
  kind: "executor",
  feature: "core",
  summary: "Asks for a reload of the configuration file (as POST /api/reload); fails when one is already pending or running.",
  schema: { type: "object", additionalProperties: false, properties: {} },
  quickSetup(param) {
    if (param.trim() !== "") throw new ArgError("reload takes no argument");
    return {};
  },
  create(_args, ctx) {
    const labels = { plugin_tag: ctx.tag };
    const m = ctx.services.metrics;
    const triggers = m.counter("reload_trigger_total", "reload: reloads requested and accepted", ["plugin_tag"])(labels);
    const errors = m.counter("reload_error_total", "reload: reload requests refused", ["plugin_tag"])(labels);
    const app = ctx.services.app;
    return {
      execute() {
        try {
          app.requestReload();
        } catch (err) {
          errors.value++;
          throw new Error(`reload: refused: ${(err as Error).message}`, { cause: err });
        }
        triggers.value++;
        ctx.log.info("reload requested");
        return Step.Next;
      },
    };
  },
});
