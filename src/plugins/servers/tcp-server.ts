// `tcp_server`: DNS over TCP with 2-byte length framing; several queries per connection are
// answered as each completes; idle connections close after `idle_timeout`.

import { parseListen } from "../../config/listen.js";
import { durationSchema, parseDuration } from "../../engine/duration.js";
import { isPromise } from "../../engine/types.js";
import { definePlugin } from "../../registry/types.js";
import { QueryHandler, serverStats } from "./handle.js";
import type { TcpHandler } from "./listeners.js";
import { checkServerArgs, DRAIN_TIMEOUT_MS, serverArgProperties, serverDependencies, type ServerArgs } from "./server-common.js";

interface TcpServerArgs extends ServerArgs {
  idle_timeout: number | string;
}

export const tcpServer = definePlugin<TcpServerArgs, "server">({
  type: "tcp_server",
  kind: "server",
  feature: "core",
  summary: "Answers DNS over TCP on a listen address.",
  schema: {
    type: "object",
    additionalProperties: false,
    required: ["entry", "listen"],
    properties: { ...serverArgProperties, idle_timeout: { ...durationSchema, default: "30s" } },
  },
  check(args) {
    const problems = checkServerArgs(args);
    try {
      if (parseDuration(args.idle_timeout) <= 0) problems.push({ path: ["idle_timeout"], message: "idle_timeout must be positive" });
    } catch (err) {
      problems.push({ path: ["idle_timeout"], message: (err as Error).message });
    }
    return problems;
  },
  dependencies: serverDependencies,
  async create(args, ctx) {
    const entry = ctx.executor(args.entry.replace(/^\$/, ""));
    const handler = new QueryHandler(entry, "tcp", serverStats(ctx.services.metrics, ctx.tag, "tcp"), ctx.log, 0xffff);
    const listener = await ctx.services.listeners.tcp(parseListen(args.listen), ctx.owner);
    const idleMs = parseDuration(args.idle_timeout);
    const onQuery: TcpHandler = (query, remote, reply) => {
      const answer = handler.handle(query, remote.address, remote.port);
      if (answer === null) reply(Buffer.alloc(0));
      else if (isPromise(answer)) void answer.then((a) => reply(a ?? Buffer.alloc(0)));
      else reply(answer);
    };
    return {
      address: () => ({ protocol: "tcp", ...listener.address() }),
      start() {
        listener.idleTimeoutMs = idleMs;
        listener.handler = onQuery;
        const a = listener.address();
        ctx.log.info({ protocol: "tcp", address: a.address, port: a.port }, "tcp server listening");
        return Promise.resolve();
      },
      async destroy() {
        if (listener.handler === onQuery) listener.handler = null;
        await handler.drain(DRAIN_TIMEOUT_MS);
        await ctx.services.listeners.release(listener, ctx.owner);
      },
    };
  },
});
