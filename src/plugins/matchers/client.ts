// `client <name|group...>`: true when the query's client (as the `clients` provider identified it) is
// one of the named clients or in one of the named groups. Names are checked against the provider's
// declarations, so a typo is a `sluice check` error at its line.

import { ArgError, definePlugin, type ArgProblem, type CheckEnv, type DependencySpec } from "../../registry/types.js";

interface ClientArgs {
  names: string[];
}

const schema = {
  type: "object",
  additionalProperties: false,
  required: ["names"],
  properties: { names: { type: "array", minItems: 1, items: { type: "string", minLength: 1 } } },
} as const;

function check(args: ClientArgs, env: CheckEnv): ArgProblem[] {
  const clients = env.declared("client");
  const groups = env.declared("group");
  if (clients === null && groups === null) return [{ path: ["names"], message: "no `clients` provider declares clients or groups: add one (docs/plugins.md#clients)" }];
  const known = new Set([...(clients?.names ?? []), ...(groups?.names ?? [])]);
  return args.names.flatMap((name, i) => (known.has(name) ? [] : [{ path: ["names", i], message: `unknown client or group '${name}' (declared: ${[...known].join(", ") || "none"})` }]));
}

function dependencies(_args: ClientArgs, env: CheckEnv): DependencySpec[] {
  const owner = env.declared("client") ?? env.declared("group");
  return owner ? [{ argsPath: ["names"], target: owner.tag, kind: "provider", pluginType: "clients" }] : [];
}

export const clientMatcher = definePlugin<ClientArgs, "matcher">({
  type: "client",
  kind: "matcher",
  feature: "core",
  summary: "Matches when the query's client is one of the named clients or in one of the named groups (see `clients`).",
  schema,
  shorthand: (raw) => (typeof raw === "string" ? { names: raw.split(/\s+/).filter((s) => s !== "") } : Array.isArray(raw) ? { names: raw as unknown[] } : raw),
  quickSetup(param) {
    const names = param.split(/\s+/).filter((s) => s !== "");
    if (names.length === 0) throw new ArgError("client needs at least one client or group name");
    return { names };
  },
  check,
  dependencies,
  create(args) {
    const names = args.names;
    const n = names.length;
    return {
      match(dns) {
        const c = dns.client;
        if (c === null) return false;
        const of = c.memberOf;
        for (let i = 0; i < n; i++) if (of.has(names[i])) return true;
        return false;
      },
    };
  },
});
