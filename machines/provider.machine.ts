// A provider's reload (spec: provider routes): idle ⇄ reloading. A reload asked for while one runs
// is refused at once (HTTP 409 provider_reload_busy), never queued; the API route and the
// `reload_provider` executor both go through this actor. The `reload` actor (the provider's own
// rebuild-and-swap) is provided by the provider's control (src/plugins/providers/control.ts).

import { assign, emit, fromPromise, setup, stateIn } from "xstate";
import { doneAnswer, failedAnswer, type Answer, type Asked } from "./concern.js";

export interface ProviderReloadOutput {
  /** Rules in the new snapshot. */
  rules: number;
  duration_ms: number;
}

export interface ProviderContext {
  tag: string;
  requestId: string | null;
  reloads: number;
  failures: number;
  /** Rules of the snapshot serving now (null until the first reload reports it). */
  rules: number | null;
  last_error: string | null;
}

export type ProviderEvent = { type: "PROVIDER.RELOAD" } & Asked;

const errorText = (e: unknown): string => (e instanceof Error ? e.message : String(e));

export const providerMachine = setup({
  types: {
    context: {} as ProviderContext,
    events: {} as ProviderEvent,
    emitted: {} as Answer,
    input: {} as { tag: string; rules: number | null },
  },
  actors: {
    reload: fromPromise<ProviderReloadOutput>(() => Promise.reject(new Error("not provided"))),
  },
  guards: {
    /** One reload per provider at a time. */
    providerIdle: stateIn("idle"),
  },
  actions: {
    recordSuccess: assign(({ context, event }) => ({
      reloads: context.reloads + 1,
      rules: (event as unknown as { output: ProviderReloadOutput }).output.rules,
      last_error: null,
    })),
    recordFailure: assign(({ context, event }) => ({ failures: context.failures + 1, last_error: errorText((event as { error?: unknown }).error) })),
    answerDone: emit(({ context, event }) => doneAnswer(context.requestId, event)),
    answerFailed: emit(({ context, event }) => failedAnswer(context.requestId, event)),
  },
}).createMachine({
  id: "provider",
  initial: "idle",
  context: ({ input }) => ({ tag: input.tag, rules: input.rules, requestId: null, reloads: 0, failures: 0, last_error: null }),
  on: {
    "PROVIDER.RELOAD": { guard: "providerIdle", target: ".reloading", actions: assign({ requestId: ({ event }) => event.requestId }) },
  },
  states: {
    idle: {},
    reloading: {
      invoke: {
        src: "reload",
        onDone: { target: "idle", actions: ["recordSuccess", "answerDone"] },
        onError: { target: "idle", actions: ["recordFailure", "answerFailed"] },
      },
    },
  },
});
