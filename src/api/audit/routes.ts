// GET /api/audit (a page of the trail, newest first, with filters and a cursor) and GET
// /api/audit/stream (each entry as it is written, Server-Sent Events). Both are admin routes, and both
// are admitted by the `audit` actor first: off, or a store not open, is its refusal (503
// audit_unavailable); a read admitted that then fails is 503 audit_read_failed.

import type { FastifyInstance } from "fastify";
import { ask } from "../../../actors/ask.js";
import type { EventSink } from "../../registry/control.js";
import { ApiError, errorResponses } from "../errors.js";
import { refusalError } from "../guards.js";
import type { RouteContext } from "../server.js";
import { showActor } from "../routes/inspect.js";
import { EventStreams, requireEventStream } from "../sse.js";
import type { AuditTrail } from "./audit.js";
import { AUDIT_PAGE_DEFAULT, AUDIT_PAGE_MAX, auditQuerySchema, parseAuditQuery, rejectInvalidQuery } from "./query.js";
import type { StoredAuditEntry } from "./store.js";

const nullableText = { type: ["string", "null"] } as const;

export const auditEntrySchema = {
  type: "object",
  required: ["id", "at_ms", "method", "route", "path", "tag", "actor", "via", "role", "address", "status", "code", "summary"],
  properties: {
    id: { type: "integer" },
    at_ms: { type: "integer" },
    method: { type: "string" },
    route: { type: "string" },
    path: { type: "string" },
    tag: nullableText,
    actor: { type: "string" },
    via: { type: "string" },
    role: nullableText,
    address: { type: "string" },
    status: { type: "integer" },
    code: nullableText,
    summary: { type: "string" },
  },
} as const;

const pageSchema = {
  type: "object",
  required: ["ok", "entries", "next_cursor"],
  properties: { ok: { type: "boolean" }, entries: { type: "array", items: auditEntrySchema }, next_cursor: nullableText },
} as const;

const LIST_DESCRIPTION =
  `Entries of the audit trail, newest first: every state-changing request and every refused one (401, 403, 429). ` +
  `limit 1–${AUDIT_PAGE_MAX} (default ${AUDIT_PAGE_DEFAULT}); continue with cursor = the previous page's next_cursor (null on the last page). ` +
  "Filters combine: actor, via, method, tag (exact), route and q (substrings of the route pattern and the summary), status (403 or 4xx), from_ms and to_ms (inclusive).";

const STREAM_DESCRIPTION =
  "Server-Sent Events: `event: audit` with the entry (id included) as JSON data, for each entry as it is written to the store. " +
  "A `: heartbeat` comment at once and every api.http.sse_heartbeat; a client that falls far behind skips frames and gets `event: dropped` with the count.";

const frame = (entry: StoredAuditEntry): string => `event: audit\ndata: ${JSON.stringify(entry)}\n\n`;

export function registerAuditRoutes(api: FastifyInstance, { host }: RouteContext, trail: AuditTrail): void {
  const hide = showActor(host, trail.actor);
  const admit = async (): Promise<void> => {
    try {
      await ask(trail.actor, { type: "AUDIT.READ" });
    } catch (err) {
      throw refusalError(err);
    }
  };

  /** Entries of requests already answered are read too: waits (at most `ms`) until what is queued now is written. */
  const written = (ms: number): Promise<void> =>
    new Promise((resolve) => {
      const settled = (): boolean => trail.queued() === 0 && !trail.actor.getSnapshot().matches({ ready: { write: "flushing" } });
      if (settled()) return resolve();
      const finish = (): void => {
        clearTimeout(timer);
        sub.unsubscribe();
        resolve();
      };
      const timer = setTimeout(finish, ms);
      const sub = trail.actor.subscribe(() => {
        if (settled()) finish();
      });
    });

  // One frame per entry, shared by every open stream.
  const sinks = new Set<EventSink>();
  const onEntry = (entry: StoredAuditEntry): void => {
    if (sinks.size === 0) return;
    const frames = [frame(entry)];
    for (const sink of sinks) sink.send(frames);
  };
  host.bus.on("audit", onEntry);
  api.addHook("onClose", (_instance, done) => {
    host.bus.off("audit", onEntry);
    hide();
    done();
  });

  api.get(
    "/api/audit",
    {
      attachValidation: true,
      schema: {
        role: "admin",
        summary: "The audit trail: who changed what, and refused requests (newest first)",
        description: LIST_DESCRIPTION,
        tags: ["audit"],
        querystring: auditQuerySchema,
        response: { 200: pageSchema, ...errorResponses("invalid_query", "audit_unavailable", "audit_read_failed") },
      },
    },
    async (req) => {
      rejectInvalidQuery(req);
      const query = parseAuditQuery(req.query);
      await admit();
      await written(1000);
      const store = trail.store();
      if (store === null) throw new ApiError("audit_read_failed", "the audit store closed before the read started; retry");
      try {
        return { ok: true, ...(await store.query(query)) };
      } catch (err) {
        throw new ApiError("audit_read_failed", `reading the audit trail failed: ${err instanceof Error ? err.message : String(err)}`);
      }
    },
  );

  const streams = new EventStreams(api, () => host.sseHeartbeatMs());
  api.get(
    "/api/audit/stream",
    {
      exposeHeadRoute: false,
      schema: {
        role: "admin",
        summary: "Each new audit entry (Server-Sent Events)",
        description: STREAM_DESCRIPTION,
        tags: ["audit"],
        response: { 200: { type: "string", description: "text/event-stream" }, ...errorResponses("not_acceptable", "audit_unavailable") },
      },
    },
    async (req, reply) => {
      requireEventStream(req);
      await admit();
      streams.start(req, reply, (sink) => {
        sinks.add(sink);
        return () => sinks.delete(sink);
      });
      return reply;
    },
  );
}
