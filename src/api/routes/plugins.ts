// Plugin routes: each plugin type's declared routes (src/registry/control.ts) are registered once,
// under /api/plugins/:tag/<path>, with their schemas (so they validate and appear in OpenAPI), and
// answer for the plugin with that tag in the *current* generation: after a reload a removed
// plugin's routes are 404 and a new plugin's routes answer, with no change to the listener.
// GET /api/plugins lists the live plugins with their actor states and routes.

import { Ajv } from "ajv";
import { fastifySSE } from "@fastify/sse";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { AnyActorRef, AnyMachineSnapshot } from "xstate";
import { ask, ActorGoneError, RefusedError } from "../../../actors/ask.js";
import { concernActor, pluginActor } from "../../../actors/app.actor.js";
import { lifecycleState } from "../../../machines/app.machine.js";
import { isReply, RouteError, type ConcernHandle, type PluginRoute, type RoutePlugin } from "../../registry/control.js";
import type { AnyDefinition } from "../../registry/types.js";
import { ApiError, errorResponses, isErrorCode, type ErrorCode } from "../errors.js";
import { refusalError } from "../guards.js";
import type { ApiHost } from "../host.js";
import { pluginsSchema } from "../schemas.js";
import type { RouteContext } from "../server.js";
import { acceptsEventStream, startPluginStream } from "../sse.js";

type AnyRoute = PluginRoute<unknown>;

const ajvOptions = { allErrors: false, removeAdditional: false, useDefaults: true, allowUnionTypes: true, strict: false } as const;
const coercingAjv = new Ajv({ ...ajvOptions, coerceTypes: true });
const strictAjv = new Ajv({ ...ajvOptions, coerceTypes: false });

interface Registered {
  route: AnyRoute;
  /** Plugin types that serve this route. */
  types: Set<string>;
}

/** The URL a route has for plugin `tag` (":tag" for the registered pattern). */
export const routeUrl = (tag: string, route: Pick<AnyRoute, "path">): string => `/api/plugins/${tag}${route.path ? `/${route.path}` : ""}`;

const routesOf = (def: AnyDefinition): readonly AnyRoute[] => (def.control?.routes ?? []);

/** Every route of the build's plugin types, once per method and path; two different routes on one path are a bug. */
function collect(definitions: AnyDefinition[]): Map<string, Registered> {
  const byKey = new Map<string, Registered>();
  for (const def of definitions) {
    for (const route of routesOf(def)) {
      const codes = [...(route.errors ?? []), route.invalidBody, route.invalidQuery, route.notFound].filter((c): c is string => c !== undefined);
      const unknown = codes.filter((c) => !isErrorCode(c));
      if (unknown.length > 0) throw new Error(`plugin route ${route.method} ${route.path} of '${def.type}' names unknown error codes: ${unknown.join(", ")}`);
      const key = `${route.method} ${route.path}`;
      const existing = byKey.get(key);
      if (existing && existing.route !== route) throw new Error(`plugin route ${key} is declared by '${[...existing.types][0]}' and '${def.type}' with different handlers`);
      if (existing) existing.types.add(def.type);
      else byKey.set(key, { route, types: new Set([def.type]) });
    }
  }
  return byKey;
}

/** `shared`: the change is told to the other members of the cluster once this member has made it. */
function concernHandle(actor: AnyActorRef, id: string, shared: { host: ApiHost; tag: string; type: string; events: readonly string[] } | null): ConcernHandle {
  return {
    id,
    snapshot: () => {
      const s = actor.getSnapshot() as AnyMachineSnapshot;
      return { status: s.status, value: s.value, context: s.context };
    },
    ask: async (event) => {
      const out = await ask(actor, event);
      if (shared?.events.includes(event.type)) shared.host.publishChange({ tag: shared.tag, type: shared.type, event });
      return out;
    },
  };
}

function sharedOf(host: ApiHost, tag: string, type: string): { host: ApiHost; tag: string; type: string; events: readonly string[] } | null {
  const found = host.catalog.lookup(type);
  const events = "def" in found ? found.def.control?.shared?.events : undefined;
  return events ? { host, tag, type, events } : null;
}

/** A plugin's RouteError becomes the API error with that code; an unknown code is a bug (500, logged). */
function toApiError(err: unknown, host: ApiHost, where: string): unknown {
  if (err instanceof RefusedError || err instanceof ActorGoneError) return refusalError(err);
  if (err instanceof RouteError) {
    if (isErrorCode(err.code)) return new ApiError(err.code, err.message, err.extra);
    host.log.error({ target: "api", route: where, code: err.code }, "plugin route used an error code the API does not know");
    return new ApiError("internal_error", err.message);
  }
  return err;
}

function parseJsonBody(raw: unknown, code: ErrorCode): unknown {
  const text = Buffer.isBuffer(raw) ? raw.toString("utf8") : typeof raw === "string" ? raw : "";
  if (text.trim() === "") return {};
  try {
    return JSON.parse(text) as unknown;
  } catch (err) {
    throw new ApiError(code, `body is not valid JSON: ${(err as Error).message}`);
  }
}

