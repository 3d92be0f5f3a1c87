// Runtime changes that travel between processes: a concern event one process's actor took, replayed
// by the same plugin's actor elsewhere — another member of a Redis cluster (src/cluster/cluster.ts),
// or this instance's data-plane workers (./workers/). One shape (SharedChange) and one replay
// (the plugin type's `shared.replay`) for both.

import type { AnyActorRef } from "xstate";
import { concernActor, type AppActor } from "../../actors/app.actor.js";
import { ask } from "../../actors/ask.js";
import type { ApplyOutcome, SharedChange } from "../cluster/cluster.js";
import type { Logger } from "../observability/logger.js";
import type { Catalog } from "../registry/catalog.js";
import type { Runtime } from "../registry/runtime.js";

/** What these procedures read of the App. */
export interface ChangeHost {
  actor: AppActor;
  catalog: Catalog;
  /** The generation answering queries. */
  runtime: Runtime | null;
  log: Logger;
  /** This process is a data-plane worker (it takes its primary's changes of either scope). */
  worker: boolean;
}

function sharedOf(host: ChangeHost, type: string) {
  const found = host.catalog.lookup(type);
  return "def" in found ? found.def.control?.shared : undefined;
}

/** An event as it travels: its plain data (an ask's reply address and the like left out). */
function plainEvent(event: { type: string }): SharedChange["event"] {
  return JSON.parse(JSON.stringify(event)) as SharedChange["event"];
}

/**
 * The change `event`, received by `target`, makes when `target` is a concern actor of the running
 * generation whose plugin shares that event (whoever asked: the API, a cron job, a download, a
 * cluster member); null otherwise.
 */
export function sharedChangeOf(host: ChangeHost, target: AnyActorRef, event: { type: string }): SharedChange | null {
  const g = host.actor.getSnapshot().context.current;
  if (g === null || !host.runtime) return null;
  for (const live of host.runtime.plugins.values()) {
    if (concernActor(host.actor.system, g, live.tag) !== target) continue;
    return sharedOf(host, live.type)?.events.includes(event.type) ? { tag: live.tag, type: live.type, event: plainEvent(event) } : null;
  }
  return null;
}

/** The shared changes that bring a fresh worker to the state of this process's concern actors (matcher modes). */
export function currentChanges(host: ChangeHost, tell: (change: SharedChange) => void): void {
  const g = host.actor.getSnapshot().context.current;
  if (g === null) return;
  const now = Date.now();
  for (const live of host.runtime?.plugins.values() ?? []) {
    const shared = sharedOf(host, live.type);
    const actor = shared?.current ? concernActor(host.actor.system, g, live.tag) : undefined;
    if (!shared?.current || !actor) continue;
    const snap = actor.getSnapshot() as { value: unknown; context: unknown };
    for (const event of shared.current(snap, now)) tell({ tag: live.tag, type: live.type, event });
  }
}

/** A change from another member (or, in a worker, from its primary), asked of this process's concern actor for the same plugin, as its API would. */
export async function applySharedChange(host: ChangeHost, change: SharedChange, from: string): Promise<ApplyOutcome> {
  const g = host.actor.getSnapshot().context.current;
  const live = host.runtime?.plugins.get(change.tag);
  const shared = sharedOf(host, change.type);
  // Another member's changes are cluster-wide ones only; a worker takes its primary's of either scope.
  const inScope = shared?.scope !== "workers" || host.worker;
  const event = live?.type === change.type && inScope && shared?.events.includes(change.event.type) ? shared.replay(change.event, Date.now()) : null;
  const actor = g === null || event === null ? undefined : concernActor(host.actor.system, g, change.tag);
  if (!actor || event === null) {
    host.log.debug({ target: "cluster", from, plugin: change.tag, type: change.type, event: change.event.type }, "a change from another member does not apply here");
    return "ignored";
  }
  await ask(actor, event);
  host.log.info({ target: "cluster", from, plugin: change.tag, event: event.type }, "applied a change from another member");
  return "applied";
}
