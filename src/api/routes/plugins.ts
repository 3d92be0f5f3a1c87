// Plugin routes: each plugin type's declared routes (src/registry/control.ts) are registered once,
// under /api/plugins/:tag/<path>, with their schemas (so they validate and appear in OpenAPI), and
// answer for the plugin with that tag in the *current* generation: after a reload a removed
// plugin's routes are 404 and a new plugin's routes answer, with no change to the listener.
// GET /api/plugins lists the live plugins with their actor states and routes.

import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { AnyActorRef, AnyMachineSnapshot } from "xstate";
import { ask, ActorGoneError, RefusedError } from "../../../actors/ask.js";
import { concernActor, pluginActor } from "../../../actors/app.actor.js";
import { lifecycleState } from "../../../machines/app.machine.js";
import { isReply, RouteError, type ConcernHandle, type PluginRoute, type RoutePlugin } from "../../registry/control.js";
import type { LivePlugin } from "../../registry/runtime.js";
import type { AnyDefinition } from "../../registry/types.js";
import { formatBytes } from "../../config/limits.js";
import { ApiError, errorResponses, isErrorCode, type ErrorCode } from "../errors.js";
import { refusalError } from "../guards.js";
import type { ApiHost } from "../host.js";
import { pluginsSchema } from "../schemas.js";
import type { RouteContext } from "../server.js";
import { EventStreams, requireEventStream } from "../sse.js";
import { coercingAjv, strictAjv } from "../../config/ajv.js";
import { jsonBody } from "../body.js";

type AnyRoute = PluginRoute<unknown>;


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

/** The handle of a plugin without a concern actor now: every use is ActorGoneError (503 plugin_unavailable). */
function missingConcern(tag: string): ConcernHandle {
  const gone = (): ActorGoneError => new ActorGoneError(`plugin '${tag}'`);
  return {
    id: "",
    snapshot: () => {
      throw gone();
    },
    ask: () => Promise.reject(gone()),
  };
}

