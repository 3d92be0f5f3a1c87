// `http_server`: DNS over HTTPS (RFC 8484). Each `entries[].path` goes to its own executor (with
// `json_api`, the path also answers the JSON form of the public DoH APIs). With
// `cert` and `key`: HTTP/2 (ALPN h2) and HTTP/1.1 over TLS; without: cleartext HTTP/1.1 and h2c
// with prior knowledge on the same port, for a reverse proxy in front. Its own listener, owned by
// the plugin (not a route of the management API: different auth, lifecycle and hooks). With
// `proxy_protocol` a connection from a trusted balancer may open with a PROXY v2 header. With
// `src_ip_header` the client is read from that header, but only from peers in `trusted_proxies`
// (default: loopback, the reverse proxy on the same host).

import { listenProblem, parseListen } from "../../config/listen.js";
import { durationSchema, parseDuration } from "../../engine/duration.js";
import { definePlugin, type ArgProblem, type DependencySpec } from "../../registry/types.js";
import { IpPrefixSetBuilder } from "../../engine/rules/ip.js";
import { DohService, type ClientHeaderPolicy, type DohRoute } from "./doh.js";
import { openFileLimit } from "./fd-limit.js";
import { QueryHandler, serverStats } from "./handle.js";
import { httpStats } from "./http-conn.js";
import { HTTP } from "./listeners.js";
import { checkProxyArgs, proxyArgSchema, ProxyPolicy, proxyStats, type ProxyArgs } from "./proxy-protocol.js";
import { DRAIN_TIMEOUT_MS } from "./server-common.js";
import { checkTlsArgs, loadSecureContext, tlsArgProperties, type TlsArgs } from "./tls-files.js";
import { serverFailureLog } from "./failure-log.js";

interface HttpServerArgs extends TlsArgs {
  listen: string;
  entries: { path: string; exec: string; json_api: boolean }[];
  src_ip_header?: string;
  trusted_proxies?: string[];
  proxy_protocol?: ProxyArgs;
  idle_timeout: number | string;
  request_timeout: number | string;
  max_conns: number;
}

/** Peers believed about the client when `trusted_proxies` is not given: a reverse proxy on this host. */
export const DEFAULT_TRUSTED_PROXIES = ["127.0.0.0/8", "::1"];

/** File descriptors left for everything but DNS connections (API, upstreams, files). */
const FD_RESERVE = 256;

function positiveDuration(args: HttpServerArgs, key: "idle_timeout" | "request_timeout", problems: ArgProblem[]): void {
  try {
    if (parseDuration(args[key]) <= 0) problems.push({ path: [key], message: `${key} must be positive` });
  } catch (err) {
    problems.push({ path: [key], message: (err as Error).message });
  }
}

