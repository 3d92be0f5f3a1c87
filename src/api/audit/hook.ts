// What the API's hooks hand the audit trail: one entry for every state-changing /api request
// (not GET, HEAD or OPTIONS; not a route declared `audit: false`) and for every refused request
// (401, 403, 429) on any method and path. `auditEntryOf` is the one place an entry is built; the
// error code comes from the JSON error body, which `rememberErrorCode` (an onSend hook) reads.

import type { FastifyReply, FastifyRequest } from "fastify";
import type { Role } from "../auth/roles.js";
import type { AuditSummary } from "../route-meta.js";
import type { AuditEntry, AuditVia } from "./entry.js";

/** Who made a request, as far as the audit trail records it. */
export interface AuditCaller {
  name: string;
  via: AuditVia;
  role: Role | null;
}

export const ANONYMOUS_CALLER: AuditCaller = { name: "anonymous", via: "none", role: null };

const REFUSED = new Set([401, 403, 429]);
const READS = new Set(["GET", "HEAD", "OPTIONS"]);
/** Longest path and summary kept (a path can be as long as the request line allows). */
const MAX_TEXT = 1024;

const errorCodes = new WeakMap<FastifyRequest, string>();
/** `{"ok":false,"code":"…"`: how every JSON error body starts (src/api/errors.ts errorBody). */
const ERROR_CODE = /^\{"ok":false,"code":"([a-z0-9_]{1,64})"/;

/** onSend hook: keeps the code of a JSON error answer for the request's audit entry. */
export function rememberErrorCode(req: FastifyRequest, reply: FastifyReply, payload: unknown): Promise<unknown> {
  if (reply.statusCode >= 400 && typeof payload === "string") {
    const m = ERROR_CODE.exec(payload.slice(0, 120));
    if (m?.[1]) errorCodes.set(req, m[1]);
  }
  return Promise.resolve(payload);
}

const cut = (s: string): string => (s.length > MAX_TEXT ? `${s.slice(0, MAX_TEXT)}…` : s);

/** The route's pattern as OpenAPI writes it: `/api/plugins/:tag/mode` → `/api/plugins/{tag}/mode`. */
export const openApiRoute = (url: string): string => url.replace(/:([A-Za-z0-9_]+)/g, "{$1}");

/** The audit entry of an answered request, or null when it is not audited. */
export function auditEntryOf(req: FastifyRequest, reply: FastifyReply, caller: AuditCaller = ANONYMOUS_CALLER, now: number = Date.now()): AuditEntry | null {
  const status = reply.statusCode;
  const path = req.url.split("?")[0] ?? "";
  const pattern = req.routeOptions.url;
  const declared: AuditSummary | undefined = req.routeOptions.config.audit;
  if (!REFUSED.has(status)) {
    const api = (pattern ?? path) === "/api" || (pattern ?? path).startsWith("/api/");
    if (!api || READS.has(req.method) || declared === false) return null;
  }
  let summary = `${req.method} ${path}`;
  if (typeof declared === "function") {
    try {
      summary = declared(req);
    } catch {
      // A summary that cannot be built keeps the default.
    }
  }
  const tag = (req.params as Record<string, unknown> | undefined)?.tag;
  return {
    at_ms: now,
    method: req.method,
    route: cut(pattern === undefined ? path : openApiRoute(pattern)),
    path: cut(path),
    tag: typeof tag === "string" ? tag : null,
    actor: caller.name,
    via: caller.via,
    role: caller.role,
    address: req.ip,
    status,
    code: errorCodes.get(req) ?? null,
    summary: cut(summary),
  };
}
