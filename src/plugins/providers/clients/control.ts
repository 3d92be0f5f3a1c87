// A `clients` provider's control plane: its `clients:<tag>` actor (machines/clients.machine.ts) bound to
// the instance's work (provider.ts) and its routes (routes.ts).

import { fromPromise } from "xstate";
import { clientsMachine, type ClientsInput, type ClientsWrite } from "../../../../machines/clients.machine.js";
import type { ConcernEvent, PluginControl } from "../../../registry/control.js";
import type { ClientsProvider } from "./provider.js";
import { clientsRoutes } from "./routes.js";

export const clientsControl: PluginControl<ClientsProvider> = {
  concern: (clients, env) => ({
    id: `clients:${env.tag}`,
    logic: clientsMachine.provide({
      actors: {
        // A state file that cannot be read fails the start or reload, located at the plugin.
        load: fromPromise(async () => {
          try {
            return await clients.load();
          } catch (err) {
            throw env.pluginError(err, "could not read its state file");
          }
        }),
        // A data-plane worker's "write" tells the primary of its seen clients; the primary writes the file.
        persist: fromPromise(({ input }: { input: ClientsWrite }) => clients.persist(input)),
        readNeighbours: fromPromise(() => clients.readNeighbours()),
        resolveHostnames: fromPromise(() => clients.resolveHostnames()),
      },
      guards: { clientsCurrent: () => clients.ownsState() },
      actions: {
        publishNamed: ({ context }) => clients.publishNamed(context.named),
        publishPaused: ({ context }) => clients.publishPaused(context.pauses),
      },
    }),
    input: {
      tag: env.tag,
      declared: clients.directory.clients().filter((c) => c.source === "config").map((c) => c.name),
      groups: clients.directory.groups().map((g) => g.name),
      stateIntervalMs: clients.settings.stateIntervalMs,
      neighbourRefreshMs: clients.settings.neighbourRefreshMs,
      hostnameIntervalMs: clients.settings.hostnames === null ? 0 : clients.settings.hostnameIntervalMs,
    } satisfies ClientsInput,
    // The first query after a start or reload already sees the named clients and the pauses.
    startup: true,
  }),
  routes: clientsRoutes,
  // Each instance of a cluster keeps its own clients; an instance's data-plane workers follow its primary.
  shared: { scope: "workers", events: ["CLIENTS.NAME", "CLIENTS.UPDATE", "CLIENTS.REMOVE", "CLIENTS.PAUSE", "CLIENTS.RESUME"], replay: replayClientChange },
};

const isStrings = (v: unknown): v is string[] => Array.isArray(v) && v.every((x) => typeof x === "string");

/** A change the primary's `clients` actor took, as its worker replays it (same clock: `at` stays). */
function replayClientChange(event: Record<string, unknown>): ConcernEvent | null {
  const { type, at, name, group } = event;
  if (typeof at !== "number") return null;
  switch (type) {
    case "CLIENTS.NAME": {
      const c = event.client as Record<string, unknown> | null;
      if (typeof c !== "object" || c === null || typeof c.name !== "string" || ![c.addresses, c.macs, c.ids, c.groups].every(isStrings)) return null;
      return { type, client: { name: c.name, addresses: c.addresses, macs: c.macs, ids: c.ids, groups: c.groups }, at };
    }
    case "CLIENTS.UPDATE": {
      const changes = event.changes as Record<string, unknown> | null;
      if (typeof name !== "string" || typeof changes !== "object" || changes === null) return null;
      const kept = Object.fromEntries(["addresses", "macs", "ids", "groups"].filter((k) => isStrings(changes[k])).map((k) => [k, changes[k]]));
      return { type, name, changes: kept, at };
    }
    case "CLIENTS.REMOVE":
      return typeof name === "string" ? { type, name, at } : null;
    case "CLIENTS.PAUSE":
      return typeof group === "string" && typeof event.duration_ms === "number" && event.duration_ms > 0 ? { type, group, duration_ms: event.duration_ms, at } : null;
    case "CLIENTS.RESUME":
      return typeof group === "string" ? { type, group, at } : null;
    default:
      return null;
  }
}
