// A reload asked for by an actor that needs it to have happened (a replica's follower after saving
// its primary's configuration): asked for as POST /api/reload asks, and awaited by following the
// app actor's snapshots, never by polling. A reload already pending or running may have read the
// file before the save, so it ends first; then one is asked for, and the wait ends with it.

import type { SnapshotFrom } from "xstate";
import type { appMachine, ReloadState } from "../machines/app.machine.js";
import { ActorGoneError, RefusedError, refusingGuard } from "./ask.js";

type AppSnapshot = SnapshotFrom<typeof appMachine>;

/** The part of the app actor this needs (actors/app.actor.ts AppActor). */
interface ReloadingApp {
  getSnapshot(): AppSnapshot;
  send(event: { type: "RELOAD.REQUEST" }): void;
  subscribe(observer: { next: (s: AppSnapshot) => void; error: () => void; complete: () => void }): { unsubscribe(): void };
}

const REQUEST = { type: "RELOAD.REQUEST" } as const;

/**
 * Resolves with how the reload ended (ok or failed) once a reload asked for after the call has
 * ended; rejects when the app refuses reloads for another reason than one running (it is stopping),
 * when it stops, or when `signal` aborts (the asking actor was stopped).
 */
export function reloadWhenIdle(app: ReloadingApp, signal: AbortSignal): Promise<ReloadState> {
  return new Promise((resolve, reject) => {
    /** RELOAD.REQUEST was sent; `begun` once the app showed it pending or running. */
    let asked = false;
    let begun = false;
    let ended = false;
    const end = (outcome: { status: ReloadState } | { error: Error }): void => {
      if (ended) return;
      ended = true;
      subscription?.unsubscribe();
      signal.removeEventListener("abort", aborted);
      if ("error" in outcome) reject(outcome.error);
      else resolve(outcome.status);
    };
    const aborted = (): void => end({ error: new Error("the wait for the reload was stopped") });
    const look = (snap: AppSnapshot): void => {
      if (ended) return;
      if (snap.status !== "active") return end({ error: new ActorGoneError("app") });
      const status = snap.context.reload.status;
      if (asked) {
        if (status === "pending" || status === "in_progress") begun = true;
        else if (begun) end({ status });
        return;
      }
      if (snap.can(REQUEST)) {
        asked = true;
        app.send(REQUEST);
        return;
      }
      const guard = refusingGuard(snap, REQUEST);
      // reloadIdle: one is pending or running; the next snapshot that can take the request sends it.
      if (guard !== "reloadIdle") end({ error: new RefusedError("app", guard, REQUEST.type) });
    };
    let subscription: { unsubscribe(): void } | null = null;
    if (signal.aborted) return aborted();
    signal.addEventListener("abort", aborted);
    subscription = app.subscribe({ next: look, error: () => end({ error: new ActorGoneError("app") }), complete: () => end({ error: new ActorGoneError("app") }) });
    look(app.getSnapshot());
  });
}
