// Request and response schemas of the `clients` routes (routes.ts); they are also the OpenAPI
// document's. No imports, so that the dashboard's typecheck can read this file.

/** Most addresses, MACs, ids or groups one client may have through the API. */
export const MAX_IDENTIFIERS = 256;

const list = (description: string) =>
  ({ type: "array", maxItems: MAX_IDENTIFIERS, items: { type: "string", minLength: 1, maxLength: 100 }, description }) as const;

const identifiers = {
  addresses: list("Addresses and CIDRs (192.168.1.37, 192.168.1.0/24, fd00::/64)"),
  macs: list("MAC addresses (aa:bb:cc:dd:ee:ff; '-' and upper case are taken too)"),
  ids: list("Client ids: a DoH path (/dns-query/<id>) or the first label of a DoT server name"),
  groups: list("Declared groups the client is in"),
} as const;

export const newClientBody = {
  type: "object",
  additionalProperties: false,
  required: ["name"],
  properties: {
    name: { type: "string", maxLength: 100, description: "Letters, digits, '.', '_', '-'; at most 63; not the name of a declared client or group" },
    ...identifiers,
  },
} as const;

export const clientChangesBody = {
  type: "object",
  additionalProperties: false,
  properties: identifiers,
  description: "The lists given replace the client's; those left out stay",
} as const;

export const clientNameParams = {
  type: "object",
  required: ["name"],
  properties: { name: { type: "string", maxLength: 100, description: "A client named through the API" } },
} as const;

export const groupParams = {
  type: "object",
  required: ["group"],
  properties: { group: { type: "string", maxLength: 100, description: "A declared group" } },
} as const;

export const pauseBody = {
  type: "object",
  additionalProperties: false,
  required: ["duration"],
  properties: {
    duration: { type: ["string", "integer"], description: 'How long the pause lasts: "<n><unit>" with unit ms, s, m, h or d ("30m"), or seconds; 1ms to 7d' },
  },
} as const;

const seenFields = {
  address: { type: "string", description: "The address of its last query" },
  mac: { type: ["string", "null"] },
  id: { type: ["string", "null"], description: "DoH or DoT client id of its queries" },
  hostname: { type: ["string", "null"], description: "PTR name (with the hostnames option)" },
  first_seen_ms: { type: "integer" },
  last_seen_ms: { type: "integer" },
  queries: { type: "integer" },
} as const;

const seenStats = {
  type: ["object", "null"],
  required: Object.keys(seenFields),
  properties: seenFields,
  description: "What its queries showed (null: none seen since the state file began)",
} as const;

export const clientSchema = {
  type: "object",
  required: ["name", "source", "addresses", "macs", "ids", "groups", "seen"],
  properties: {
    name: { type: "string" },
    source: { type: "string", enum: ["config", "api"], description: "config: declared in the configuration (change it there); api: named through the API" },
    addresses: { type: "array", items: { type: "string" } },
    macs: { type: "array", items: { type: "string" } },
    ids: { type: "array", items: { type: "string" } },
    groups: { type: "array", items: { type: "string" } },
    seen: seenStats,
  },
} as const;

const seenClient = {
  type: "object",
  required: ["key", ...Object.keys(seenFields)],
  properties: { key: { type: "string", description: "How the client is told apart: `mac <mac>`, `id <id>`, or its address" }, ...seenFields },
} as const;

export const groupSchema = {
  type: "object",
  required: ["name", "addresses", "members", "paused_until_ms"],
  properties: {
    name: { type: "string" },
    addresses: { type: "array", items: { type: "string" }, description: "Addresses and CIDRs whose clients are in the group" },
    members: { type: "array", items: { type: "string" }, description: "Clients in the group by name" },
    paused_until_ms: { type: ["integer", "null"], description: "When the group's pause ends (Unix ms); null: not paused" },
  },
} as const;

export const clientsListSchema = {
  type: "object",
  required: ["ok", "clients", "seen", "groups"],
  properties: {
    ok: { type: "boolean" },
    clients: { type: "array", items: clientSchema, description: "Declared clients, then those named through the API" },
    seen: { type: "array", items: seenClient, description: "Clients seen but not named, most recent first" },
    groups: { type: "array", items: groupSchema },
  },
} as const;

export const clientAnswerSchema = {
  type: "object",
  required: ["ok", "client"],
  properties: { ok: { type: "boolean" }, client: clientSchema },
} as const;

export const okSchema = { type: "object", required: ["ok"], properties: { ok: { type: "boolean" } } } as const;

export const groupsListSchema = {
  type: "object",
  required: ["ok", "groups"],
  properties: { ok: { type: "boolean" }, groups: { type: "array", items: groupSchema } },
} as const;

export const pauseAnswerSchema = {
  type: "object",
  required: ["ok", "group", "paused_until_ms"],
  properties: { ok: { type: "boolean" }, group: { type: "string" }, paused_until_ms: { type: ["integer", "null"] } },
} as const;
