// One quick-setup instance (a sequence step `exec: forward 1.1.1.1`, `matches: qname domain:x`, a
// cron executor `sleep 50`): an anonymous plugin made by its parent's create and destroyed by its
// parent's destroy (src/registry/runtime.ts). Its actor is a child of the parent's plugin actor
// (machines/plugin.machine.ts), systemId `runtime:<n>/plugin:<parent>/quick:<internal tag>`, so
// /api/actors shows it with its type: `ready` from the parent's create, `destroying` while the
// parent's destroy takes it down; the parent stops it once that destroy has returned. It runs no
// concern (see CreatedPlugin.quick).

import { setup } from "xstate";

/** What the plugin actor learns of each quick-setup instance its create made. */
export interface QuickSetup {
  /** The internal tag (qs.exec.<parent>.<i>.<type>, ...), also its metrics label. */
  tag: string;
  type: string;
  kind: string;
}

export type QuickEvent = { type: "QUICK.DESTROY" };

export const quickSystemId = (pluginSystemId: string, tag: string): string => `${pluginSystemId}/quick:${tag}`;

export const quickMachine = setup({
  types: {
    context: {} as QuickSetup,
    events: {} as QuickEvent,
    input: {} as QuickSetup,
  },
}).createMachine({
  id: "quick",
  initial: "ready",
  context: ({ input }) => ({ tag: input.tag, type: input.type, kind: input.kind }),
  states: {
    ready: { on: { "QUICK.DESTROY": "destroying" } },
    destroying: {},
  },
});
