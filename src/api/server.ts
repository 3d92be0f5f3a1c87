// The management HTTP API: one fastify listener (HTTP or HTTPS/mTLS), the Host check on every
// request, the Origin check, authentication (users, tokens, sessions) and each route's least role
// and CORS on /api/*, the static WebUI at /, one JSON error shape, and an OpenAPI document built
// from the same route schemas that validate requests. Users, CORS, the guard, the connection cap and
// WebUI follow reloads; the listen address and TLS files need a restart.

import { readFileSync, statSync } from "node:fs";
import { isAbsolute, resolve } from "node:path";
import Fastify, { type FastifyError, type FastifyInstance, type FastifyReply, type FastifyRequest, type RouteOptions } from "fastify";
import { API_REQUEST_OPTIONS } from "../config/ajv.js";
import { configLimits, formatBytes } from "../config/limits.js";
import { parseListen } from "../config/listen.js";
import type { ApiConfig } from "../config/schema.js";
import type { TLSSocket } from "node:tls";
import { createAudit, type AuditTrail } from "./audit/audit.js";
import type { AuthRefusal } from "./auth/authenticator.js";
import { roleAllows, type RouteRole } from "../registry/roles.js";
import { scopesAllow } from "./auth/scopes.js";
import { AuthService } from "./auth/service.js";
import { auditLine } from "./auth/audit-line.js";
import type { AuditSink } from "./audit/entry.js";
// The route declarations (role, audit) and request fields (principal) every route module relies on.
import type {} from "./route-meta.js";
import { refusalToError, registerAuthRoutes } from "./routes/auth.js";
import { CorsPolicy } from "./cors.js";
import { ApiError, errorBody, ERROR_STATUS } from "./errors.js";
import { protectListener } from "../net/outbound-policy.js";
import { isLoopback, RequestGuard, type RequestRefusal } from "./request-guard.js";
import type { ApiHost } from "./host.js";
import { buildOpenApi } from "./openapi.js";
import { registerBackupRoutes } from "./routes/backup.js";
import { registerConfigRoutes } from "./routes/config.js";
import { registerControlRoutes } from "./routes/control.js";
import { registerInspectRoutes } from "./routes/inspect.js";
import { registerLogRoutes } from "./routes/logs.js";
import { LazySchemas } from "./lazy-schemas.js";
import { registerPluginRoutes } from "./routes/plugins.js";
import { registerUpgradeRoutes } from "./routes/upgrade.js";
import { BUILTIN_WEBUI_INDEX, BUILTIN_WEBUI_ROOT, WebUi } from "./webui.js";

/** `api.http.limits.max_conns` default: room for 200 log-stream clients and the WebUI besides. */
export const DEFAULT_MAX_CONNS = 256;

export interface ApiServer {
  readonly fastify: FastifyInstance;
  /** The routes' schemas, compiled on first use (compileAll for checks). */
  readonly schemas: LazySchemas;
  /** The audit trail of management requests (api.http.audit). */
  readonly audit: AuditTrail;
  listen(): Promise<void>;
  /** Applies a reloaded `api` section: auth, CORS and WebUI change at once; listen/ssl need a restart. */
  updatePolicy(config: ApiConfig): void;
  close(): Promise<void>;
  /** Where it listens (the real port when the config said 0). */
  address(): { address: string; port: number; protocol: "http" | "https" };
}

/** What every route module receives. */
export interface RouteContext {
  host: ApiHost;
  /** Wraps a route's own validator compiler so its schemas compile on first use, like the rest. */
  readonly schemas: LazySchemas;
  /** Who can reach the listener, and whether requests must authenticate (follows reloads of `api`). */
  readonly access: () => ApiAccess;
}

export interface ApiAccess {
  /** The listen address is loopback: only this machine can connect. */
  loopbackListener: boolean;
  /** Basic Auth is configured, or TLS requires a client certificate. */
  authConfigured: boolean;
}

interface Policy {
  config: ApiConfig;
  cors: CorsPolicy;
  guard: RequestGuard;
  webui: WebUi | null;
}

function resolvePath(host: ApiHost, p: string): string {
  return isAbsolute(p) ? p : resolve(host.baseDir, p);
}

