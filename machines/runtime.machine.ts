// One configuration generation: building → starting → active → draining → destroyed, or
// unwinding → failed. It creates its plugins one at a time in dependency order (each a child actor
// `plugin:<tag>`, systemId `runtime:<n>/plugin:<tag>`), starts the servers once all are ready, and
// destroys them in reverse order when retired or when one fails. The app actor is its parent.

import { assign, enqueueActions, fromPromise, sendParent, setup } from "xstate";
import { pluginMachine, type PluginHost, type PluginReport } from "./plugin.machine.js";

/** The runtime's procedures (registry/runtime.ts): plugin creation plus starting the servers. */
export interface RuntimeHost extends PluginHost {
  readonly order: readonly string[];
  start(): Promise<void>;
}

export interface RuntimeContext {
  generation: number;
  /** sha256 of the configuration text it was built from. */
  version: string;
  host: RuntimeHost;
  /** Index in `host.order` of the next plugin to create. */
  next: number;
  /** Tags whose plugin is ready, in creation order (destroyed from the end). */
  created: string[];
  error: string | null;
}

/** A plugin actor reached a final state (xstate sends it once the actor has stopped). */
type PluginDone = { type: `xstate.done.actor.plugin:${string}`; actorId: string };

export type RuntimeEvent = PluginReport | PluginDone | { type: "RUNTIME.RETIRE" };

/** Told to the app actor. */
export type RuntimeReport =
  | { type: "RUNTIME.READY"; generation: number }
  | { type: "RUNTIME.FAILED"; generation: number; error: unknown }
  | { type: "RUNTIME.GONE"; generation: number };

export const pluginSystemId = (generation: number, tag: string): string => `runtime:${generation}/plugin:${tag}`;

const errorText = (e: unknown): string => (e instanceof Error ? e.message : String(e));

export const runtimeMachine = setup({
  types: {
    context: {} as RuntimeContext,
    events: {} as RuntimeEvent,
    input: {} as { generation: number; version: string; host: RuntimeHost },
  },
  actors: {
    plugin: pluginMachine,
    startServers: fromPromise<void, RuntimeHost>(({ input }) => input.start()),
  },
  guards: {
    allReady: ({ context }) => context.created.length >= context.host.order.length,
    noneLeft: ({ context }) => context.created.length === 0,
    /** The plugin actor destroyed last has stopped (its done event comes after everything it did). */
    lastPluginDone: ({ context, event }) => (event as PluginDone).actorId === `plugin:${context.created[context.created.length - 1] ?? ""}`,
  },
  actions: {
    createNext: enqueueActions(({ enqueue, context }) => {
      const tag = context.host.order[context.next];
      if (tag === undefined) return;
      const systemId = pluginSystemId(context.generation, tag);
      enqueue.spawnChild("plugin", { id: `plugin:${tag}`, systemId, input: { tag, systemId, host: context.host } });
      enqueue.assign({ next: context.next + 1 });
    }),
    recordReady: assign({ created: ({ context, event }) => [...context.created, (event as Extract<PluginReport, { type: "PLUGIN.READY" }>).tag] }),
    destroyLast: enqueueActions(({ enqueue, context }) => {
      const tag = context.created[context.created.length - 1];
      if (tag !== undefined) enqueue.sendTo(`plugin:${tag}`, { type: "PLUGIN.DESTROY" });
    }),
    forgetLast: assign({ created: ({ context }) => context.created.slice(0, -1) }),
    recordError: assign({ error: ({ event }) => errorText((event as { error?: unknown }).error) }),
    reportReady: sendParent(({ context }): RuntimeReport => ({ type: "RUNTIME.READY", generation: context.generation })),
    reportFailed: sendParent(({ context, event }): RuntimeReport => ({ type: "RUNTIME.FAILED", generation: context.generation, error: (event as { error?: unknown }).error })),
    reportGone: sendParent(({ context }): RuntimeReport => ({ type: "RUNTIME.GONE", generation: context.generation })),
  },
}).createMachine({
  id: "runtime",
  initial: "building",
  context: ({ input }) => ({ ...input, next: 0, created: [], error: null }),
  states: {
    building: {
      entry: "createNext",
      always: { guard: "allReady", target: "starting" },
      on: {
        "PLUGIN.READY": { actions: ["recordReady", "createNext"] },
        "PLUGIN.FAILED": { target: "unwinding", actions: ["recordError", "reportFailed"] },
      },
    },
    starting: {
      invoke: {
        src: "startServers",
        input: ({ context }) => context.host,
        onDone: { target: "active", actions: "reportReady" },
        onError: { target: "unwinding", actions: ["recordError", "reportFailed"] },
      },
    },
    active: { on: { "RUNTIME.RETIRE": "draining" } },
    // Plugins are destroyed one at a time, newest first: servers (created last) drain before what they use goes.
    draining: {
      always: { guard: "noneLeft", target: "destroyed" },
      entry: "destroyLast",
      on: { "xstate.done.actor.*": { guard: "lastPluginDone", actions: ["forgetLast", "destroyLast"] } },
    },
    unwinding: {
      always: { guard: "noneLeft", target: "failed" },
      entry: "destroyLast",
      on: { "xstate.done.actor.*": { guard: "lastPluginDone", actions: ["forgetLast", "destroyLast"] } },
    },
    failed: { type: "final", entry: "reportGone" },
    destroyed: { type: "final", entry: "reportGone" },
  },
});