function checkArgs(args: HttpServerArgs): ArgProblem[] {
  const problems: ArgProblem[] = [...checkTlsArgs(args), ...checkProxyArgs(args)];
  const listen = listenProblem(args.listen);
  if (listen) problems.push({ path: ["listen"], message: listen });
  const seen = new Set<string>();
  args.entries.forEach((e, i) => {
    if (!/^\/[\x21-\x7e]*$/.test(e.path) || e.path.includes("?") || e.path.includes("#")) {
      problems.push({ path: ["entries", i, "path"], message: `path '${e.path}' must start with / and hold no spaces, ? or #` });
    } else if (seen.has(e.path)) {
      problems.push({ path: ["entries", i, "path"], message: `path '${e.path}' is listed twice` });
    }
    seen.add(e.path);
  });
  if (args.src_ip_header !== undefined && !/^[A-Za-z0-9!#$%&'*+.^_`|~-]+$/.test(args.src_ip_header)) {
    problems.push({ path: ["src_ip_header"], message: `'${args.src_ip_header}' is not an HTTP header name` });
  }
  if (args.trusted_proxies !== undefined && args.src_ip_header === undefined) {
    problems.push({ path: ["trusted_proxies"], message: "trusted_proxies says who may set src_ip_header: set src_ip_header too" });
  }
  args.trusted_proxies?.forEach((rule, i) => {
    try {
      new IpPrefixSetBuilder().add(rule);
    } catch (err) {
      problems.push({ path: ["trusted_proxies", i], message: (err as Error).message });
    }
  });
  positiveDuration(args, "idle_timeout", problems);
  positiveDuration(args, "request_timeout", problems);
  return problems;
}

function clientHeaderPolicy(args: HttpServerArgs): ClientHeaderPolicy | null {
  if (args.src_ip_header === undefined) return null;
  const trusted = new IpPrefixSetBuilder();
  for (const rule of args.trusted_proxies ?? DEFAULT_TRUSTED_PROXIES) trusted.add(rule);
  return { header: args.src_ip_header.toLowerCase(), trusted: trusted.build() };
}

export const httpServer = definePlugin<HttpServerArgs, "server">({
  type: "http_server",
  kind: "server",
  feature: "core",
  summary: "Answers DNS over HTTPS (RFC 8484, GET and POST, optionally the JSON API; HTTP/2 and HTTP/1.1; TLS or cleartext behind a proxy).",
  schema: {
    type: "object",
    additionalProperties: false,
    required: ["entries", "listen"],
    properties: {
      listen: { type: "string", minLength: 1 },
      entries: {
        type: "array",
        minItems: 1,
        items: {
          type: "object",
          additionalProperties: false,
          required: ["path", "exec"],
          properties: {
            path: { type: "string", minLength: 1 },
            exec: { type: "string", minLength: 1 },
            // Also answer GET ?name=&type= in the JSON form of Google's and Cloudflare's DoH APIs (doh-json.ts).
            json_api: { type: "boolean", default: false },
          },
        },
      },
      ...tlsArgProperties,
      src_ip_header: { type: "string", minLength: 1 },
      trusted_proxies: { type: "array", minItems: 1, items: { type: "string", minLength: 1 } },
      proxy_protocol: proxyArgSchema,
      idle_timeout: { ...durationSchema, default: "30s" },
      request_timeout: { ...durationSchema, default: "5s" },
      max_conns: { type: "integer", minimum: 1, default: 256 },
    },
  },
  check: checkArgs,
  dependencies: (args): DependencySpec[] => args.entries.map((e, i) => ({ argsPath: ["entries", i, "exec"], target: e.exec.replace(/^\$/, ""), kind: "executor" })),
  async create(args, ctx) {
    const stats = serverStats(ctx.services.metrics, ctx.tag, "doh");
    const routes = new Map<string, DohRoute>();
    const failures = serverFailureLog(ctx);
    for (const e of args.entries) routes.set(e.path, { handler: new QueryHandler(ctx.executor(e.exec.replace(/^\$/, "")), "doh", stats, failures, 0xffff), json: e.json_api });
    const secure = await loadSecureContext(args, (p) => ctx.resolvePath(p));
    const service = new DohService(routes, clientHeaderPolicy(args));
    const connStats = httpStats(ctx.services.metrics, ctx.tag);
    const limits = { maxConns: args.max_conns, idleMs: parseDuration(args.idle_timeout), requestMs: parseDuration(args.request_timeout) };
    const proxy = ProxyPolicy.from(args.proxy_protocol, proxyStats(ctx.services.metrics, ctx.tag, "doh"));
    const listener = await ctx.services.listeners.claim(HTTP, parseListen(args.listen), ctx.owner);
    const scheme = secure ? "https" : "http";
    return {
      address: () => ({ protocol: "doh", ...listener.address() }),
      encrypted: () => (secure ? { tag: ctx.tag, protocol: "doh", ...listener.address(), path: args.entries[0].path } : null),
      start() {
        const clients = ctx.clients();
        for (const route of routes.values()) route.handler.clients = clients;
        listener.configure(limits);
        listener.useStats(connStats);
        listener.tls = secure;
        listener.proxy = proxy;
        listener.handler = service.serve;
        const a = listener.address();
        ctx.log.info({ protocol: "doh", scheme, address: a.address, port: a.port, paths: [...routes.keys()], max_conns: limits.maxConns }, "doh server listening");
        const fds = openFileLimit();
        const budget = ctx.services.listeners.tcpMaxConns();
        if (fds !== null && budget > fds - FD_RESERVE) {
          ctx.log.warn({ max_conns_total: budget, open_file_limit: fds }, `TCP and HTTP listeners may hold ${budget} connections, leaving fewer than ${FD_RESERVE} of ${fds} file descriptors for the API and upstreams: lower max_conns or raise the limit (ulimit -n)`);
        }
        return Promise.resolve();
      },
      async destroy() {
        if (listener.handler === service.serve) listener.handler = null;
        await Promise.all([...routes.values()].map((r) => r.handler.drain(DRAIN_TIMEOUT_MS)));
        failures.close();
        await ctx.services.listeners.release(listener, ctx.owner);
      },
    };
  },
});
