// One plugin instance's lifecycle: creating → ready → destroying → destroyed (or failed).

import { assign, setup } from "xstate";

export interface PluginContext {
  tag: string;
  type: string;
  kind: string;
  error: string | null;
}

export type PluginEvent =
  | { type: "PLUGIN.READY" }
  | { type: "PLUGIN.FAILED"; error: string }
  | { type: "PLUGIN.DESTROYING" }
  | { type: "PLUGIN.DESTROYED" };

export const pluginMachine = setup({
  types: {
    context: {} as PluginContext,
    events: {} as PluginEvent,
    input: {} as { tag: string; type: string; kind: string },
  },
  actions: {
    recordError: assign({ error: ({ event }) => (event as Extract<PluginEvent, { type: "PLUGIN.FAILED" }>).error }),
  },
}).createMachine({
  id: "plugin",
  initial: "creating",
  context: ({ input }) => ({ ...input, error: null }),
  states: {
    creating: {
      on: { "PLUGIN.READY": "ready", "PLUGIN.FAILED": { target: "failed", actions: "recordError" }, "PLUGIN.DESTROYING": "destroying" },
    },
    ready: { on: { "PLUGIN.DESTROYING": "destroying" } },
    destroying: { on: { "PLUGIN.DESTROYED": "destroyed" } },
    failed: { on: { "PLUGIN.DESTROYED": "destroyed" } },
    destroyed: { type: "final" },
  },
});
