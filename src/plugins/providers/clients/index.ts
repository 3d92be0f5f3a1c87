// `clients`: names the devices that ask and groups them. Each query's client is identified once,
// before the sequence (src/plugins/servers/handle.ts), from its address or CIDR, its MAC (kernel
// neighbour table, or the EDNS option dnsmasq adds), a DoH path id, a DoT server-name id, or the
// ECS address a trusted forwarder sends; `client <name|group>` matches on it, the query recorder
// keeps the name and groups, and a group pause turns the `pause` matchers off for that group.
// Clients named through the API and group pauses are kept in a state file (control.ts, routes.ts).
// See docs/plugins.md#clients.

import { parseDuration } from "../../../engine/duration.js";
import { parseBootstrap } from "../../../engine/upstream/address.js";
import { definePlugin } from "../../../registry/types.js";
import { checkClients, clientsDeclare, clientsDependencies, clientsSchema, type ClientsArgs } from "./args.js";
import { clientsControl } from "./control.js";
import { Directory } from "./directory.js";
import { ClientsProvider } from "./provider.js";

export const clientsProvider = definePlugin<ClientsArgs, "provider", ClientsProvider>({
  type: "clients",
  kind: "provider",
  feature: "core",
  summary: "Named clients and groups: identifies who asks (address, MAC, DoH/DoT client id, trusted ECS) for `client` and the records.",
  dataFiles: (args) => [{ path: args.state_file }],
  schema: clientsSchema,
  runtimeWide: true,
  check: checkClients,
  dependencies: clientsDependencies,
  declares: clientsDeclare,
  create(args, ctx) {
    const shift = ctx.services.clockShift;
    const now = (): number => Date.now() + shift.ms;
    const counter = ctx.services.metrics.counter("client_group_queries_total", "Queries by client group (a client in two groups counts in both)", ["plugin_tag", "group"]);
    const directory = new Directory(args, { now, groupCell: (group) => counter({ plugin_tag: ctx.tag, group }) });
    const settings = {
      shownPath: args.state_file,
      path: ctx.resolvePath(args.state_file),
      stateIntervalMs: parseDuration(args.state_interval),
      neighbourRefreshMs: parseDuration(args.neighbour_refresh),
      hostnames: args.hostnames === null ? null : parseBootstrap(args.hostnames),
      hostnameIntervalMs: parseDuration(args.hostname_interval),
    };
    return new ClientsProvider(ctx.tag, directory, settings, ctx.log, now, ctx.control(ctx.tag), ctx.services.process);
  },
  control: clientsControl,
});
