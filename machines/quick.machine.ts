// One quick-setup instance (a sequence step `exec: forward 1.1.1.1`, `matches: qname domain:x`, a
// cron executor `sleep 50`): an anonymous plugin made by its parent's create and destroyed by its
// parent's destroy (src/registry/runtime.ts). Its actor is a child of the parent's plugin actor
// (machines/plugin.machine.ts), systemId `runtime:<n>/plugin:<parent>/quick:<internal tag>`, so
// /api/actors shows it with its type: `ready` from the parent's create, `destroying` while the
// parent's destroy takes it down; the parent stops it once that destroy has returned. It runs no
// concern (see CreatedPlugin.quick), except where its type declares `quickConcern` (an ipset's batch
// writer): that one is its child, `…/quick:<tag>/<concern id>`, from its start until it is stopped.

import { setup, type AnyActorLogic } from "xstate";

/** What the plugin actor learns of each quick-setup instance its create made. */
export interface QuickSetup {
  /** The internal tag (qs.exec.<parent>.<i>.<type>, ...), also its metrics label. */
  tag: string;
  type: string;
  kind: string;
  /** The concern its type runs for quick-setup instances too (PluginControl.quickConcern), or none. */
  concern?: { id: string; logic: AnyActorLogic; input?: unknown } | null;
}

export interface QuickInput extends QuickSetup {
  /** This actor's systemId: its concern's is `<systemId>/<concern id>`. */
  systemId?: string;
}

export interface QuickContext {
  tag: string;
  type: string;
  kind: string;
  /** systemId of its concern actor, or null. */
  concern: string | null;
}

export type QuickEvent = { type: "QUICK.DESTROY" };

export const quickSystemId = (pluginSystemId: string, tag: string): string => `${pluginSystemId}/quick:${tag}`;

export const quickMachine = setup({
  types: {
    context: {} as QuickContext,
    events: {} as QuickEvent,
    input: {} as QuickInput,
  },
}).createMachine({
  id: "quick",
  initial: "ready",
  context: ({ input, spawn }) => {
    const concern = input.concern && input.systemId !== undefined ? `${input.systemId}/${input.concern.id}` : null;
    if (input.concern && concern !== null) spawn(input.concern.logic, { systemId: concern, input: input.concern.input });
    return { tag: input.tag, type: input.type, kind: input.kind, concern };
  },
  states: {
    ready: { on: { "QUICK.DESTROY": "destroying" } },
    destroying: {},
  },
});
