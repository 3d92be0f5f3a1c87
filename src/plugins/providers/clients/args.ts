// Arguments of the `clients` provider: declared clients and groups, who is believed about a client's
// address and MAC, and where the runtime changes (names given through the API, group pauses) are kept.

import { formatIP, maskIP, unmapIPv4 } from "../../../dns/ip.js";
import { clientIdOf } from "../../../engine/clients.js";
import { durationProblem, parseDuration } from "../../../engine/duration.js";
import { parseBootstrap } from "../../../engine/upstream/address.js";
import { parseIpRule } from "../../../engine/rules/ip.js";
import type { ArgProblem, DependencySpec } from "../../../registry/types.js";

export interface ClientDecl {
  name: string;
  addresses: string[];
  macs: string[];
  ids: string[];
  groups: string[];
}

export interface GroupDecl {
  name: string;
  addresses: string[];
}

export interface ClientsArgs {
  clients: ClientDecl[];
  groups: GroupDecl[];
  /** Declared matchers a group pause turns off for that group's clients. */
  pause: string[];
  /** Forwarders whose ECS address and MAC option (65001) are believed. */
  trusted_forwarders: string[];
  /** A DoH path id or DoT server-name id picks the client even when its address or MAC names another. */
  trust_client_ids: boolean;
  /** DoT: an id is the first label of `<id>.<one of these>`; empty: the first label when a client declares it as an id. */
  tls_server_names: string[];
  /** How often the kernel's neighbour table is read for MAC addresses (Linux); "0s" turns it off. */
  neighbour_refresh: string;
  /** A resolver asked for the PTR name of each address seen (`host:port`); null: none. */
  hostnames: string | null;
  /** How often the clients seen since the last round get their PTR names looked up (with `hostnames`). */
  hostname_interval: string;
  /** Where names given through the API, group assignments and pauses are kept (a relative path is under -d). */
  state_file: string;
  /** How often the seen clients are written to state_file (changes through the API are written at once). */
  state_interval: string;
  /** Undeclared clients remembered at most (the oldest seen first out). */
  max_seen: number;
}

/** A client or group name: what `client <name>` and the API take (no spaces: quick setups split on them). */
export const NAME_PATTERN = "^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$";
const NAME = new RegExp(NAME_PATTERN);
const MAC = /^[0-9a-f]{2}(?::[0-9a-f]{2}){5}$/;

/** `aa:bb:cc:dd:ee:ff` (also with `-`, any case) lower-cased with colons; null when it is not a MAC address. */
export function macOf(text: string): string | null {
  const mac = text.toLowerCase().replaceAll("-", ":");
  return MAC.test(mac) ? mac : null;
}

const strings = { type: "array", items: { type: "string" }, default: [] } as const;

export const clientSchema = {
  type: "object",
  additionalProperties: false,
  required: ["name"],
  properties: { name: { type: "string" }, addresses: strings, macs: strings, ids: strings, groups: strings },
} as const;

export const clientsSchema = {
  type: "object",
  additionalProperties: false,
  properties: {
    clients: { type: "array", items: clientSchema, default: [] },
    groups: {
      type: "array",
      default: [],
      items: { type: "object", additionalProperties: false, required: ["name"], properties: { name: { type: "string" }, addresses: strings } },
    },
    pause: strings,
    trusted_forwarders: strings,
    trust_client_ids: { type: "boolean", default: false },
    tls_server_names: strings,
    neighbour_refresh: { type: "string", default: "30s" },
    hostnames: { type: ["string", "null"], default: null },
    hostname_interval: { type: "string", default: "10s" },
    state_file: { type: "string", minLength: 1, default: "clients.state.json" },
    state_interval: { type: "string", default: "60s" },
    max_seen: { type: "integer", minimum: 1, maximum: 100000, default: 1000 },
  },
} as const;

/** Problems of one client's identifiers (declared, or sent to the API), each at its path. */
export function clientProblems(c: Omit<ClientDecl, "name"> & { name?: string }, groups: ReadonlySet<string>, at: (string | number)[] = []): ArgProblem[] {
  const problems: ArgProblem[] = [];
  if (c.name !== undefined && !NAME.test(c.name)) problems.push({ path: [...at, "name"], message: `'${c.name}' is not a name (letters, digits, '.', '_', '-'; at most 63; no spaces)` });
  c.addresses.forEach((a, i) => {
    try {
      parseIpRule(a);
    } catch (err) {
      problems.push({ path: [...at, "addresses", i], message: (err as Error).message });
    }
  });
  c.macs.forEach((m, i) => {
    if (macOf(m) === null) problems.push({ path: [...at, "macs", i], message: `'${m}' is not a MAC address (six hex pairs: aa:bb:cc:dd:ee:ff)` });
  });
  c.ids.forEach((id, i) => {
    if (clientIdOf(id) === null) problems.push({ path: [...at, "ids", i], message: `'${id}' is not a client id (one DNS label: letters, digits, inner hyphens, at most 63)` });
  });
  c.groups.forEach((g, i) => {
    if (!groups.has(g)) problems.push({ path: [...at, "groups", i], message: `unknown group '${g}'${groups.size > 0 ? ` (groups: ${[...groups].join(", ")})` : " (no group is declared)"}` });
  });
  return problems;
}

