// The JSON schema of one resource record as rr-json.ts writes it (the cache's entries and the
// recorder's records carry them). No imports: the dashboard's typecheck reads this file.

const str = { type: "string" } as const;

export const rrSchema = {
  type: "object",
  required: ["name", "class", "ttl", "rr_type", "payload_kind", "payload_text", "payload"],
  properties: {
    name: str,
    class: str,
    ttl: { type: "integer" },
    rr_type: str,
    payload_kind: { type: "string", description: "a, aaaa, name, mx, txt, soa, srv, caa, svcb or unknown" },
    payload_text: str,
    payload: { type: "object", additionalProperties: true },
  },
} as const;
