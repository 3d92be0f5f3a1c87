// Mirrors a generation's plugin lifecycle (reported by registry/runtime.ts) into its runtime actor.

import type { AnyActorRef } from "xstate";
import type { RuntimeEvent } from "../machines/runtime.machine.js";
import type { RuntimeObserver } from "../src/registry/runtime.js";
import type { AppActor } from "./app.actor.js";

export interface GenerationObserver extends RuntimeObserver {
  runtime(event: Extract<RuntimeEvent, { type: `RUNTIME.${string}` }>): void;
}

export function runtimeObserver(app: AppActor, generation: number): GenerationObserver {
  const send = (event: RuntimeEvent): void => {
    const actor = app.system.get(`runtime:${generation}`) as AnyActorRef | undefined;
    if (!actor) throw new Error(`runtime:${generation} is not in the actor system (event ${event.type})`);
    actor.send(event);
  };
  return {
    creating: (tag, type, kind) => send({ type: "PLUGIN.CREATING", tag, type_name: type, kind }),
    ready: (tag) => send({ type: "PLUGIN.READY", tag }),
    failed: (tag, error) => send({ type: "PLUGIN.FAILED", tag, error }),
    destroying: (tag) => send({ type: "PLUGIN.DESTROYING", tag }),
    destroyed: (tag) => send({ type: "PLUGIN.DESTROYED", tag }),
    runtime: (event) => send(event),
  };
}
