// One plugin instance: creating → (starting) → ready → destroying → destroyed, or failed. The actor
// owns the instance's lifecycle: it invokes the create (create + init) and destroy procedures, and
// from then until destroyed it runs the plugin's concern actor (provider reload, cache operations,
// matcher mode, cron jobs, ...) as its child. A concern with start-up work (a cache's dump load,
// the recorder's writer, a download's missing files) declares `startup`: the plugin is ready only
// once the concern reports CONCERN.STARTED (or is torn down when it reports CONCERN.START_FAILED).
// The quick-setup instances the create made (`exec: forward 1.1.1.1`) are its children too, one
// small actor each (machines/quick.machine.ts), until the destroy that takes them down has returned.
// Its parent, the runtime actor, decides when each plugin is created and destroyed.

import { assign, enqueueActions, fromPromise, sendParent, setup, type AnyActorLogic, type AnyActorRef } from "xstate";
import { quickMachine, quickSystemId, type QuickSetup } from "./quick.machine.js";

/** What the plugin machine needs from the runtime that holds the instances (registry/runtime.ts). */
export interface PluginHost {
  createPlugin(tag: string): Promise<CreatedPlugin>;
  destroyPlugin(tag: string): Promise<void>;
}

export interface CreatedPlugin {
  type: string;
  kind: string;
  concern: { id: string; logic: AnyActorLogic; input?: unknown; startup?: boolean } | null;
  /**
   * The quick-setup instances its create made, each shown by an actor. They run no concern: nothing
   * can address one (routes, cluster replays and other plugins' control reach declared tags only),
   * a quick-setup matcher is not wrapped by a mode cell, and quick-setup args declare no start-up or
   * persistence work (a quick-setup cache takes only short_circuit: no dump_file, no redis). The
   * exception is a type whose instance cannot work without its concern (PluginControl.quickConcern:
   * ipset's batch writer), which its quick-setup actor runs.
   */
  quick: QuickSetup[];
}

export interface PluginContext {
  tag: string;
  /** This actor's systemId (runtime:<n>/plugin:<tag>). */
  systemId: string;
  type: string | null;
  kind: string | null;
  /** systemId of the concern actor while ready. */
  concern: string | null;
  /** Internal tags of the quick-setup instances it made (each one's actor is `quick:<tag>`). */
  quick: string[];
  error: string | null;
  /** What the concern's start-up failed with, reported as it is (a located configuration error) once the instance is destroyed. */
  startFailure: unknown;
  host: PluginHost;
}

/** What a concern with `startup` tells its plugin actor (machines/concern.ts has the actions). */
export type ConcernStartup = { type: "CONCERN.STARTED" } | { type: "CONCERN.START_FAILED"; error: unknown };

export type PluginEvent = { type: "PLUGIN.DESTROY" } | ConcernStartup;

/** Told to the runtime actor. */
export type PluginReport =
  | { type: "PLUGIN.READY"; tag: string }
  | { type: "PLUGIN.FAILED"; tag: string; error: unknown };

export const concernSystemId = (pluginSystemId: string, concernId: string): string => `${pluginSystemId}/${concernId}`;

const errorText = (e: unknown): string => (e instanceof Error ? e.message : String(e));

