// What /api/actors shows: every actor in the system with its state and a small context summary.

import type { AnyActorRef, InspectionEvent } from "xstate";
import type { ActorTransition, Bus } from "../src/bus.js";

export interface ActorInfo {
  /** systemId (app, reload, runtime:3) or the path of a child (runtime:3/plugin:main). */
  id: string;
  parent: string | null;
  /** active, done, error, stopped */
  status: string;
  state: unknown;
  context: Record<string, unknown>;
}

interface Inspectable {
  id: string;
  systemId?: string;
  _parent?: Inspectable;
  getSnapshot(): { status: string; value?: unknown; context?: unknown; children?: Record<string, AnyActorRef | undefined> };
}

export function actorPath(ref: AnyActorRef): string {
  const a = ref as unknown as Inspectable;
  if (a.systemId) return a.systemId;
  const parent = a._parent;
  return parent ? `${actorPath(parent as unknown as AnyActorRef)}/${a.id}` : a.id;
}

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && Object.getPrototypeOf(v) === Object.prototype;

/** Primitives as they are; long strings cut; plain records (one level, like the reload status) kept; collections summarised by size; functions and objects with behaviour left out. */
export function summarise(context: unknown, depth = 0): Record<string, unknown> {
  if (context === null || typeof context !== "object") return {};
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(context)) {
    if (value === null || typeof value === "number" || typeof value === "boolean") out[key] = value;
    else if (typeof value === "string") out[key] = value.length > 300 ? `${value.slice(0, 300)}…` : value;
    else if (Array.isArray(value)) out[key] = value.length <= 16 && value.every((v) => typeof v === "number" || typeof v === "string") ? value : `[${value.length} items]`;
    else if (value instanceof Map || value instanceof Set) out[key] = `[${value.size} entries]`;
    else if (depth === 0 && isRecord(value)) out[key] = summarise(value, 1);
  }
  return out;
}

export function listActors(root: AnyActorRef): ActorInfo[] {
  const out: ActorInfo[] = [];
  const visit = (ref: AnyActorRef, parent: string | null): void => {
    const snap = (ref as unknown as Inspectable).getSnapshot();
    const id = actorPath(ref);
    out.push({ id, parent, status: snap.status, state: snap.value ?? null, context: summarise(snap.context) });
    for (const child of Object.values(snap.children ?? {})) if (child) visit(child, id);
  };
  visit(root, null);
  return out;
}

/**
 * An `inspect` option for createActor that publishes each change of an actor's status, state value or
 * shown context on the bus as `actor.transition` (for /api/actors/stream), for actors outside the
 * app's system (the audit trail's).
 */
export function busInspector(bus: Bus): (ev: InspectionEvent) => void {
  const lastShown = new Map<string, string>();
  return (ev) => {
    if (ev.type !== "@xstate.snapshot") return;
    const snap = ev.snapshot as { status: string; value?: unknown; context?: unknown };
    if (snap.value === undefined || bus.listenerCount("actor.transition") === 0) return;
    const t: ActorTransition = { id: actorPath(ev.actorRef as AnyActorRef), status: snap.status, state: snap.value, context: summarise(snap.context) };
    const shown = JSON.stringify([t.status, t.state, t.context]);
    if (lastShown.get(t.id) === shown) return;
    if (t.status === "active") lastShown.set(t.id, shown);
    else lastShown.delete(t.id);
    bus.emit("actor.transition", t);
  };
}
