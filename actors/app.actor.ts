// The actor system: the app machine bound to the App's procedures, with every transition of every
// actor (app, config, upgrade, config-follow, runtime:<n>, their plugins and concerns) published on the bus.

import { createActor, fromCallback, fromPromise, sendParent, type Actor, type AnyActorRef, type AnyMachineSnapshot, type SnapshotFrom } from "xstate";
import { configFollowMachine, type ApplyResult, type Fetched } from "../machines/config-follow.machine.js";
import { appMachine, type AppContext, type AppInput, type Prepared, type PrepareInput } from "../machines/app.machine.js";
import { configMachine, type SaveRequest, type SaveResult } from "../machines/config.machine.js";
import { validationMachine, type ValidationRequest } from "../machines/validation.machine.js";
import { concernSystemId } from "../machines/plugin.machine.js";
import { pluginSystemId, type RuntimeContext, type RuntimeHost } from "../machines/runtime.machine.js";
import { upgradeMachine, type RestoredUpgrade, type UpgradeEvent, type UpgradeTrial } from "../machines/upgrade.machine.js";
import type { UpgradeWork } from "../src/app/upgrade-work.js";
import type { ActorTransition, Bus } from "../src/bus.js";
import type { ValidationJob, ValidationOutcome } from "../src/config/validation.js";
import { ActorGoneError, ask } from "./ask.js";
import { reloadWhenIdle } from "./reload-wait.js";
import { actorPath, summarise } from "./inspect.js";

export interface AppProcedures {
  startApi(): Promise<void>;
  /** Reads and checks a configuration and prepares its runtime (nothing is created yet). */
  prepare(input: PrepareInput): Promise<Prepared>;
  /** Closes what outlives generations (listeners, the API) once every generation is gone. */
  stopServices(restart: boolean): Promise<void>;
  /** One configuration save (PUT /api/config); the config actor runs one at a time. */
  saveConfig(request: SaveRequest): Promise<SaveResult>;
  /** Queries now go to this runtime (generation `generation`, just swapped in). */
  activate(runtime: RuntimeHost, generation: number): void;
  /** The first generation could not be built: keep the error (with its diagnostics) for the CLI. */
  startupFailed(error: unknown): void;
  /** One configuration validation in a worker thread; the validation actor runs one at a time. */
  validate(request: ValidationRequest): Promise<unknown>;
  /** A replica's poll: the primary's configuration (GET /api/config), within the body limit in force. */
  fetchPrimary(signal: AbortSignal): Promise<Fetched>;
  /** A replica's save of one pulled version through the config actor (validated; never reloads). */
  savePrimary(fetched: Fetched): Promise<ApplyResult>;
  /** The upgrade actor's work: one upgrade task (up to the switch of `current`; the restart follows), and a trial's confirm or rollback. */
  readonly upgrade: UpgradeWork;
  /** Every event an actor of the system receives (the primary of data-plane workers fans shared changes out from here). */
  observeEvent(target: AnyActorRef, event: { type: string }): void;
}

export type AppActor = Actor<typeof appMachine>;
export type ConfigActor = Actor<typeof configMachine>;
export type UpgradeActor = Actor<typeof upgradeMachine>;
export type ValidationActor = Actor<typeof validationMachine>;

/**
 * xstate starts an invoked promise inside the transition that invokes it; work that touches other
 * actors begins once that transition has finished.
 */
const afterTransition = <T>(work: () => Promise<T>): Promise<T> => Promise.resolve().then(work);

/** The runtime actor of generation `g`, if it is still alive. */
export function runtimeActor(system: AppActor["system"], g: number): AnyActorRef | undefined {
  return system.get(`runtime:${g}`) as AnyActorRef | undefined;
}

/** The runtime (plugins) of generation `g`. */
export function runtimeOf(system: AppActor["system"], g: number | null): RuntimeHost | null {
  if (g === null) return null;
  const snap = runtimeActor(system, g)?.getSnapshot() as { context?: RuntimeContext } | undefined;
  return snap?.context?.host ?? null;
}

/** The plugin actor `plugin:<tag>` of generation `g`. */
export function pluginActor(system: AppActor["system"], g: number, tag: string): AnyActorRef | undefined {
  return system.get(pluginSystemId(g, tag)) as AnyActorRef | undefined;
}

/** The concern actor of a plugin of generation `g` (provider:<tag>, cache:<tag>, ...), if it has one. */
export function concernActor(system: AppActor["system"], g: number, tag: string): AnyActorRef | undefined {
  const plugin = pluginActor(system, g, tag);
  const id = (plugin?.getSnapshot() as { context?: { concern?: string | null } } | undefined)?.context?.concern;
  return id ? (system.get(id) as AnyActorRef | undefined) : undefined;
}

/** How a generation's plugins reach one another's concern actors (reload_provider → provider). */
export function controlResolver(system: AppActor["system"], g: number) {
  return (tag: string) => ({
    ask(event: { type: string } & Record<string, unknown>): Promise<unknown> {
      const actor = concernActor(system, g, tag);
      if (!actor) return Promise.reject(new Error(`plugin '${tag}' has no control actor in this configuration`));
      return ask(actor, event);
    },
  });
}

export { concernSystemId };

/**
 * Validates configuration text through the validation actor (one job at a time, off the event
 * loop). Rejects with RefusedError when its queue is full; a stopping application is a failure.
 */