export function checkClients(args: ClientsArgs): ArgProblem[] {
  const problems: ArgProblem[] = [];
  const groups = new Set<string>();
  args.groups.forEach((g, i) => {
    if (!NAME.test(g.name)) problems.push({ path: ["groups", i, "name"], message: `'${g.name}' is not a name (letters, digits, '.', '_', '-'; at most 63; no spaces)` });
    else if (groups.has(g.name)) problems.push({ path: ["groups", i, "name"], message: `group '${g.name}' is declared twice` });
    groups.add(g.name);
    g.addresses.forEach((a, j) => {
      try {
        parseIpRule(a);
      } catch (err) {
        problems.push({ path: ["groups", i, "addresses", j], message: (err as Error).message });
      }
    });
  });
  const names = new Set<string>();
  const owners = new Map<string, string>();
  args.clients.forEach((c, i) => {
    problems.push(...clientProblems(c, groups, ["clients", i]));
    if (names.has(c.name)) problems.push({ path: ["clients", i, "name"], message: `client '${c.name}' is declared twice` });
    else if (groups.has(c.name)) problems.push({ path: ["clients", i, "name"], message: `'${c.name}' names a group too: \`client ${c.name}\` must mean one of them` });
    names.add(c.name);
    // One identifier, one client: otherwise which one asked would depend on declaration order.
    const claim = (kind: string, value: string | null, path: (string | number)[], shown = value): void => {
      if (value === null) return;
      const key = `${kind} ${value}`;
      const other = owners.get(key);
      if (other !== undefined && other !== c.name) problems.push({ path, message: `${kind} ${shown} already identifies client '${other}'` });
      else owners.set(key, c.name);
    };
    c.addresses.forEach((a, j) => claim("address", prefixOf(a), ["clients", i, "addresses", j], a));
    c.macs.forEach((m, j) => claim("MAC", macOf(m), ["clients", i, "macs", j]));
    c.ids.forEach((id, j) => claim("id", clientIdOf(id), ["clients", i, "ids", j]));
  });
  args.trusted_forwarders.forEach((a, i) => {
    try {
      parseIpRule(a);
    } catch (err) {
      problems.push({ path: ["trusted_forwarders", i], message: (err as Error).message });
    }
  });
  args.tls_server_names.forEach((n, i) => {
    if (!/^(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)*[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.?$/i.test(n)) problems.push({ path: ["tls_server_names", i], message: `'${n}' is not a host name` });
  });
  try {
    if (parseDuration(args.neighbour_refresh) < 0) problems.push({ path: ["neighbour_refresh"], message: "neighbour_refresh may not be negative" });
  } catch (err) {
    problems.push({ path: ["neighbour_refresh"], message: (err as Error).message });
  }
  if (args.hostnames !== null) {
    try {
      parseBootstrap(args.hostnames);
    } catch {
      problems.push({ path: ["hostnames"], message: `'${args.hostnames}' is not a resolver address (ip, ip:port, [v6]:port)` });
    }
  }
  for (const [key, min, max] of [["hostname_interval", 100, 86_400_000], ["state_interval", 100, 86_400_000]] as const) {
    const problem = durationProblem(key, args[key], min, max);
    if (problem !== null) problems.push({ path: [key], message: problem });
  }
  return problems;
}

/** One text per prefix (IPv4-mapped as IPv4, host bits cleared: `192.168.1.37` = `::ffff:192.168.1.37/128`); null when `rule` is not one. */
function prefixOf(rule: string): string | null {
  try {
    const { ip, bits } = parseIpRule(rule);
    const plain = unmapIPv4(ip);
    const b = plain === ip ? bits : Math.max(0, bits - 96);
    return `${formatIP(maskIP(plain, b))}/${b}`;
  } catch {
    return null;
  }
}

export function clientsDependencies(args: ClientsArgs): DependencySpec[] {
  return args.pause.map((tag, i) => ({ argsPath: ["pause", i], target: tag.replace(/^\$/, ""), kind: "matcher" }));
}

/** What `client <name...>` may name, and which matchers a group pause turns off. */
export function clientsDeclare(args: ClientsArgs): Record<string, readonly string[]> {
  return { client: args.clients.map((c) => c.name), group: args.groups.map((g) => g.name), pausable_matcher: args.pause.map((t) => t.replace(/^\$/, "")) };
}
