// The request/answer convention of concern actors: an event that asks for work carries a
// `requestId`, and the actor emits one `answer` for it when the work is done (actors/ask.ts waits
// for it). Events that a guard refuses get no answer: the asker checks `can()` first.

import { sendParent, type EventObject, type MachineContext } from "xstate";
import type { ConcernStartup } from "./plugin.machine.js";

/** For a concern declared with `startup`: its start-up work is done (the plugin becomes ready). Typed for the machine using it. */
export const reportStarted = <C extends MachineContext, E extends EventObject>() => sendParent<C, E, undefined, ConcernStartup, E>({ type: "CONCERN.STARTED" });

/** For a concern declared with `startup`: its start-up failed with the event's `error` (the plugin is destroyed and fails the runtime). */
export const reportStartFailed = <C extends MachineContext, E extends EventObject>() =>
  sendParent<C, E, undefined, ConcernStartup, E>(({ event }) => ({ type: "CONCERN.START_FAILED", error: (event as { error?: unknown }).error }));

export interface Asked {
  requestId: string;
}

export type Answer = { type: "answer"; requestId: string; ok: true; output: unknown } | { type: "answer"; requestId: string; ok: false; error: unknown };

/** The answer to request `requestId` from an invoke's done event (use inside emit()). */
export const doneAnswer = (requestId: string | null, event: unknown): Answer => ({
  type: "answer",
  requestId: requestId ?? "",
  ok: true,
  output: (event as { output?: unknown }).output,
});

/** The failure of request `requestId` from an invoke's error event (use inside emit()). */
export const failedAnswer = (requestId: string | null, event: unknown): Answer => ({
  type: "answer",
  requestId: requestId ?? "",
  ok: false,
  error: (event as { error?: unknown }).error,
});
