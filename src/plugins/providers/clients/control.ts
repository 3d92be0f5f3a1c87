// A `clients` provider's control plane: its `clients:<tag>` actor (machines/clients.machine.ts) bound to
// the instance's work (provider.ts) and its routes (routes.ts).

import { fromPromise } from "xstate";
import { clientsMachine, type ClientsInput, type ClientsWrite } from "../../../../machines/clients.machine.js";
import type { PluginControl } from "../../../registry/control.js";
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
};