function readTlsFile(host: ApiHost, field: string, p: string): Buffer {
  const full = resolvePath(host, p);
  try {
    return readFileSync(full);
  } catch (err) {
    throw new Error(`api.http.ssl.${field}: cannot read ${full} (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`, { cause: err });
  }
}

function tlsOptions(host: ApiHost, config: ApiConfig): { cert: Buffer; key: Buffer; ca?: Buffer; requestCert?: boolean; rejectUnauthorized?: boolean } | null {
  const ssl = config.ssl;
  if (!ssl?.cert || !ssl.key) return null;
  // The config check refuses this too; without a CA there is nothing to verify client certificates against.
  if (ssl.require_client_cert === true && !ssl.client_ca) throw new Error("api.http.ssl.require_client_cert needs ssl.client_ca");
  const ca = ssl.client_ca ? readTlsFile(host, "client_ca", ssl.client_ca) : undefined;
  return {
    cert: readTlsFile(host, "cert", ssl.cert),
    key: readTlsFile(host, "key", ssl.key),
    ...(ca ? { ca, requestCert: true, rejectUnauthorized: ssl.require_client_cert === true } : {}),
  };
}

/** `webui`: an object serves its root; omitted or true, the built-in dashboard; false, nothing. */
function makeWebUi(host: ApiHost, webui: ApiConfig["webui"]): WebUi | null {
  if (webui === false) return null;
  if (webui === undefined || webui === true) {
    if (!isDirectory(BUILTIN_WEBUI_ROOT)) {
      host.log.warn({ target: "api", root: BUILTIN_WEBUI_ROOT }, "the built-in dashboard is not built (run npm run build); / answers 404 until it is");
    }
    return new WebUi(BUILTIN_WEBUI_ROOT, BUILTIN_WEBUI_INDEX, true);
  }
  const root = resolvePath(host, webui.root);
  if (!isDirectory(root)) host.log.warn({ target: "api", root }, "webui.root is not a directory; WebUI requests get 404 until it exists");
  return new WebUi(root, webui.index);
}

function makePolicy(host: ApiHost, config: ApiConfig): Policy {
  const cors = CorsPolicy.from(config);
  return {
    config,
    cors,
    guard: RequestGuard.from(config, cors),
    webui: makeWebUi(host, config.webui),
  };
}

function isDirectory(p: string): boolean {
  try {
    return statSync(p).isDirectory();
  } catch {
    return false;
  }
}

const isApiPath = (path: string): boolean => path === "/api" || path.startsWith("/api/");

/**
 * True for requests that belong to the API (auth + CORS), judged on the raw and the percent-decoded
 * path and on the matched route: the router matches decoded paths, so `/%61pi/...` reaches API routes.
 */
function isApi(url: string, route?: string): boolean {
  if (route !== undefined && isApiPath(route)) return true;
  const raw = url.split("?")[0] ?? "";
  // Only ASCII escapes matter for the prefix; decoding them alone never fails on bad escapes elsewhere.
  return isApiPath(raw) || isApiPath(raw.replace(/%[0-7][0-9a-f]/gi, (e) => String.fromCharCode(parseInt(e.slice(1), 16))));
}

/** `X-Requested-With: XMLHttpRequest`: the caller handles a 401 itself (no WWW-Authenticate challenge). */
const noChallenge = (header: string | string[] | undefined): boolean => typeof header === "string" && header.toLowerCase() === "xmlhttprequest";

/** Every API route as `METHOD /api/path/{param}` (what token scopes are checked against). */
function routeKeys(routes: readonly RouteOptions[]): string[] {
  return routes.flatMap((r) => (Array.isArray(r.method) ? r.method : [r.method]).map((m) => `${m} ${r.url.replace(/:([A-Za-z0-9_]+)/g, "{$1}")}`));
}

function validationCode(context: string | undefined): "invalid_query" | "invalid_path" | "invalid_request" {
  return context === "querystring" ? "invalid_query" : context === "params" ? "invalid_path" : "invalid_request";
}

