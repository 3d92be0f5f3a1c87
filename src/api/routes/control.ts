// Health, build, control: healthz, readyz, health, build, control, system, metrics,
// shutdown, restart, reload, reload/status. Handlers ask the actors (can → send) and read snapshots.

import type { FastifyInstance } from "fastify";
import { ApiError, errorSchema } from "../errors.js";
import { buildRecord, controlRecord, healthRecord, pluginsReady, reloadRecord, requestReload, serverCount, systemRecord } from "../records.js";
import type { RouteContext } from "../server.js";

const accepted = (action: string) => ({ ok: true, action, status: "accepted" });
const acceptedSchema = {
  type: "object",
  properties: { ok: { type: "boolean" }, action: { type: "string" }, status: { type: "string" } },
} as const;
const text = { type: "string" } as const;
const reloadSchema = {
  type: "object",
  properties: {
    status: { type: "string", enum: ["idle", "pending", "in_progress", "ok", "failed"] },
    pending: { type: "boolean" },
    in_progress: { type: "boolean" },
    last_started_ms: { type: ["integer", "null"] },
    last_completed_ms: { type: ["integer", "null"] },
    last_success_ms: { type: ["integer", "null"] },
    last_error: { type: ["string", "null"] },
    running_version: { type: ["string", "null"] },
    target_version: { type: ["string", "null"] },
  },
} as const;

export function registerControlRoutes(api: FastifyInstance, { app }: RouteContext): void {
  const controlClosed = (): boolean => app.actor.getSnapshot().status !== "active";

  api.get("/api/healthz", { schema: { summary: "Liveness: the API listener is up", tags: ["health"], response: { 200: text } } }, async (_req, reply) => {
    return reply.type("text/plain; charset=utf-8").send("ok");
  });

  api.get("/api/readyz", { schema: { summary: "Readiness: plugins initialised and at least one DNS server running", tags: ["health"], response: { 200: text, 503: text } } }, async (_req, reply) => {
    const ready = pluginsReady(app) && serverCount(app) > 0;
    return reply.code(ready ? 200 : 503).type("text/plain; charset=utf-8").send(ready ? "ready" : "not_ready");
  });

  api.get("/api/health", { schema: { summary: "Health record", tags: ["health"] } }, async (_req, reply) => {
    const h = healthRecord(app);
    return reply.code(h.ready ? 200 : 503).send(h.body);
  });

  api.get("/api/build", { schema: { summary: "Build bundle, features and supported plugin types", tags: ["health"] } }, async () => ({ ok: true, build: buildRecord(app) }));

  api.get("/api/control", { schema: { summary: "Lifecycle state, uptime, configuration path and reload status", tags: ["control"] } }, async () => controlRecord(app));

  api.get("/api/system", { schema: { summary: "Version, platform, CPU and memory figures", tags: ["control"] } }, async () => systemRecord(app));

  api.get("/api/metrics", { schema: { summary: "Prometheus text exposition", tags: ["observability"], response: { 200: text } } }, async (_req, reply) => {
    const body = await app.services.metrics.text();
    return reply.type(app.services.metrics.registry.contentType).send(body);
  });

  api.get("/api/reload/status", { schema: { summary: "Reload status record", tags: ["control"], response: { 200: reloadSchema } } }, async () => reloadRecord(app));

  api.post("/api/reload", { schema: { summary: "Reload the configuration from disk, beside the running one", tags: ["control"], response: { 202: acceptedSchema, 409: errorSchema, 500: errorSchema, 503: errorSchema } } }, async (_req, reply) => {
    if (controlClosed()) throw new ApiError(500, "control_command_failed", "the application has stopped; no reload can run");
    const outcome = requestReload(app);
    if (outcome === "stopping") throw new ApiError(503, "shutting_down", "the application is stopping; no reload can run");
    if (outcome === "busy") throw new ApiError(409, "reload_busy", "a reload is already pending or in progress");
    return reply.code(202).send(accepted("reload"));
  });

  api.post("/api/shutdown", { schema: { summary: "Graceful shutdown", tags: ["control"], response: { 202: acceptedSchema, 409: errorSchema, 500: errorSchema } } }, async (_req, reply) => {
    if (controlClosed()) throw new ApiError(500, "control_command_failed", "the application has already stopped");
    if (!app.actor.getSnapshot().can({ type: "SHUTDOWN" })) throw new ApiError(409, "shutdown_in_progress", "the application is already stopping");
    app.actor.send({ type: "SHUTDOWN" });
    return reply.code(202).send(accepted("shutdown"));
  });

  api.post("/api/restart", { schema: { summary: "Graceful shutdown, then the same command line runs again", tags: ["control"], response: { 202: acceptedSchema, 409: errorSchema, 500: errorSchema } } }, async (_req, reply) => {
    if (controlClosed()) throw new ApiError(500, "control_command_failed", "the application has already stopped");
    if (!app.actor.getSnapshot().can({ type: "RESTART" })) throw new ApiError(409, "shutdown_in_progress", "the application is already stopping");
    app.actor.send({ type: "RESTART" });
    return reply.code(202).send(accepted("restart"));
  });
}