export function registerPluginRoutes(api: FastifyInstance, { host }: RouteContext): void {
  const registered = collect(host.catalog.definitions());
  const generation = (): number | null => host.actor.getSnapshot().context.current;

  api.get("/api/plugins", { schema: { summary: "Plugins of the running configuration, with actor states and routes", tags: ["plugins"], response: { 200: pluginsSchema } } }, async () => {
    const g = generation();
    const rt = host.liveRuntime();
    const defs = new Map(host.catalog.definitions().map((d) => [d.type, d]));
    const plugins = [...(rt?.plugins.values() ?? [])].map((p) => {
      const actor = g === null ? undefined : pluginActor(host.actor.system, g, p.tag);
      const concern = g === null ? undefined : concernActor(host.actor.system, g, p.tag);
      const def = defs.get(p.type);
      return {
        tag: p.tag,
        type: p.type,
        kind: p.kind,
        state: actor ? lifecycleState((actor.getSnapshot() as AnyMachineSnapshot).value) : "unknown",
        concern: concern ? ((concern as { systemId?: string }).systemId ?? null) : null,
        concern_state: concern ? ((concern.getSnapshot() as AnyMachineSnapshot).value as unknown) : null,
        routes: def ? routesOf(def).map((r) => `${r.method} ${routeUrl(p.tag, r)}`) : [],
      };
    });
    return { ok: true, generation: g ?? 0, plugins };
  });

  /** Open event streams of plugin routes, ended when the API closes. */
  const streams = new Set<() => void>();

  // Own scope: bodies arrive as bytes and each route decides how to read them (JSON or raw).
  void api.register(async (scope) => {
    // Streaming routes take their reply over themselves (manual mode); heartbeats are ours.
    await scope.register(fastifySSE, { heartbeatInterval: 0 });
    scope.addHook("onClose", (_instance, done) => {
      for (const release of [...streams]) release();
      done();
    });
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser("*", { parseAs: "buffer" }, (_req, body, done) => done(null, body));
    // Query strings and paths are text and are coerced to their schema types; a JSON body already has types ({"index": "1"} is not an integer).
    scope.setValidatorCompiler(({ schema, httpPart }) => (httpPart === "body" ? strictAjv : coercingAjv).compile(schema));

    for (const [key, { route, types }] of registered) {
      const badBody = (route.invalidBody ?? "invalid_request") as ErrorCode;
      const badQuery = (route.invalidQuery ?? "invalid_query") as ErrorCode;
      const schema = route.schema ?? {};
      const params = (schema.params ?? { type: "object", properties: {} }) as { properties?: Record<string, unknown>; required?: string[] };
      scope.route({
        method: route.method,
        url: routeUrl(":tag", route),
        attachValidation: true,
        config: { changesState: route.changesState === true },
        ...(route.stream ? { sse: { kind: "manual" as const, heartbeat: false }, exposeHeadRoute: false } : {}),
        ...(route.bodyLimit ? { bodyLimit: route.bodyLimit } : {}),
        schema: {
          summary: route.summary,
          ...(route.description ? { description: route.description } : {}),
          tags: ["plugins"],
          params: { type: "object", properties: { tag: { type: "string", description: "Plugin tag" }, ...params.properties }, required: ["tag", ...(params.required ?? [])] },
          ...(schema.querystring ? { querystring: schema.querystring } : {}),
          ...(schema.body && route.body !== "raw" ? { body: schema.body } : {}),
          response: { ...(schema.response ?? {}), ...errorResponses((route.notFound ?? "plugin_route_not_found") as ErrorCode, ...((route.errors ?? []) as ErrorCode[])) },
        },
        preValidation: async (req: FastifyRequest) => {
          if (route.body !== "raw" && route.method !== "GET") req.body = parseJsonBody(req.body, badBody);
        },
        handler: async (req: FastifyRequest, reply: FastifyReply) => {
          const { tag, ...rest } = req.params as Record<string, string>;
          const live = host.liveRuntime()?.plugins.get(tag);
          const g = generation();
          if (!live || g === null || !types.has(live.type)) {
            const code = (route.notFound ?? "plugin_route_not_found") as ErrorCode;
            throw new ApiError(code, `no plugin '${tag}' with route ${key} in the running configuration`);
          }
          if (req.validationError) {
            const ctx = (req.validationError as { validationContext?: string }).validationContext;
            throw new ApiError(ctx === "querystring" ? badQuery : ctx === "params" ? "invalid_path" : badBody, req.validationError.message);
          }
          const concern = concernActor(host.actor.system, g, tag);
          const plugin: RoutePlugin<unknown> = {
            tag,
            type: live.type,
            view: live.instance,
            concern: concern ? concernHandle(concern, (concern as { systemId?: string }).systemId ?? concern.id, sharedOf(host, tag, live.type)) : null,
          };
          if (route.stream && !acceptsEventStream(req.headers.accept)) throw new ApiError("not_acceptable", "this route only produces text/event-stream");
          const abort = new AbortController();
          reply.raw.on("close", () => abort.abort());
          let result: unknown;
          try {
            result = await route.handle({ params: rest, query: (req.query ?? {}) as Record<string, unknown>, body: req.body, signal: abort.signal }, plugin);
          } catch (err) {
            throw toApiError(err, host, key);
          }
          if (isReply(result)) {
            switch (result.kind) {
              case "text":
                return reply.type("text/plain; charset=utf-8").send(result.body);
              case "json":
                return reply.code(route.status ?? 200).type("application/json; charset=utf-8").send(result.body);
              case "bytes":
                return reply.type(result.contentType).header("content-disposition", `attachment; filename="${result.filename}"`).send(result.body);
              case "sse": {
                if (!route.stream) throw new ApiError("internal_error", `plugin route ${key} returned a stream but is not declared with stream: true`);
                // The client may be gone already, in which case the stream is released before this returns.
                const entry = { release: (): void => undefined, done: false };
                entry.release = startPluginStream(reply, result.open, () => {
                  entry.done = true;
                  streams.delete(entry.release);
                });
                if (!entry.done) streams.add(entry.release);
                return;
              }
            }
          }
          return reply.code(route.status ?? 200).send(result);
        },
      });
    }
  });
}
