// Response schemas of the cache's routes (control.ts); webui/src/shapes.ts derives the dashboard's
// types from them. Imports only other schema files: the dashboard's typecheck reads this file.

import { rrSchema } from "../../../dns/rr-json-schema.js";

const int = { type: "integer" } as const;
const str = { type: "string" } as const;
const bool = { type: "boolean" } as const;

const entrySchema = {
  type: "object",
  required: [
    "id",
    "domain",
    "qtype",
    "qclass",
    "rcode",
    "answer_count",
    "authority_count",
    "additional_count",
    "ttl",
    "remaining_ttl",
    "fresh",
    "stale",
    "cached_at_ms",
    "expires_at_ms",
    "last_access_ms",
    "do_bit",
    "cd_bit",
    "ecs",
    "answers",
  ],
  properties: {
    id: str,
    domain: str,
    qtype: str,
    qclass: str,
    rcode: str,
    answer_count: int,
    authority_count: int,
    additional_count: int,
    ttl: int,
    remaining_ttl: int,
    fresh: bool,
    stale: bool,
    cached_at_ms: int,
    expires_at_ms: int,
    last_access_ms: int,
    do_bit: bool,
    cd_bit: bool,
    ecs: { type: ["object", "null"], additionalProperties: true },
    answers: { type: "array", items: rrSchema },
    worker: { ...int, description: "With data-plane workers: the worker whose cache holds the entry" },
  },
} as const;

export const cacheEntriesSchema = {
  type: "object",
  required: ["ok", "entries", "next_cursor", "total_entries"],
  properties: { ok: bool, entries: { type: "array", items: entrySchema }, next_cursor: { type: ["string", "null"] }, total_entries: int },
} as const;

export const cacheDeletedSchema = { type: "object", required: ["ok", "deleted"], properties: { ok: bool, deleted: bool } } as const;
export const cacheFlushedSchema = { type: "object", required: ["ok", "cleared_entries"], properties: { ok: bool, cleared_entries: int } } as const;
export const cacheLoadedSchema = { type: "object", required: ["ok", "loaded_entries"], properties: { ok: bool, loaded_entries: int } } as const;
