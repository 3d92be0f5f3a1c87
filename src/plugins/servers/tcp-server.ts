// `tcp_server`: DNS over TCP with 2-byte length framing; several queries per connection are
// answered as each completes. With `cert` and `key` it serves DNS over TLS (RFC 7858, ALPN `dot`,
// protocol label `dot`). Connection limits (max_conns, idle_timeout, frame_timeout — which also
// bounds a TLS handshake — backpressure) are applied by the listener's StreamConnections. With
// `proxy_protocol` a connection from a trusted balancer may open with a PROXY v2 header (before TLS).

import { parseListen } from "../../config/listen.js";
import { MAX_QUERY_BYTES } from "../../dns/query.js";
import { durationSchema, parseDuration } from "../../engine/duration.js";
import { isPromise } from "../../engine/types.js";
import { definePlugin, type ArgProblem } from "../../registry/types.js";
import { QueryHandler, serverStats } from "./handle.js";
import { openFileLimit } from "./fd-limit.js";
import { TCP, type TcpHandler } from "./listeners.js";
import { ProxyPolicy, proxyStats } from "./proxy-protocol.js";
import { checkServerArgs, DRAIN_TIMEOUT_MS, serverArgProperties, serverDependencies, type ServerArgs } from "./server-common.js";
import { streamStats } from "./stream-limits.js";
import { checkTlsArgs, loadSecureContext, tlsArgProperties, type TlsArgs } from "./tls-files.js";
import { serverFailureLog } from "./failure-log.js";

interface TcpServerArgs extends ServerArgs, TlsArgs {
  idle_timeout: number | string;
  frame_timeout: number | string;
  max_conns: number;
}

/** File descriptors left for everything but DNS connections (API, upstreams, files). */
const FD_RESERVE = 256;

const EMPTY = Buffer.alloc(0);

function positiveDuration(args: TcpServerArgs, key: "idle_timeout" | "frame_timeout", problems: ArgProblem[]): void {
  try {
    if (parseDuration(args[key]) <= 0) problems.push({ path: [key], message: `${key} must be positive` });
  } catch (err) {
    problems.push({ path: [key], message: (err as Error).message });
  }
}

export const tcpServer = definePlugin<TcpServerArgs, "server">({
  type: "tcp_server",
  kind: "server",
  feature: "core",
  summary: "Answers DNS over TCP on a listen address, or DNS over TLS with cert and key.",
  schema: {
    type: "object",
    additionalProperties: false,
    required: ["entry", "listen"],
    properties: {
      ...serverArgProperties,
      ...tlsArgProperties,
      idle_timeout: { ...durationSchema, default: "30s" },
      frame_timeout: { ...durationSchema, default: "5s" },
      max_conns: { type: "integer", minimum: 1, default: 256 },
    },
  },
  check(args) {
    const problems = [...checkServerArgs(args), ...checkTlsArgs(args)];
    positiveDuration(args, "idle_timeout", problems);
    positiveDuration(args, "frame_timeout", problems);
    return problems;
  },
  dependencies: serverDependencies,
  async create(args, ctx) {
    const entry = ctx.executor(args.entry.replace(/^\$/, ""));
    const secure = await loadSecureContext(args, (p) => ctx.resolvePath(p));
    const protocol = secure ? "dot" : "tcp";
    const failures = serverFailureLog(ctx);
    const handler = new QueryHandler(entry, protocol, serverStats(ctx.services.metrics, ctx.tag, protocol), failures, 0xffff);
    const stats = streamStats(ctx.services.metrics, ctx.tag);
    const proxy = ProxyPolicy.from(args.proxy_protocol, proxyStats(ctx.services.metrics, ctx.tag, protocol));
    const listener = await ctx.services.listeners.claim(TCP, parseListen(args.listen), ctx.owner);
    const limits = { maxConns: args.max_conns, idleMs: parseDuration(args.idle_timeout), frameMs: parseDuration(args.frame_timeout), maxFrame: MAX_QUERY_BYTES };
    const onQuery: TcpHandler = (query, remote, reply, oversized) => {
      const answer = oversized ? handler.tooLarge(query) : handler.handle(query, remote.address, remote.port, null, remote.serverName ?? null);
      if (answer === null) reply(EMPTY);
      else if (isPromise(answer)) void answer.then((a) => reply(a ?? EMPTY));
      else reply(answer);
    };
    return {
      address: () => ({ protocol, ...listener.address() }),
      encrypted: () => (secure ? { tag: ctx.tag, protocol: "dot", ...listener.address() } : null),
      start() {
        handler.clients = ctx.clients();
        listener.connections.configure(limits);
        listener.connections.useStats(stats);
        listener.tls = secure;
        listener.proxy = proxy;
        listener.handler = onQuery;
        const a = listener.address();
        ctx.log.info({ protocol, address: a.address, port: a.port, max_conns: limits.maxConns }, `${protocol} server listening`);
        const fds = openFileLimit();
        const budget = ctx.services.listeners.tcpMaxConns();
        if (fds !== null && budget > fds - FD_RESERVE) {
          ctx.log.warn({ max_conns_total: budget, open_file_limit: fds }, `TCP listeners may hold ${budget} connections, leaving fewer than ${FD_RESERVE} of ${fds} file descriptors for the API and upstreams: lower max_conns or raise the limit (ulimit -n)`);
        }
        return Promise.resolve();
      },
      async destroy() {
        if (listener.handler === onQuery) listener.handler = null;
        await handler.drain(DRAIN_TIMEOUT_MS);
        failures.close();
        await ctx.services.listeners.release(listener, ctx.owner);
      },
    };
  },
});
