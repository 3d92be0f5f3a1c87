// The control plane of `ipset` and `nftset`: the <type>:<tag> actor (machines/set-writer.machine.ts)
// bound to the instance's queue and write, and POST write under /api/plugins/<tag>/, which writes
// what is queued now and answers once it is in the sets.

import { fromCallback, fromPromise } from "xstate";
import { setWriterMachine, type FlushResult, type SetWriterEvent, type SetWriterInput } from "../../../../machines/set-writer.machine.js";
import type { PluginControl, PluginRoute } from "../../../registry/control.js";
import type { SetsPlugin } from "./writer.js";

const flushSchema = {
  type: "object",
  required: ["ok", "written", "failed", "error"],
  properties: { ok: { type: "boolean" }, written: { type: "integer" }, failed: { type: "integer" }, error: { type: ["string", "null"] } },
} as const;

const routes: PluginRoute<SetsPlugin>[] = [
  {
    method: "POST",
    role: "operator",
    path: "write",
    audit: () => "write the queued prefixes now",
    summary: "Write the prefixes queued now, without waiting for the batch interval; answers once they are written",
    description: "ok is false when a write failed (error says why; those entries are dropped and written again when an answer brings them back).",
    changesState: true,
    schema: { response: { 200: flushSchema } },
    async handle(_req, plugin) {
      const result = (await plugin.concern.ask({ type: "SETS.FLUSH", upTo: plugin.view.queue.accepted })) as FlushResult;
      return { ok: result.failed === 0, ...result };
    },
  },
];

export function setsControl(type: string): PluginControl<SetsPlugin> {
  return {
    concern: (plugin, env) => {
      const input: SetWriterInput = { tag: env.tag, batchIntervalMs: plugin.settings.batchIntervalMs, batchSize: plugin.settings.batchSize, clock: Date.now };
      return {
        id: `${type}:${env.tag}`,
        logic: setWriterMachine.provide({
          actors: {
            listen: fromCallback<SetWriterEvent>(({ sendBack }) => plugin.queue.listen(sendBack)),
            write: fromPromise(() => plugin.write()),
          },
        }),
        input,
      };
    },
    // A quick setup (`exec: ipset s4,inet,24`) writes nothing without it.
    quickConcern: true,
    routes,
  };
}
