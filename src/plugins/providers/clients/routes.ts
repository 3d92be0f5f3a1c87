// The routes of a `clients` provider under /api/plugins/<tag>/: list the clients (declared, named and
// seen) and the groups, name a client, change or remove one named through the API, pause a group and
// end its pause. Bodies are checked here, every field, before anything is asked (400 naming the field);
// the rules that depend on the state (a name taken, a client declared, a group unknown) are the guards
// of the provider's actor (machines/clients.machine.ts), which makes every change.

import type { ClientChanges, ClientsContext, GroupPause, NamedClient } from "../../../../machines/clients.machine.js";
import { clientIdOf } from "../../../engine/clients.js";
import { parseDuration } from "../../../engine/duration.js";
import { bodyField, RouteError, type PluginRoute, type RoutePlugin } from "../../../registry/control.js";
import type { ArgProblem } from "../../../registry/types.js";
import { clientProblems, macOf } from "./args.js";
import type { ClientRecord, SeenClient } from "./directory.js";
import type { ClientsProvider } from "./provider.js";
import { clientAnswerSchema, clientChangesBody, clientNameParams, clientsListSchema, groupParams, groupsListSchema, newClientBody, okSchema, pauseAnswerSchema, pauseBody } from "./schemas.js";

/** Longest pause. */
export const MAX_PAUSE_MS = 7 * 86_400_000;

type Plugin = RoutePlugin<ClientsProvider>;
type Lists = Omit<NamedClient, "name">;
const LISTS = ["addresses", "macs", "ids", "groups"] as const;

/** `macs[0]` for ["macs", 0]. */
const fieldOf = (path: readonly (string | number)[]): string => path.map((p, i) => (typeof p === "number" ? `[${p}]` : i === 0 ? p : `.${p}`)).join("");

function refuse(problems: ArgProblem[]): never {
  const message = problems.map((p) => `${fieldOf(p.path)}: ${p.message}`).join("; ");
  throw new RouteError("invalid_client", message, { errors: problems.map((p) => ({ field: fieldOf(p.path), message: p.message })) });
}

/** The lists as the directory keeps them: MACs and ids lower-case, each entry once. */
function normalised<T extends Partial<Lists>>(c: T): T {
  const out: Partial<Lists> = {};
  for (const key of LISTS) {
    const list = c[key];
    if (list === undefined) continue;
    const mapped = key === "macs" ? list.map((m) => macOf(m) ?? m) : key === "ids" ? list.map((id) => clientIdOf(id) ?? id) : list;
    out[key] = [...new Set(mapped)];
  }
  return { ...c, ...out };
}

/** Identifiers of `c` that another client has already (one identifier, one client, as in the configuration). */
function conflicts(c: Partial<Lists>, others: readonly ClientRecord[]): ArgProblem[] {
  const owners = new Map<string, string>();
  for (const o of others) {
    for (const a of o.addresses) owners.set(`addresses ${a}`, o.name);
    for (const m of o.macs) owners.set(`macs ${macOf(m) ?? m}`, o.name);
    for (const id of o.ids) owners.set(`ids ${clientIdOf(id) ?? id}`, o.name);
  }
  const problems: ArgProblem[] = [];
  for (const key of ["addresses", "macs", "ids"] as const) {
    (c[key] ?? []).forEach((value, i) => {
      const owner = owners.get(`${key} ${value}`);
      if (owner !== undefined) problems.push({ path: [key, i], message: `${value} already identifies client '${owner}'` });
    });
  }
  return problems;
}

/** Problems of the fields given (absent lists are not checked), of identifiers other clients have, and of a client left with none. */
function check(plugin: Plugin, c: Partial<Lists> & { name?: string }, current: ClientRecord | null): void {
  const directory = plugin.view.directory;
  const groups = new Set(directory.groups().map((g) => g.name));
  const given = { name: c.name, addresses: c.addresses ?? [], macs: c.macs ?? [], ids: c.ids ?? [], groups: c.groups ?? [] };
  const problems = clientProblems(given, groups);
  if (problems.length > 0) refuse(problems);
  const others = directory.clients().filter((o) => o.name !== (current?.name ?? c.name));
  const taken = conflicts(normalised(c), others);
  if (taken.length > 0) refuse(taken);
  const merged = { ...(current ?? { addresses: [], macs: [], ids: [] }), ...c };
  if (merged.addresses.length + merged.macs.length + merged.ids.length === 0) {
    refuse([{ path: ["addresses"], message: "a client needs at least one address, MAC or id (addresses, macs and ids are all empty): nothing would identify it" }]);
  }
}