export const pluginMachine = setup({
  types: {
    context: {} as PluginContext,
    events: {} as PluginEvent,
    input: {} as { tag: string; systemId: string; host: PluginHost },
  },
  actors: {
    create: fromPromise<CreatedPlugin, { tag: string; host: PluginHost }>(({ input }) => input.host.createPlugin(input.tag)),
    destroy: fromPromise<void, { tag: string; host: PluginHost }>(({ input }) => input.host.destroyPlugin(input.tag)),
    quick: quickMachine,
  },
  guards: {
    concernStartsUp: ({ event }) => (event as unknown as { output: CreatedPlugin }).output.concern?.startup === true,
  },
  actions: {
    recordCreated: assign(({ event, context }) => {
      const out = (event as unknown as { output: CreatedPlugin }).output;
      return { type: out.type, kind: out.kind, concern: out.concern ? concernSystemId(context.systemId, out.concern.id) : null, quick: out.quick.map((q) => q.tag) };
    }),
    startQuick: enqueueActions(({ enqueue, event, context }) => {
      for (const q of (event as unknown as { output: CreatedPlugin }).output.quick) {
        const systemId = quickSystemId(context.systemId, q.tag);
        enqueue.spawnChild("quick", { id: `quick:${q.tag}`, systemId, input: { ...q, systemId } });
      }
    }),
    /** The instance's destroy is taking its quick-setup instances down too. */
    destroyingQuick: enqueueActions(({ enqueue, context }) => {
      for (const tag of context.quick) enqueue.sendTo(`quick:${tag}`, { type: "QUICK.DESTROY" });
    }),
    stopQuick: enqueueActions(({ enqueue, context }) => {
      for (const tag of context.quick) enqueue.stopChild(`quick:${tag}`);
    }),
    // The concern's logic comes from the plugin definition (not one of this machine's named actors), so
    // it is found by systemId, `<this actor's systemId>/<concern id>`, rather than by child id.
    startConcern: enqueueActions(({ enqueue, event, context }) => {
      const concern = (event as unknown as { output: CreatedPlugin }).output.concern;
      if (concern) enqueue.spawnChild(concern.logic, { systemId: concernSystemId(context.systemId, concern.id), input: concern.input });
    }),
    stopConcern: enqueueActions(({ enqueue, context, system }) => {
      const ref = context.concern ? (system.get(context.concern) as AnyActorRef | undefined) : undefined;
      if (ref) enqueue.stopChild(ref);
    }),
    recordError: assign({ error: ({ event }) => errorText((event as { error?: unknown }).error) }),
    recordStartFailure: assign({ startFailure: ({ event }) => (event as { error?: unknown }).error }),
    reportReady: sendParent(({ context }): PluginReport => ({ type: "PLUGIN.READY", tag: context.tag })),
    reportFailed: sendParent(({ context, event }): PluginReport => ({ type: "PLUGIN.FAILED", tag: context.tag, error: (event as { error?: unknown }).error })),
    reportStartFailed: sendParent(({ context }): PluginReport => ({ type: "PLUGIN.FAILED", tag: context.tag, error: context.startFailure ?? new Error(context.error ?? "start-up failed") })),
  },
}).createMachine({
  id: "plugin",
  initial: "creating",
  context: ({ input }) => ({ ...input, type: null, kind: null, concern: null, quick: [], error: null, startFailure: null }),
  states: {
    creating: {
      invoke: {
        src: "create",
        input: ({ context }) => ({ tag: context.tag, host: context.host }),
        onDone: [
          { guard: "concernStartsUp", target: "starting", actions: ["recordCreated", "startQuick", "startConcern"] },
          { target: "ready", actions: ["recordCreated", "startQuick", "startConcern", "reportReady"] },
        ],
        onError: { target: "failed", actions: ["recordError", "reportFailed"] },
      },
    },
    // The concern runs its start-up work; the runtime waits (the next plugin may depend on it).
    starting: {
      on: {
        "CONCERN.STARTED": { target: "ready", actions: "reportReady" },
        "CONCERN.START_FAILED": { target: "unmaking", actions: ["recordError", "recordStartFailure"] },
        "PLUGIN.DESTROY": "destroying",
      },
    },
    // A start-up that failed: the instance was made, so it is destroyed before the failure is reported.
    unmaking: {
      entry: "destroyingQuick",
      exit: ["stopConcern", "stopQuick"],
      invoke: {
        src: "destroy",
        input: ({ context }) => ({ tag: context.tag, host: context.host }),
        onDone: { target: "failed", actions: "reportStartFailed" },
        onError: { target: "failed", actions: "reportStartFailed" },
      },
    },
    ready: { on: { "PLUGIN.DESTROY": "destroying" } },
    // The concern outlives the instance's destroy, which may ask it to wind down (a cron plugin cancels its runs).
    destroying: {
      entry: "destroyingQuick",
      exit: ["stopConcern", "stopQuick"],
      // destroyPlugin logs its own errors and never rejects.
      invoke: { src: "destroy", input: ({ context }) => ({ tag: context.tag, host: context.host }), onDone: "destroyed", onError: "destroyed" },
    },
    // A plugin that failed to create has already released what it made (or `unmaking` released it).
    failed: { type: "final" },
    // The runtime actor learns of it from this actor's done event, sent once it has fully stopped.
    destroyed: { type: "final" },
  },
});
