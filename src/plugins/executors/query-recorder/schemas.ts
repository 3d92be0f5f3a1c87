// Response schemas of the recorder's routes (routes.ts). The reader processes write the answers as
// JSON text, so these are not used to serialise: they document the answers (json.ts, stats.ts,
// records.ts, pg-reads.ts write them) in /api/openapi.json, and webui/src/shapes.ts derives the
// dashboard's types from them. Imports only other schema files: the dashboard's typecheck reads this file.

import { rrSchema } from "../../../dns/rr-json-schema.js";

const int = { type: "integer" } as const;
const num = { type: "number" } as const;
const str = { type: "string" } as const;
const bool = { type: "boolean" } as const;
const nullableBool = { type: ["boolean", "null"] } as const;
const nullableNum = { type: ["number", "null"] } as const;
const edns = { type: ["object", "null"], additionalProperties: true } as const;
const rrs = { type: "array", items: rrSchema } as const;

/** The fixed fields of a record (json.ts recordFields). */
const recordSchema = {
  type: "object",
  additionalProperties: true,
  required: [
    "id",
    "created_at_ms",
    "elapsed_ms",
    "elapsed_us",
    "request_id",
    "client_ip",
    "client_name",
    "client_groups",
    "instance",
    "questions_json",
    "req_rd",
    "req_cd",
    "req_ad",
    "req_opcode",
    "req_edns_json",
    "error",
    "has_response",
    "rcode",
    "resp_aa",
    "resp_tc",
    "resp_ra",
    "resp_ad",
    "resp_cd",
    "answer_count",
    "authority_count",
    "additional_count",
    "answers_json",
    "authorities_json",
    "additionals_json",
    "signature_json",
    "resp_edns_json",
  ],
  properties: {
    id: int,
    created_at_ms: int,
    elapsed_ms: int,
    elapsed_us: int,
    request_id: int,
    client_ip: str,
    client_name: { type: ["string", "null"], description: "The client's name, as the clients provider identified it when the query came (null: no name known)" },
    client_groups: { type: "array", items: str, description: "The client's groups then, in the provider's order" },
    instance: { type: "string", description: "The Sluice instance that recorded it" },
    questions_json: { type: "array", items: { type: "object", required: ["name", "qtype", "qclass"], properties: { name: str, qtype: str, qclass: str } } },
    req_rd: bool,
    req_cd: bool,
    req_ad: bool,
    req_opcode: str,
    req_edns_json: edns,
    error: { type: ["string", "null"] },
    has_response: bool,
    rcode: { type: ["string", "null"] },
    resp_aa: nullableBool,
    resp_tc: nullableBool,
    resp_ra: nullableBool,
    resp_ad: nullableBool,
    resp_cd: nullableBool,
    answer_count: int,
    authority_count: int,
    additional_count: int,
    answers_json: rrs,
    authorities_json: rrs,
    additionals_json: rrs,
    signature_json: rrs,
    resp_edns_json: edns,
  },
} as const;

const stepSchema = {
  type: "object",
  required: ["event_index", "sequence_tag", "node_index", "kind", "tag", "outcome"],
  properties: { event_index: int, sequence_tag: str, node_index: { type: ["integer", "null"] }, kind: str, tag: str, outcome: str },
} as const;

/** A record with its execution path: the `record` of GET records/<id>, and each `record` frame of the stream. */
export const recordDetailSchema = { type: "object", required: ["record", "steps"], properties: { record: recordSchema, steps: { type: "array", items: stepSchema } } } as const;

export const recordAnswerSchema = { type: "object", required: ["ok", "record"], properties: { ok: bool, record: recordDetailSchema } } as const;

export const recordPageSchema = {
  type: "object",
  required: ["ok", "next_cursor", "records"],
  properties: { ok: bool, next_cursor: { type: ["string", "null"] }, records: { type: "array", items: recordSchema } },
} as const;

export const recordsClearedSchema = { type: "object", required: ["ok", "cleared_records"], properties: { ok: bool, cleared_records: int } } as const;

/** top_clients, top_qnames, qtype, rcode: keys with their count and share of sample_size. */
export const shareRowsSchema = {
  type: "object",
  required: ["ok", "sample_size", "rows"],
  properties: {
    ok: bool,
    sample_size: int,
    rows: { type: "array", items: { type: "object", required: ["key", "count", "share"], properties: { key: str, count: int, share: num } } },
  },
} as const;

/** stats/top_clients: the share rows with the client's address and name. */
export const topClientsSchema = {
  type: "object",
  required: ["ok", "sample_size", "rows"],
  properties: {
    ok: bool,
    sample_size: int,
    rows: {
      type: "array",
      items: {
        type: "object",
        required: ["key", "count", "share", "client_ip", "client_name"],
        properties: { key: str, count: int, share: num, client_ip: str, client_name: { type: ["string", "null"] } },
      },
    },
  },
} as const;

export const pluginStatsSchema = {
  type: "object",
  required: ["ok", "sample_size", "rows"],
  properties: {
    ok: bool,
    sample_size: int,
    rows: {
      type: "array",
      items: {
        type: "object",
        required: ["kind", "tag", "checked", "matched", "executed", "query_total", "query_share"],
        properties: { kind: str, tag: str, checked: int, matched: int, executed: int, query_total: int, query_share: num },
      },
    },
  },
} as const;

export const latencySchema = {
  type: "object",
  required: ["ok", "sample_size", "avg_ms", "p50_ms", "p95_ms", "p99_ms", "max_ms", "histogram", "slow_top"],
  properties: {
    ok: bool,
    sample_size: int,
    avg_ms: nullableNum,
    p50_ms: nullableNum,
    p95_ms: nullableNum,
    p99_ms: nullableNum,
    max_ms: nullableNum,
    histogram: { type: "array", items: { type: "object", required: ["lt_ms", "count"], properties: { lt_ms: nullableNum, count: int } } },
    slow_top: { type: "array", items: { type: "object", required: ["qname", "count", "avg_ms", "max_ms"], properties: { qname: str, count: int, avg_ms: num, max_ms: num } } },
  },
} as const;

export const timeseriesSchema = {
  type: "object",
  required: ["ok", "sample_size", "bucket_ms", "points"],
  properties: {
    ok: bool,
    sample_size: int,
    bucket_ms: int,
    points: {
      type: "array",
      items: {
        type: "object",
        required: ["bucket_ms", "total", "error_count", "no_response_count", "avg_ms", "p95_ms"],
        properties: { bucket_ms: int, total: int, error_count: int, no_response_count: int, avg_ms: num, p95_ms: num },
      },
    },
  },
} as const;
