// The audit line of an answered API request: every request that may change something (any method
// but GET/HEAD/OPTIONS, or a route marked changesState) unless its route says `audit: false`, and
// every refused one (401, 403, 429) whatever its method — but a route with `audit: false` asked
// without any credentials (GET /api/session, how the dashboard learns it must sign in). Who comes from the request's principal, or
// from what a refused request tried.

import type { FastifyRequest } from "fastify";
import type { AuditEntry } from "../audit/entry.js";

const SAFE = new Set(["GET", "HEAD", "OPTIONS"]);
const REFUSED = new Set([401, 403, 429]);
const MAX_SUMMARY = 200;

const openApiPath = (url: string): string => url.replace(/:([A-Za-z0-9_]+)/g, "{$1}");

export function auditLine(req: FastifyRequest, status: number, now: number): AuditEntry | null {
  const config = req.routeOptions.config;
  const changes = !SAFE.has(req.method) || config.changesState === true;
  if (!REFUSED.has(status) && (!changes || config.audit === false || req.method === "OPTIONS")) return null;
  // A route kept out of the trail (the dashboard's "who am I?") is not written for a caller that sent no credentials at all either.
  if (config.audit === false && req.attempted?.via === "none" && status === 401) return null;
  const path = req.url.split("?")[0] ?? "";
  const p = req.principal;
  const attempted = req.attempted;
  let summary = `${req.method} ${path}`;
  if (typeof config.audit === "function" && status < 500) {
    try {
      summary = config.audit(req);
    } catch {
      // A summary that cannot be made from this request keeps the plain one.
    }
  }
  const params = (req.params ?? {}) as Record<string, unknown>;
  return {
    at_ms: now,
    method: req.method,
    route: req.routeOptions.url === undefined || req.is404 ? path : openApiPath(req.routeOptions.url),
    path,
    tag: typeof params.tag === "string" ? params.tag : null,
    actor: p?.name ?? attempted?.attempted ?? "anonymous",
    via: p?.via ?? attempted?.via ?? "none",
    role: p?.role ?? null,
    address: req.ip,
    status,
    code: req.errorCode ?? null,
    summary: summary.length > MAX_SUMMARY ? `${summary.slice(0, MAX_SUMMARY - 1)}…` : summary,
  };
}