function sharedOf(host: ApiHost, tag: string, type: string): { host: ApiHost; tag: string; type: string; events: readonly string[] } | null {
  const found = host.catalog.lookup(type);
  const shared = "def" in found ? found.def.control?.shared : undefined;
  // The workers hear of every shared change from the app's actors; only cluster-wide ones are published.
  const events = shared?.scope === "workers" ? undefined : shared?.events;
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


export function registerPluginRoutes(api: FastifyInstance, { host, schemas }: RouteContext): void {
  const registered = collect(host.catalog.definitions());
  const generation = (): number | null => host.actor.getSnapshot().context.current;

  api.get("/api/plugins", { schema: { role: "viewer", summary: "Plugins of the running configuration, with actor states and routes", tags: ["plugins"], response: { 200: pluginsSchema } } }, async () => {
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
  const streams = new EventStreams(api, () => host.sseHeartbeatMs());

  /** The live plugin with `tag` when its type serves route `key`; else the not-found error. */
  const livePlugin = (tag: string, types: Set<string>, notFound: ErrorCode, key: string): { live: LivePlugin; g: number } => {
    const live = host.liveRuntime()?.plugins.get(tag);
    const g = generation();
    if (!live || g === null || !types.has(live.type)) throw new ApiError(notFound, `no plugin '${tag}' with route ${key} in the running configuration`);
    return { live, g };
  };

  // Own scope: bodies arrive as bytes and each route decides how to read them (JSON, raw or streamed).
  void api.register(async (scope) => {
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser("*", { parseAs: "buffer" }, (_req, body, done) => done(null, body));
    // Query strings and paths are text and are coerced to their schema types; a JSON body already has types ({"index": "1"} is not an integer).
    scope.setValidatorCompiler(schemas.validator(({ schema, httpPart }: { schema: unknown; httpPart?: string }) => (httpPart === "body" ? strictAjv : coercingAjv).compile(schema as object)));

    const add = (target: FastifyInstance, key: string, { route, types }: Registered): void => {
      const badBody = (route.invalidBody ?? "invalid_request") as ErrorCode;
      const badQuery = (route.invalidQuery ?? "invalid_query") as ErrorCode;
      const schema = route.schema ?? {};
      const params = (schema.params ?? { type: "object", properties: {} }) as { properties?: Record<string, unknown>; required?: string[] };
      target.route({
        method: route.method,
        url: routeUrl(":tag", route),
        attachValidation: true,
        config: { changesState: route.changesState === true, audit: (req: FastifyRequest) => pluginAuditLine(host, route, req) },
        ...(route.stream ? { exposeHeadRoute: false } : {}),
        ...(route.bodyLimit ? { bodyLimit: route.bodyLimit } : {}),
        schema: {
          role: route.role,
          summary: route.summary,
          ...(route.description ? { description: route.description } : {}),
          tags: ["plugins"],
          params: { type: "object", properties: { tag: { type: "string", description: "Plugin tag" }, ...params.properties }, required: ["tag", ...(params.required ?? [])] },
          ...(schema.querystring ? { querystring: schema.querystring } : {}),
          ...(schema.body && route.body !== "raw" ? { body: schema.body } : {}),
          // Any plugin route may reach a plugin being replaced: 503 plugin_unavailable.
          response: { ...(schema.response ?? {}), ...errorResponses((route.notFound ?? "plugin_route_not_found") as ErrorCode, "plugin_unavailable", ...((route.errors ?? []) as ErrorCode[])) },
        },
        preValidation: async (req: FastifyRequest) => {
          if ((route.body ?? "json") === "json" && route.method !== "GET") req.body = jsonBody(req.body, badBody);
        },
        handler: async (req: FastifyRequest, reply: FastifyReply) => {
          const { tag, ...rest } = req.params as Record<string, string>;
          // A streamed body may be partly unread when the answer is an error: the connection closes after it.
          if (route.body === "stream") void reply.header("connection", "close");
          const { live, g } = livePlugin(tag, types, (route.notFound ?? "plugin_route_not_found") as ErrorCode, key);
          if (req.validationError) {
            const ctx = (req.validationError as { validationContext?: string }).validationContext;
            throw new ApiError(ctx === "querystring" ? badQuery : ctx === "params" ? "invalid_path" : badBody, validationMessage(req.validationError));
          }
          const concern = concernActor(host.actor.system, g, tag);
          const plugin: RoutePlugin<unknown> = {
            tag,
            type: live.type,
            view: live.instance,
            concern: concern ? concernHandle(concern, (concern as { systemId?: string }).systemId ?? concern.id, sharedOf(host, tag, live.type)) : missingConcern(tag),
          };
          if (route.stream) requireEventStream(req);
          const abort = new AbortController();
          reply.raw.on("close", () => abort.abort());
          let body: unknown = req.body;
          if (route.body === "stream") {
            const limit = route.bodyLimit ?? api.initialConfig.bodyLimit ?? 0;
            if (Number(req.headers["content-length"]) > limit) throw tooLarge(key, limit);
            body = bounded(req.body as AsyncIterable<Uint8Array> | undefined, limit, key);
          }
          let result: unknown;
          try {
            result = await route.handle({ params: rest, query: (req.query ?? {}) as Record<string, unknown>, body, signal: abort.signal }, plugin);
          } catch (err) {
            throw toApiError(err, host, key);
          }
          if (route.body === "stream") reply.removeHeader("connection");
          if (isReply(result)) {
            switch (result.kind) {
              case "text":
                return reply.type("text/plain; charset=utf-8").send(result.body);
              case "json":
                return reply.code(route.status ?? 200).type("application/json; charset=utf-8").send(result.body);
              case "bytes":
                return reply.type(result.contentType).header("content-disposition", `attachment; filename="${result.filename}"`).send(result.body);
              case "sse":
                if (!route.stream) throw new ApiError("internal_error", `plugin route ${key} returned a stream but is not declared with stream: true`);
                streams.start(req, reply, result.open);
                return;
            }
          }
          return reply.code(route.status ?? 200).send(result);
        },
      });
    };

    for (const [key, reg] of registered) if (reg.route.body !== "stream") add(scope, key, reg);
    // Streamed bodies: the request itself is handed to the handler, which reads (and is bounded) as it decodes.
    await scope.register(async (streamed) => {
      streamed.removeAllContentTypeParsers();
      streamed.addContentTypeParser("*", (_req, payload, done) => done(null, payload));
      for (const [key, reg] of registered) if (reg.route.body === "stream") add(streamed, key, reg);
    });

    // No GET route changes state; GET on a path that has only other methods answers 405 naming them.
    for (const { path, methods, types } of pathsWithoutGet(registered)) {
      const allow = [...methods].sort().join(", ");
      scope.route({
        method: "GET",
        url: routeUrl(":tag", { path }),
        schema: { hide: true, role: "viewer" },
        handler: async (req: FastifyRequest, reply: FastifyReply) => {
          const { tag } = req.params as Record<string, string>;
          const url = req.url.split("?")[0];
          livePlugin(tag, types, "plugin_route_not_found", `GET ${path}`);
          void reply.header("allow", allow);
          throw new ApiError("method_not_allowed", `GET does not change anything here: use ${allow} ${url}`);
        },
      });
    }
  });
}

/** `<type> <tag> <what the route says>`: "matcher_mode ads → always_false for 10m". */
function pluginAuditLine(host: ApiHost, route: AnyRoute, req: FastifyRequest): string {
  const { tag, ...params } = req.params as Record<string, string>;
  const type = host.liveRuntime()?.plugins.get(tag ?? "")?.type ?? "plugin";
  const what = route.audit ? route.audit({ params, query: (req.query ?? {}) as Record<string, unknown>, body: req.body }) : `${route.method} ${route.path || "/"}`;
  return `${type} ${tag ?? "?"} ${what}`;
}

/** Paths served without GET, with the methods they have and the plugin types that serve them. */
function pathsWithoutGet(registered: Map<string, Registered>): { path: string; methods: Set<string>; types: Set<string> }[] {
  const byPath = new Map<string, { path: string; methods: Set<string>; types: Set<string> }>();
  for (const { route, types } of registered.values()) {
    const entry = byPath.get(route.path) ?? { path: route.path, methods: new Set<string>(), types: new Set<string>() };
    entry.methods.add(route.method);
    for (const t of types) entry.types.add(t);
    byPath.set(route.path, entry);
  }
  return [...byPath.values()].filter((e) => !e.methods.has("GET"));
}

/** ajv's message, naming the field an `additionalProperties: false` schema does not know (ajv leaves it out). */
function validationMessage(err: Error & { validation?: { keyword: string; params: Record<string, unknown> }[] }): string {
  const extra = err.validation?.find((e) => e.keyword === "additionalProperties")?.params.additionalProperty;
  return typeof extra === "string" ? `${err.message}: '${extra}'` : err.message;
}

const tooLarge = (key: string, limit: number): ApiError => new ApiError("body_too_large", `request body is larger than the limit of ${formatBytes(limit)} for ${key}`);

/** The body's bytes as they arrive, until `limit`: one more byte and iterating throws body_too_large. */
async function* bounded(body: AsyncIterable<Uint8Array> | undefined, limit: number, key: string): AsyncGenerator<Uint8Array> {
  if (body === undefined) return;
  // Read by hand: leaving a for-await early would destroy the request, and with it the 413 answer.
  const it = body[Symbol.asyncIterator]();
  let seen = 0;
  for (let r = await it.next(); r.done !== true; r = await it.next()) {
    seen += r.value.length;
    if (seen > limit) throw new RouteError("body_too_large", tooLarge(key, limit).message);
    yield r.value;
  }
}