const seenStats = (s: SeenClient | undefined) =>
  s === undefined ? null : { address: s.address, mac: s.mac, id: s.id, hostname: s.hostname, first_seen_ms: s.first_seen_ms, last_seen_ms: s.last_seen_ms, queries: s.queries };

function describe(c: ClientRecord, seen: ReadonlyMap<string, SeenClient>) {
  return { name: c.name, source: c.source, addresses: c.addresses, macs: c.macs, ids: c.ids, groups: c.groups, seen: seenStats(seen.get(c.name)) };
}

const seenByName = (plugin: Plugin): Map<string, SeenClient> => {
  const out = new Map<string, SeenClient>();
  for (const s of plugin.view.directory.seen()) if (s.name !== null) out.set(s.name, s);
  return out;
};

function groupsOf(plugin: Plugin) {
  const pauses = (plugin.concern.snapshot().context as ClientsContext).pauses;
  const clients = plugin.view.directory.clients();
  return plugin.view.directory.groups().map((g) => ({
    name: g.name,
    addresses: g.addresses,
    members: clients.filter((c) => c.groups.includes(g.name)).map((c) => c.name),
    paused_until_ms: pauses.find((p) => p.group === g.name)?.paused_until_ms ?? null,
  }));
}

const namedRecord = (plugin: Plugin, name: string): ClientRecord | null => plugin.view.directory.clients().find((c) => c.name === name && c.source === "api") ?? null;

const listRoute: PluginRoute<ClientsProvider> = {
  method: "GET",
  role: "viewer",
  path: "clients",
  summary: "Clients: declared and named ones with what their queries showed, the clients seen but not named, and the groups",
  schema: { response: { 200: clientsListSchema } },
  handle(_req, plugin) {
    const byName = seenByName(plugin);
    const unnamed = plugin.view.directory
      .seen()
      .filter((s) => s.name === null)
      // Among equal times, the one first seen last comes first (the directory keeps them in the order first seen).
      .reverse()
      .sort((a, b) => b.last_seen_ms - a.last_seen_ms)
      .map((s) => ({ key: s.key, ...seenStats(s) }));
    return { ok: true, clients: plugin.view.directory.clients().map((c) => describe(c, byName)), seen: unnamed, groups: groupsOf(plugin) };
  },
};

const nameRoute: PluginRoute<ClientsProvider> = {
  method: "POST",
  role: "operator",
  path: "clients",
  audit: (req) => `name client ${bodyField(req.body, "name")}`,
  summary: "Name a client (a seen one, by its address, MAC or id) and put it in groups; kept in the state file",
  description:
    "Every field is checked first (400 invalid_client naming it: a malformed address, MAC or id, an unknown group, an identifier another client has). " +
    "409 client_exists: a declared client, a named client or a group has the name. The next query of the client is identified by the name.",
  status: 201,
  invalidBody: "invalid_client",
  errors: ["invalid_client", "client_exists", "clients_state_write_failed"],
  schema: { body: newClientBody, response: { 201: clientAnswerSchema } },
  async handle(req, plugin) {
    const body = req.body as Partial<Lists> & { name: string };
    check(plugin, body, null);
    const client = normalised({ name: body.name, addresses: body.addresses ?? [], macs: body.macs ?? [], ids: body.ids ?? [], groups: body.groups ?? [] });
    const out = (await plugin.concern.ask({ type: "CLIENTS.NAME", client, at: plugin.view.now() })) as NamedClient;
    return { ok: true, client: describe({ ...out, source: "api" }, seenByName(plugin)) };
  },
};

