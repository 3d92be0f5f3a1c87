// One configuration generation: building → active → draining → destroyed (or failed).
// A reload builds generation n+1 beside n; n drains only once n+1 is active. Each plugin instance
// is a child actor `plugin:<tag>` (two generations can hold the same tag during a reload).

import { assign, enqueueActions, sendTo, setup } from "xstate";
import { pluginMachine } from "./plugin.machine.js";

export interface RuntimeContext {
  generation: number;
  /** sha256 of the configuration text it was built from. */
  version: string;
  plugins: number;
  error: string | null;
}

type PluginRef = { tag: string };

export type RuntimeEvent =
  | ({ type: "PLUGIN.CREATING"; type_name: string; kind: string } & PluginRef)
  | ({ type: "PLUGIN.READY" } & PluginRef)
  | ({ type: "PLUGIN.FAILED"; error: string } & PluginRef)
  | ({ type: "PLUGIN.DESTROYING" } & PluginRef)
  | ({ type: "PLUGIN.DESTROYED" } & PluginRef)
  | { type: "RUNTIME.ACTIVE" }
  | { type: "RUNTIME.FAILED"; error: string }
  | { type: "RUNTIME.DRAINING" }
  | { type: "RUNTIME.DESTROYED" };

const childId = (e: PluginRef): string => `plugin:${e.tag}`;

export const runtimeMachine = setup({
  types: {
    context: {} as RuntimeContext,
    events: {} as RuntimeEvent,
    input: {} as { generation: number; version: string },
  },
  actors: { plugin: pluginMachine },
  actions: {
    spawnPlugin: enqueueActions(({ enqueue, event }) => {
      const e = event as Extract<RuntimeEvent, { type: "PLUGIN.CREATING" }>;
      enqueue.spawnChild("plugin", { id: childId(e), input: { tag: e.tag, type: e.type_name, kind: e.kind } });
    }),
    countPlugin: assign({ plugins: ({ context }) => context.plugins + 1 }),
    forwardToPlugin: sendTo(
      ({ event }) => childId(event as PluginRef),
      ({ event }) => {
        const { tag: _tag, ...rest } = event as Exclude<RuntimeEvent, { type: `RUNTIME.${string}` }>;
        return rest as never;
      },
    ),
    recordError: assign({ error: ({ event }) => (event as Extract<RuntimeEvent, { type: "RUNTIME.FAILED" }>).error }),
  },
}).createMachine({
  id: "runtime",
  initial: "building",
  context: ({ input }) => ({ ...input, plugins: 0, error: null }),
  on: {
    "PLUGIN.CREATING": { actions: ["spawnPlugin", "countPlugin"] },
    "PLUGIN.READY": { actions: "forwardToPlugin" },
    "PLUGIN.FAILED": { actions: "forwardToPlugin" },
    "PLUGIN.DESTROYING": { actions: "forwardToPlugin" },
    "PLUGIN.DESTROYED": { actions: "forwardToPlugin" },
  },
  states: {
    building: { on: { "RUNTIME.ACTIVE": "active", "RUNTIME.FAILED": { target: "failed", actions: "recordError" } } },
    active: { on: { "RUNTIME.DRAINING": "draining" } },
    draining: { on: { "RUNTIME.DESTROYED": "destroyed" } },
    failed: { on: { "RUNTIME.DESTROYED": "destroyed" } },
    destroyed: { type: "final" },
  },
});