export async function validateConfig(system: AppActor["system"], job: ValidationJob, transfer: ArrayBuffer[] = []): Promise<ValidationOutcome> {
  const stopping: ValidationOutcome = { ok: false, kind: "failed", message: "the application is stopping" };
  const actor = system.get("validation") as ValidationActor | undefined;
  if (!actor) return stopping;
  try {
    return (await ask(actor, { type: "VALIDATE", job, transfer })) as ValidationOutcome;
  } catch (err) {
    if (err instanceof ActorGoneError) return stopping;
    throw err;
  }
}

/** The trial's health: the app serving is TRIAL.HEALTHY; the app leaving `running` first is TRIAL.START_FAILED with its error. */
function trialHealth(snap: SnapshotFrom<typeof appMachine>): UpgradeEvent | null {
  if (snap.status === "active" && snap.matches({ running: "serving" })) return { type: "TRIAL.HEALTHY" };
  if (snap.status !== "active" || !snap.matches("running")) return { type: "TRIAL.START_FAILED", error: snap.context.error ?? "the application stopped before it served" };
  return null;
}

/** Watches the app actor for the trial (its reports are sent in the turn of the app's transition). */
const confirmHealth = fromCallback<{ type: string }, void, UpgradeEvent>(({ sendBack, system }) => {
  const app = system.get("app") as AppActor;
  const sub = app.subscribe({
    next: (snap) => {
      const report = trialHealth(snap);
      if (report) sendBack(report);
    },
    error: (err: unknown) => sendBack({ type: "TRIAL.START_FAILED", error: err instanceof Error ? err.message : String(err) }),
  });
  return () => sub.unsubscribe();
});

export function createAppActor(app: AppProcedures, bus: Bus, input: AppInput): AppActor {
  const machine = appMachine.provide({
    actors: {
      startApi: fromPromise(() => afterTransition(() => app.startApi())),
      prepare: fromPromise(({ input: p }: { input: PrepareInput }) => afterTransition(() => app.prepare(p))),
      stopServices: fromPromise(({ input: p }: { input: { restart: boolean } }) => afterTransition(() => app.stopServices(p.restart))),
      config: configMachine.provide({
        actors: { save: fromPromise(({ input: request }: { input: SaveRequest }) => afterTransition(() => app.saveConfig(request))) },
      }),
      validation: validationMachine.provide({
        actors: { validate: fromPromise(({ input: request }: { input: ValidationRequest }) => afterTransition(() => app.validate(request))) },
      }),
      upgrade: upgradeMachine.provide({
        actors: {
          apply: fromPromise(({ input: request }: { input: unknown }) => afterTransition(() => app.upgrade.apply(request))),
          confirmHealth,
          // Recorded at once (not after the transition): a stop asked for during the trial follows right after serving.
          confirmTrial: fromPromise(({ input: trial }: { input: UpgradeTrial }) => new Promise<RestoredUpgrade>((resolve) => resolve(app.upgrade.confirmTrial(trial)))),
          rollBack: fromCallback<{ type: string }, { trial: UpgradeTrial; reason: string }, UpgradeEvent>(({ input, sendBack }) => {
            app.upgrade.rollBack(input.trial, input.reason);
            sendBack({ type: "TRIAL.ROLLED_BACK" });
          }),
        },
        actions: {
          // The app refuses a restart only when it is already stopping (checked before the switch); the next start runs the new release then.
          requestRestart: sendParent({ type: "RESTART" }),
          restartIntoPrevious: ({ context }) => {
            if (context.trial) app.upgrade.restartIntoPrevious(context.trial, context.error ?? "the trial failed");
          },
        },
      }),
      follow: configFollowMachine.provide({
        actors: {
          fetch: fromPromise(({ signal }) => app.fetchPrimary(signal)),
          apply: fromPromise(({ input: fetched }: { input: Fetched }) => afterTransition(() => app.savePrimary(fetched))),
          reload: fromPromise(({ system, signal }) => afterTransition(() => reloadWhenIdle(system.get("app") as AppActor, signal)).then(() => undefined)),
        },
        // Shown by the reload status like a failed reload (ignored while the app is stopping).
        actions: { reportRefused: sendParent((_args, params: { error: string; version: string | null }) => ({ type: "RELOAD.REFUSED", ...params })) },
      }),
    },
    actions: {
      activate: ({ context, system }: { context: AppContext; system: AppActor["system"] }) => {
        const runtime = runtimeOf(system, context.current);
        if (runtime && context.current !== null) app.activate(runtime, context.current);
      },
      reportStartupFailure: ({ event }: { event: unknown }) => app.startupFailed((event as { error?: unknown }).error),
    },
  });
  /** What was last sent for each live actor (by id). */
  const lastShown = new Map<string, string>();
  return createActor(machine, {
    systemId: "app",
    input,
    inspect(ev) {
      if (ev.type === "@xstate.event") return app.observeEvent(ev.actorRef as AnyActorRef, ev.event);
      if (ev.type !== "@xstate.snapshot") return;
      const snap = ev.snapshot as AnyMachineSnapshot;
      if (snap.value === undefined || bus.listenerCount("actor.transition") === 0) return;
      const t: ActorTransition = { id: actorPath(ev.actorRef as AnyActorRef), status: snap.status, state: snap.value as unknown, context: summarise(snap.context as unknown) };
      // A snapshot follows every event an actor takes; only the ones that change what is shown go out.
      const shown = JSON.stringify([t.status, t.state, t.context]);
      if (lastShown.get(t.id) === shown) return;
      if (t.status === "active") lastShown.set(t.id, shown);
      else lastShown.delete(t.id);
      bus.emit("actor.transition", t);
    },
  });
}