const updateRoute: PluginRoute<ClientsProvider> = {
  method: "PUT",
  role: "operator",
  path: "clients/:name",
  audit: (req) => `change client ${req.params.name ?? ""}`,
  summary: "Change a client named through the API: each list given replaces its own",
  invalidBody: "invalid_client",
  errors: ["invalid_client", "client_not_found", "client_declared", "clients_state_write_failed"],
  schema: { params: clientNameParams, body: clientChangesBody, response: { 200: clientAnswerSchema } },
  async handle(req, plugin) {
    const name = req.params.name;
    const changes = normalised((req.body ?? {}) as ClientChanges);
    const current = namedRecord(plugin, name);
    // Without a named client of that name the actor refuses (404, or 409 for a declared one): nothing to check against.
    if (current !== null) check(plugin, changes, current);
    const out = (await plugin.concern.ask({ type: "CLIENTS.UPDATE", name, changes, at: plugin.view.now() })) as NamedClient;
    return { ok: true, client: describe({ ...out, source: "api" }, seenByName(plugin)) };
  },
};

const removeRoute: PluginRoute<ClientsProvider> = {
  method: "DELETE",
  role: "operator",
  path: "clients/:name",
  audit: (req) => `forget client ${req.params.name ?? ""}`,
  summary: "Forget a client named through the API (its queries are then those of a seen client)",
  errors: ["client_not_found", "client_declared", "clients_state_write_failed"],
  schema: { params: clientNameParams, response: { 200: okSchema } },
  async handle(req, plugin) {
    await plugin.concern.ask({ type: "CLIENTS.REMOVE", name: req.params.name, at: plugin.view.now() });
    return { ok: true };
  },
};

const groupsRoute: PluginRoute<ClientsProvider> = {
  method: "GET",
  role: "viewer",
  path: "groups",
  summary: "Groups with their addresses, members and pause",
  schema: { response: { 200: groupsListSchema } },
  handle(_req, plugin) {
    return { ok: true, groups: groupsOf(plugin) };
  },
};

/** Milliseconds of a pause, or a 400 naming the field. */
function pauseLength(raw: string | number): number {
  let ms: number;
  try {
    ms = parseDuration(raw);
  } catch (err) {
    throw new RouteError("invalid_pause", `duration: ${(err as Error).message}`);
  }
  if (ms < 1 || ms > MAX_PAUSE_MS) throw new RouteError("invalid_pause", `duration: a pause lasts from 1ms to 7d (got ${String(raw)})`);
  return ms;
}

const pauseRoute: PluginRoute<ClientsProvider> = {
  method: "POST",
  role: "operator",
  path: "groups/:group/pause",
  audit: (req) => `pause group ${req.params.group ?? ""} for ${bodyField(req.body, "duration")}`,
  summary: "Pause a group's blocking: the provider's `pause` matchers answer false for its clients until the pause ends by itself",
  description: "A pause of a paused group replaces it (the new end counts from now). Kept in the state file: a restart or reload before the end keeps it.",
  invalidBody: "invalid_pause",
  errors: ["invalid_pause", "group_not_found", "clients_state_write_failed"],
  schema: { params: groupParams, body: pauseBody, response: { 200: pauseAnswerSchema } },
  async handle(req, plugin) {
    const duration_ms = pauseLength((req.body as { duration: string | number }).duration);
    const out = (await plugin.concern.ask({ type: "CLIENTS.PAUSE", group: req.params.group, duration_ms, at: plugin.view.now() })) as GroupPause;
    return { ok: true, ...out };
  },
};

const resumeRoute: PluginRoute<ClientsProvider> = {
  method: "DELETE",
  role: "operator",
  path: "groups/:group/pause",
  audit: (req) => `resume group ${req.params.group ?? ""}`,
  summary: "End a group's pause now (a group not paused stays so)",
  errors: ["group_not_found", "clients_state_write_failed"],
  schema: { params: groupParams, response: { 200: pauseAnswerSchema } },
  async handle(req, plugin) {
    await plugin.concern.ask({ type: "CLIENTS.RESUME", group: req.params.group, at: plugin.view.now() });
    return { ok: true, group: req.params.group, paused_until_ms: null };
  },
};

export const clientsRoutes: readonly PluginRoute<ClientsProvider>[] = [listRoute, nameRoute, updateRoute, removeRoute, groupsRoute, pauseRoute, resumeRoute];
