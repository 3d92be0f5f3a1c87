// GET /api/audit's query string: its schema (fastify validates it: a bad value is a 400
// invalid_query naming the parameter) and the parse into an AuditQuery, with the checks a schema
// cannot make (from_ms after to_ms).

import type { FastifyRequest, FastifySchemaValidationError } from "fastify";
import { ApiError } from "../errors.js";
import type { AuditVia } from "./entry.js";
import type { AuditQuery } from "./store.js";

export const AUDIT_PAGE_DEFAULT = 100;
export const AUDIT_PAGE_MAX = 500;
const VIAS = ["none", "basic", "session", "token", "certificate"] as const;

export const auditQuerySchema = {
  type: "object",
  additionalProperties: false,
  properties: {
    limit: { type: "integer", minimum: 1, maximum: AUDIT_PAGE_MAX, default: AUDIT_PAGE_DEFAULT, description: "Entries per page" },
    cursor: { type: "string", pattern: "^[0-9]{1,15}$", description: "next_cursor of the previous page: entries older than it" },
    actor: { type: "string", minLength: 1, maxLength: 256, description: "Who (exact): a user name, a token's name, `anonymous`" },
    via: { type: "string", enum: VIAS, description: "How the caller authenticated" },
    method: { type: "string", pattern: "^[A-Za-z]{1,16}$", description: "HTTP method (any case)" },
    route: { type: "string", minLength: 1, maxLength: 512, description: "Substring of the route pattern, e.g. `/mode` (case-insensitive)" },
    tag: { type: "string", minLength: 1, maxLength: 256, description: "Plugin tag (exact)" },
    status: { type: "string", pattern: "^[1-5]([0-9]{2}|[xX]{2})$", description: "A status (`403`) or a class (`4xx`)" },
    from_ms: { type: "integer", minimum: 0, maximum: Number.MAX_SAFE_INTEGER, description: "Entries at or after this Unix ms" },
    to_ms: { type: "integer", minimum: 0, maximum: Number.MAX_SAFE_INTEGER, description: "Entries at or before this Unix ms" },
    q: { type: "string", minLength: 1, maxLength: 256, description: "Substring of the summary (case-insensitive)" },
  },
} as const;

interface RawAuditQuery {
  limit: number;
  cursor?: string;
  actor?: string;
  via?: AuditVia;
  method?: string;
  route?: string;
  tag?: string;
  status?: string;
  from_ms?: number;
  to_ms?: number;
  q?: string;
}

/** The status filter: `403` is that status, `4xx` its class. */
function statusRange(status: string | undefined): AuditQuery["status"] {
  if (status === undefined) return null;
  const first = Number(status[0]);
  if (/x/i.test(status)) return { min: first * 100, max: first * 100 + 99 };
  const n = Number(status);
  return { min: n, max: n };
}

/** The query (already validated by auditQuerySchema) as the stores take it; 400 invalid_query for what the schema cannot check. */
export function parseAuditQuery(raw: unknown): AuditQuery {
  const r = raw as RawAuditQuery;
  if (r.from_ms !== undefined && r.to_ms !== undefined && r.from_ms > r.to_ms) throw new ApiError("invalid_query", "from_ms must not be after to_ms");
  return {
    limit: r.limit,
    before: r.cursor === undefined ? null : Number(r.cursor),
    actor: r.actor ?? null,
    via: r.via ?? null,
    method: r.method?.toUpperCase() ?? null,
    route: r.route ?? null,
    tag: r.tag ?? null,
    status: statusRange(r.status),
    fromMs: r.from_ms ?? null,
    toMs: r.to_ms ?? null,
    q: r.q ?? null,
  };
}

/** Throws 400 invalid_query naming the parameter, the rule and what was sent, when fastify's validation failed. */
export function rejectInvalidQuery(req: FastifyRequest): void {
  const first = (req.validationError?.validation as FastifySchemaValidationError[] | undefined)?.[0];
  if (req.validationError === undefined || req.validationError === null) return;
  const params = (first?.params ?? {}) as { additionalProperty?: string; allowedValues?: unknown[] };
  if (params.additionalProperty !== undefined) throw new ApiError("invalid_query", `querystring.${params.additionalProperty.slice(0, 40)} is not a parameter of this route (${Object.keys(auditQuerySchema.properties).join(", ")})`);
  const name = first?.instancePath.replace(/^\//, "") ?? "";
  const why = params.allowedValues ? `must be one of ${params.allowedValues.join(", ")}` : (first?.message ?? "is invalid");
  const sent = (req.query as Record<string, unknown>)[name];
  const shown = typeof sent === "string" || typeof sent === "number" ? ` (got ${JSON.stringify(String(sent).slice(0, 40))})` : "";
  throw new ApiError("invalid_query", `querystring.${name || "?"} ${why}${shown}`);
}