export async function createApiServer(host: ApiHost, initial: ApiConfig): Promise<ApiServer> {
  const tls = tlsOptions(host, initial);
  // Read once, like the listen address: fastify fixes the body limit when it is created.
  const bodyLimit = configLimits(initial.limits).bodyBytes;
  const schemas = new LazySchemas();
  const fastify = Fastify({
    logger: false,
    bodyLimit,
    forceCloseConnections: true,
    ...(tls ? { https: tls } : {}),
    // A path with bad percent-encoding: the API gate still applies; outside /api no file can match it.
    frameworkErrors: (err: FastifyError, req: FastifyRequest, reply: FastifyReply) => {
      const api = isApi(req.url);
      void reply.header("x-content-type-options", "nosniff");
      if (hostGate(req, reply)) return;
      const answer = (): void => {
        const code = api ? "invalid_path" : "not_found";
        void reply.code(ERROR_STATUS[code]).send(errorBody(code, api ? err.message : "no such file"));
      };
      if (!api) return answer();
      void gate(req, reply).then((answered) => answered || answer(), (e: unknown) => reply.send(e));
    },
    // Fastify builds its own ajv for the other routes' schemas, with the options of src/config/ajv.ts.
    ajv: { customOptions: { ...API_REQUEST_OPTIONS, coerceTypes: true } },
    schemaController: { compilersFactory: schemas.factories() },
  }) as unknown as FastifyInstance;
  let policy = makePolicy(host, initial);
  let listeningPort = 0;
  const auth = new AuthService(host, initial, () => listeningPort, { secure: tls !== null });
  /** Where audit lines go: the audit trail (api.http.audit; an entry appended while it is off is dropped silently). */
  const audit = await createAudit(host, initial);
  const auditSink: AuditSink = audit.sink;
  const routes: RouteOptions[] = [];
  fastify.addHook("onRoute", (route) => {
    if (isApi(route.url) && route.method !== "HEAD") routes.push(route);
  });

  // Raw bodies (YAML for /api/config/validate) arrive as text whatever the content type says.
  fastify.addContentTypeParser("*", { parseAs: "string" }, (_req, body, done) => done(null, body));

  const refuse = (reply: FastifyReply, refusal: RequestRefusal): true => {
    void reply.code(ERROR_STATUS[refusal.code]).send(errorBody(refusal.code, refusal.message));
    return true;
  };

  /** The DNS-rebinding check, for API and WebUI alike; true when it answered the request. */
  const hostGate = (req: FastifyRequest, reply: FastifyReply): boolean => {
    const refusal = policy.guard.host(req.headers.host);
    return refusal !== null && refuse(reply, refusal);
  };

  /** The least role of the route this request reached; a path with no route needs only to be authenticated (then 404). */
  const neededRole = (req: FastifyRequest): RouteRole => {
    const declared = req.routeOptions.schema?.role;
    if (declared !== undefined) return declared;
    // A route without a role is a bug the role matrix test finds; until then only an admin reaches it.
    return req.routeOptions.url === undefined || req.is404 ? "metrics" : "admin";
  };

  const refuseAuth = (req: FastifyRequest, reply: FastifyReply, r: AuthRefusal): true => {
    req.attempted = r;
    const err = refusalToError(r, reply);
    // A script with its own sign-in form (the dashboard) asks for no challenge: with one, browsers pop their own password dialog.
    if (r.challenge && !noChallenge(req.headers["x-requested-with"])) void reply.header("www-authenticate", 'Basic realm="sluice"');
    void reply.code(err.status).send({ ...errorBody(err.code, err.message), ...err.extra });
    return true;
  };

  /** Who may do what: the caller's credentials, then the route's role (or the token's scopes). */
  const authorise = async (req: FastifyRequest, reply: FastifyReply): Promise<boolean> => {
    const needed = neededRole(req);
    if (needed === "public") return false;
    const socket = req.raw.socket as Partial<TLSSocket>;
    const cert = socket.authorized === true ? (socket.getPeerCertificate?.().subject?.CN ?? "client certificate") : null;
    const found = await auth.authenticator.authenticate({
      authorization: req.headers.authorization,
      sessionId: auth.sessionIdOf(req.headers.cookie),
      address: req.ip,
      certificate: typeof cert === "string" ? cert : null,
    });
    if (!("kind" in found)) return refuseAuth(req, reply, found);
    req.principal = found;
    if (found.scopes !== null) {
      if (!scopesAllow(found.scopes, req.method, (req.url.split("?")[0] ?? ""))) {
        void reply.code(ERROR_STATUS.forbidden_scope).send(errorBody("forbidden_scope", `token '${found.name}' has no scope for ${req.method} ${req.url.split("?")[0] ?? ""}`));
        return true;
      }
    } else if (found.role === null || !roleAllows(found.role, needed)) {
      const message = `${req.method} ${req.routeOptions.url ?? req.url.split("?")[0] ?? ""} needs the ${needed} role; ${found.kind === "token" ? "token" : "user"} '${found.name}' has ${found.role ?? "none"}`;
      void reply.code(ERROR_STATUS.forbidden_role).send({ ...errorBody("forbidden_role", message), role_needed: needed, role: found.role });
      return true;
    }
    auth.track(found, reply.raw);
    return false;
  };

  /** CORS headers, preflight, the Origin check, authentication and the route's role for API requests; true when it answered the request. */
  const gate = async (req: FastifyRequest, reply: FastifyReply): Promise<boolean> => {
    void reply.headers(policy.cors.headers(req.headers.origin));
    // Preflight is answered before auth and before route lookup.
    if (req.method === "OPTIONS") {
      void reply.code(204).send();
      return true;
    }
    const refusal = policy.guard.origin({ method: req.method, headers: req.headers, changesState: req.routeOptions.config.changesState });
    if (refusal !== null) return refuse(reply, refusal);
    return authorise(req, reply);
  };

  fastify.addHook("onRequest", async (req: FastifyRequest, reply: FastifyReply) => {
    // Every answer, JSON or text or an error, is exactly the type it says: no browser guesses HTML into it.
    void reply.header("x-content-type-options", "nosniff");
    req.principal = null;
    if (hostGate(req, reply)) return reply;
    if (isApi(req.url, req.routeOptions.url) && (await gate(req, reply))) return reply;
  });

  // The error code of an answer, for the audit line (error bodies are small JSON).
  fastify.addHook("onSend", async (req: FastifyRequest, reply: FastifyReply, payload: unknown) => {
    if (reply.statusCode >= 400 && typeof payload === "string" && payload.length < 8192 && payload.startsWith("{")) {
      try {
        const code = (JSON.parse(payload) as { code?: unknown }).code;
        if (typeof code === "string") req.errorCode = code;
      } catch {
        // Not JSON after all: no code.
      }
    }
    return payload;
  });

  fastify.addHook("onResponse", async (req: FastifyRequest, reply: FastifyReply) => {
    if (!isApi(req.url, req.routeOptions.url)) return;
    const entry = auditLine(req, reply.statusCode, host.now());
    if (entry) auditSink.append(entry);
  });

  fastify.setErrorHandler((err: FastifyError, req, reply) => {
    if (err instanceof ApiError) return reply.code(err.status).send({ ...errorBody(err.code, err.message), ...err.extra });
    if (err.validation) {
      const where = err.validationContext ?? "body";
      const field = err.validation[0]?.instancePath.replace(/^\//, "").replace(/\//g, ".") || (err.validation[0]?.params as { missingProperty?: string })?.missingProperty || "";
      const message = `${where}${field ? `.${field}` : ""} ${err.validation[0]?.message ?? "is invalid"}`;
      const code = validationCode(where);
      return reply.code(ERROR_STATUS[code]).send(errorBody(code, message));
    }
    if (err.statusCode === ERROR_STATUS.body_too_large) {
      // A route with its own, smaller limit (the upgrade routes' 16 KiB) names that one: the global setting does not raise it.
      const routeLimit = req.routeOptions.bodyLimit;
      const message =
        routeLimit !== undefined && routeLimit !== bodyLimit
          ? `request body is larger than the limit of ${formatBytes(routeLimit)} for ${req.method} ${req.routeOptions.url ?? ""}`
          : `request body is larger than the limit of ${formatBytes(bodyLimit)}; raise api.http.limits.body_bytes (then restart) to accept larger bodies`;
      return reply.code(ERROR_STATUS.body_too_large).send(errorBody("body_too_large", message));
    }
    if (err.statusCode && err.statusCode >= 400 && err.statusCode < 500) {
      return reply.code(err.statusCode).send(errorBody("invalid_request", err.message));
    }
    host.log.error({ target: "api", method: req.method, url: req.url, err: err.message }, "request failed");
    return reply.code(ERROR_STATUS.internal_error).send(errorBody("internal_error", "internal error; see the server log"));
  });

  fastify.setNotFoundHandler(async (req, reply) => {
    if (!isApi(req.url) && policy.webui) return policy.webui.serve(req, reply);
    const path = req.url.split("?")[0] ?? "";
    if (path.startsWith("/api/plugins/")) return reply.code(ERROR_STATUS.plugin_route_not_found).send(errorBody("plugin_route_not_found", `no plugin route ${req.method} ${path}`));
    return reply.code(ERROR_STATUS.not_found).send(errorBody("not_found", `no route ${req.method} ${path}`));
  });

  const ctx: RouteContext = {
    host,
    schemas,
    access: () => ({ loopbackListener: isLoopback(parseListen(policy.config.listen).host), authConfigured: auth.authenticator.current.required }),
  };
  registerControlRoutes(fastify, ctx);
  registerConfigRoutes(fastify, ctx);
  registerBackupRoutes(fastify, ctx);
  registerInspectRoutes(fastify, ctx);
  registerLogRoutes(fastify, ctx);
  registerPluginRoutes(fastify, ctx);
  registerAuthRoutes(fastify, ctx, auth, () => routeKeys(routes));
  audit.register(fastify, ctx);
  // Routes exist only in builds with the upgrade feature (spec: Upgrade).
  if (host.catalog.build.enabledFeatures.includes("upgrade")) registerUpgradeRoutes(fastify, ctx);
  fastify.get("/api/openapi.json", { schema: { role: "viewer", summary: "This document", tags: ["meta"] } }, () => buildOpenApi(routes, auth.authenticator.current.required));
  await fastify.ready();
  // Node drops connections beyond this at accept, before any parsing.
  fastify.server.maxConnections = initial.limits?.max_conns ?? DEFAULT_MAX_CONNS;

  const addr = parseListen(initial.listen);
  const address = (): ReturnType<ApiServer["address"]> => {
    const a = fastify.server.address();
    const info = typeof a === "object" && a ? a : { address: addr.host, port: addr.port };
    return { address: info.address, port: info.port, protocol: tls ? "https" : "http" };
  };
  let unprotect = (): void => {};
  return {
    fastify,
    schemas,
    audit,
    address,
    async listen() {
      await fastify.listen({ host: addr.host, port: addr.port, ipv6Only: addr.family === 6 && !addr.dualStack });
      const a = address();
      listeningPort = a.port;
      host.log.info({ target: "api", address: a.address, port: a.port, protocol: a.protocol }, "management API listening");
      // No outbound request of this process (download, upgrade, config-from, any redirect) may reach it.
      unprotect = protectListener(a.address, a.port);
    },
    updatePolicy(config) {
      if (config.listen !== policy.config.listen || JSON.stringify(config.ssl) !== JSON.stringify(policy.config.ssl)) {
        host.log.warn({ target: "api" }, "api listen address or TLS settings changed; they take effect after a restart");
      }
      if (configLimits(config.limits).bodyBytes !== bodyLimit) {
        host.log.warn({ target: "api", body_bytes: bodyLimit }, "api.http.limits.body_bytes changed; it takes effect after a restart");
      }
      policy = makePolicy(host, { ...config, listen: policy.config.listen, ssl: policy.config.ssl });
      auth.update({ ...config, ssl: policy.config.ssl });
      fastify.server.maxConnections = config.limits?.max_conns ?? DEFAULT_MAX_CONNS;
      audit.update(config);
    },
    async close() {
      unprotect();
      await fastify.close();
      await auth.close();
      await audit.close();
    },
  };
}
