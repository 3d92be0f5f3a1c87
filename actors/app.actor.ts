// The actor system: the app machine bound to the App's procedures, with every transition of
// every actor (app, reload, runtime:<n>, their children) published on the bus.

import { createActor, fromPromise, type Actor, type AnyActorRef } from "xstate";
import { appMachine, type ReloadOutcome } from "../machines/app.machine.js";
import { configMachine, type SaveRequest, type SaveResult } from "../machines/config.machine.js";
import type { reloadMachine } from "../machines/reload.machine.js";
import type { Bus } from "../src/bus.js";
import { actorPath } from "./inspect.js";

export interface AppProcedures {
  startApi(): Promise<void>;
  startRuntime(): Promise<{ version: string }>;
  reloadRuntime(): Promise<ReloadOutcome>;
  stopRuntime(restart: boolean): Promise<void>;
  /** One configuration save (PUT /api/config); the config actor runs one at a time. */
  saveConfig(request: SaveRequest): Promise<SaveResult>;
}

export type AppActor = Actor<typeof appMachine>;
export type ReloadActor = Actor<typeof reloadMachine>;
export type ConfigActor = Actor<typeof configMachine>;

/**
 * xstate starts an invoked promise inside the transition that invokes it; the procedures send
 * events back to the app (RUNTIME.NEW, ...), so they begin once that transition has finished.
 */
const afterTransition = <T>(work: () => Promise<T>): Promise<T> => Promise.resolve().then(work);

export function createAppActor(app: AppProcedures, bus: Bus): AppActor {
  const machine = appMachine.provide({
    actors: {
      startApi: fromPromise(() => afterTransition(() => app.startApi())),
      startRuntime: fromPromise(() => afterTransition(() => app.startRuntime())),
      reloadRuntime: fromPromise(() => afterTransition(() => app.reloadRuntime())),
      stopRuntime: fromPromise(({ input }: { input: { restart: boolean } }) => afterTransition(() => app.stopRuntime(input.restart))),
      config: configMachine.provide({
        actors: { save: fromPromise(({ input }: { input: SaveRequest }) => afterTransition(() => app.saveConfig(input))) },
      }),
    },
  });
  return createActor(machine, {
    systemId: "app",
    inspect(ev) {
      if (ev.type !== "@xstate.snapshot") return;
      const snap = ev.snapshot as { value?: unknown };
      if (snap.value === undefined) return;
      bus.emit("actor.transition", { id: actorPath(ev.actorRef as AnyActorRef), state: snap.value });
    },
  });
}
