// Asking an actor for work: check `can(event)` (a refusal names the guard that refused, for the
// API's guard → status table), send it with a requestId, and wait for the matching `answer`
// (machines/concern.ts). Also finds which named guard refused an event.

import { randomUUID } from "node:crypto";
import { getNextTransitions, type AnyActorRef, type AnyMachineSnapshot, type EventObject } from "xstate";
import type { Answer } from "../machines/concern.js";
import { ActorGoneError, RefusedError } from "../src/registry/control.js";

export { ActorGoneError, RefusedError };

type GuardRef = string | { type: string; params?: unknown } | ((...args: never[]) => boolean);
interface BuiltinGuard {
  check: (snapshot: AnyMachineSnapshot, args: { context: unknown; event: EventObject }, params: unknown) => boolean;
  guards?: GuardRef[];
}

function isBuiltin(g: unknown): g is BuiltinGuard {
  return typeof g === "function" && "check" in g;
}

/** The first named guard under `guard` that is false for `event` now; `and()` is searched in order. */
function failingGuard(guard: GuardRef | undefined, snapshot: AnyMachineSnapshot, event: EventObject): string | null {
  if (guard === undefined) return null;
  const args = { context: snapshot.context as unknown, event };
  if (typeof guard === "function") {
    // Inline combinators (and/or/not) carry their operands; `and` is the only one the machines use.
    const parts = isBuiltin(guard) ? guard.guards : undefined;
    if (parts) {
      for (const part of parts) {
        const failing = failingGuard(part, snapshot, event);
        if (failing) return failing;
      }
      return null;
    }
    return (guard as unknown as (a: typeof args) => boolean)(args) ? null : "inline";
  }
  const name = typeof guard === "string" ? guard : guard.type;
  const params = typeof guard === "string" ? undefined : guard.params;
  const impl = (snapshot.machine.implementations.guards as Record<string, unknown>)[name];
  if (isBuiltin(impl)) return impl.check(snapshot, args, impl) ? null : name;
  if (typeof impl === "function") return (impl as (a: typeof args, p: unknown) => boolean)(args, params) ? null : name;
  return name;
}

/** Which named guard keeps `event` from being taken in this snapshot (null when no transition exists for it). */
export function refusingGuard(snapshot: AnyMachineSnapshot, event: EventObject): string | null {
  for (const t of getNextTransitions(snapshot)) {
    if (t.eventType !== event.type) continue;
    const failing = failingGuard(t.guard, snapshot, event);
    if (failing) return failing;
  }
  return null;
}

const idOf = (actor: AnyActorRef): string => (actor as { systemId?: string }).systemId ?? actor.id;

/** Sends `event` if the actor takes it; throws RefusedError naming the guard otherwise. */
export function sendIfAccepted(actor: AnyActorRef, event: EventObject): void {
  const snapshot = actor.getSnapshot() as AnyMachineSnapshot;
  if (snapshot.status !== "active") throw new ActorGoneError(idOf(actor));
  if (!snapshot.can(event)) throw new RefusedError(idOf(actor), refusingGuard(snapshot, event), event.type);
  actor.send(event);
}

/** Sends `event` with a fresh requestId and resolves with the answer's output (rejects with its error). */
export function ask(actor: AnyActorRef, event: EventObject & Record<string, unknown>): Promise<unknown> {
  const requestId = randomUUID();
  const withId = { ...event, requestId };
  return new Promise((resolve, reject) => {
    const cleanup = (): void => {
      answers.unsubscribe();
      lifetime.unsubscribe();
    };
    // Subscribed before sending: some machines answer within the transition itself.
    const answers = actor.on("answer", (a: Answer) => {
      if (a.requestId !== requestId) return;
      cleanup();
      if (a.ok) resolve(a.output);
      else reject(a.error instanceof Error ? a.error : new Error(String(a.error)));
    });
    const lifetime = actor.subscribe({
      complete: () => {
        cleanup();
        reject(new ActorGoneError(idOf(actor)));
      },
      error: () => {
        cleanup();
        reject(new ActorGoneError(idOf(actor)));
      },
    });
    try {
      sendIfAccepted(actor, withId);
    } catch (err) {
      cleanup();
      reject(err instanceof Error ? err : new Error(String(err)));
    }
  });
}
