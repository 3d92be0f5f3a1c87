// Health, build, control: healthz, readyz, health, build, control, system, metrics,
// shutdown, restart, reload, reload/status. Handlers ask the actors (can → send) and read snapshots.

import type { FastifyInstance } from "fastify";
import type { AppEvent } from "../../../machines/app.machine.js";
import { sendIfAccepted } from "../../../actors/ask.js";
import { ApiError, errorResponses, PROBE_STATUS } from "../errors.js";
import { refusalError } from "../guards.js";
import type { ApiHost } from "../host.js";
import { buildRecord, controlRecord, healthRecord, pluginsReady, reloadRecord, serverCount, systemRecord } from "../records.js";
import { buildSchema, controlSchema, healthSchema, reloadSchema, systemSchema } from "../schemas.js";
import type { RouteContext } from "../server.js";

/**
 * Sends a control event to the app actor. Refused → the guard's error (guards.ts); once the app
 * has stopped, its control channel is closed.
 */
export function controlApp(host: ApiHost, event: AppEvent): void {
  if (host.actor.getSnapshot().status !== "active") throw new ApiError("control_command_failed", "the application has stopped; its control channel is closed");
  try {
    sendIfAccepted(host.actor, event);
  } catch (err) {
    throw refusalError(err);
  }
}

const accepted = (action: string) => ({ ok: true, action, status: "accepted" });
const acceptedSchema = {
  type: "object",
  properties: { ok: { type: "boolean" }, action: { type: "string" }, status: { type: "string" } },
} as const;
const text = { type: "string" } as const;

export function registerControlRoutes(api: FastifyInstance, { host }: RouteContext): void {
  api.get("/api/healthz", { schema: { role: "metrics", summary: "Liveness: the API listener is up", tags: ["health"], response: { 200: text } } }, async (_req, reply) => {
    return reply.type("text/plain; charset=utf-8").send("ok");
  });

  api.get("/api/readyz", { schema: { role: "metrics", summary: "Readiness: plugins initialised and at least one DNS server running", tags: ["health"], response: { 200: text, 503: text } } }, async (_req, reply) => {
    const state = pluginsReady(host) && serverCount(host) > 0 ? "ready" : "not_ready";
    return reply.code(PROBE_STATUS[state]).type("text/plain; charset=utf-8").send(state);
  });

  api.get("/api/health", { schema: { role: "metrics", summary: "Health record", tags: ["health"], response: { 200: healthSchema, 503: healthSchema } } }, async (_req, reply) => {
    const h = healthRecord(host);
    return reply.code(PROBE_STATUS[h.ready ? "ready" : "not_ready"]).send(h.body);
  });

  api.get("/api/build", { schema: { role: "viewer", summary: "Build bundle, features and supported plugin types", tags: ["health"], response: { 200: buildSchema } } }, async () => ({ ok: true, build: buildRecord(host) }));

  api.get("/api/control", { schema: { role: "viewer", summary: "Lifecycle state, uptime, configuration path and reload status", tags: ["control"], response: { 200: controlSchema } } }, async () => controlRecord(host));

  api.get("/api/system", { schema: { role: "viewer", summary: "Version, platform, CPU and memory figures", tags: ["control"], response: { 200: systemSchema } } }, async () => systemRecord(host));

  api.get("/api/metrics", { schema: { role: "metrics", summary: "Prometheus text exposition", tags: ["observability"], response: { 200: text } } }, async (_req, reply) => {
    const body = await host.metricsText();
    return reply.type(host.metrics.registry.contentType).send(body);
  });

  api.get("/api/reload/status", { schema: { role: "viewer", summary: "Reload status record", tags: ["control"], response: { 200: reloadSchema } } }, async () => reloadRecord(host));

  api.post(
    "/api/reload",
    {
      config: { audit: () => "reload the configuration" },
      schema: {
        role: "admin",
        summary: "Reload the configuration from disk, beside the running one",
        tags: ["control"],
        response: { 202: acceptedSchema, ...errorResponses("reload_busy", "control_command_failed", "shutting_down") },
      },
    },
    async (_req, reply) => {
      controlApp(host, { type: "RELOAD.REQUEST" });
      return reply.code(202).send(accepted("reload"));
    },
  );

  api.post(
    "/api/shutdown",
    { config: { audit: () => "shut down" }, schema: { role: "admin", summary: "Graceful shutdown", tags: ["control"], response: { 202: acceptedSchema, ...errorResponses("shutdown_in_progress", "control_command_failed") } } },
    async (_req, reply) => {
      controlApp(host, { type: "SHUTDOWN" });
      return reply.code(202).send(accepted("shutdown"));
    },
  );

  api.post(
    "/api/restart",
    {
      config: { audit: () => "restart" },
      schema: {
        role: "admin",
        summary: "Graceful shutdown, then the same command line runs again",
        tags: ["control"],
        response: { 202: acceptedSchema, ...errorResponses("shutdown_in_progress", "control_command_failed") },
      },
    },
    async (_req, reply) => {
      controlApp(host, { type: "RESTART" });
      return reply.code(202).send(accepted("restart"));
    },
  );
}
