// Response schema of the ros_address_list status route (control.ts). No imports: the dashboard's
// typecheck may read this file.

const nullableInt = { type: ["integer", "null"] } as const;

export const rosStatusSchema = {
  type: "object",
  required: ["ok", "router", "state", "recovered", "lists", "queue", "entries", "batches", "scans", "last_sync_at_ms", "last_scan_at_ms", "last_error", "last_error_at_ms"],
  properties: {
    ok: { type: "boolean" },
    router: { type: "string" },
    state: { type: "string" },
    recovered: { type: "boolean" },
    lists: { type: "object", required: ["ipv4", "ipv6"], properties: { ipv4: { type: ["string", "null"] }, ipv6: { type: ["string", "null"] } } },
    queue: {
      type: "object",
      required: ["depth", "capacity", "retry", "dropped"],
      properties: { depth: { type: "integer" }, capacity: { type: "integer" }, retry: { type: "integer" }, dropped: { type: "integer" } },
    },
    entries: {
      type: "object",
      required: ["dynamic", "persistent", "foreign"],
      properties: { dynamic: { type: "integer" }, persistent: { type: "integer" }, foreign: { type: "integer" } },
    },
    batches: { type: "integer" },
    scans: { type: "integer" },
    last_sync_at_ms: nullableInt,
    last_scan_at_ms: nullableInt,
    last_error: { type: ["string", "null"] },
    last_error_at_ms: nullableInt,
  },
} as const;
