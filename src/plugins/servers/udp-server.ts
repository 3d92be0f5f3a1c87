// `udp_server`: plain DNS over UDP. Answers are fitted to the client's EDNS size, capped by
// `max_udp_size` so a small query cannot draw a large answer (TC when cut). With `proxy_protocol`
// each datagram from a trusted balancer may start with a PROXY v2 header naming the client.

import type { Socket } from "node:dgram";
import { parseListen } from "../../config/listen.js";
import { isPromise } from "../../engine/types.js";
import { definePlugin } from "../../registry/types.js";
import { QueryHandler, serverStats, type Answer } from "./handle.js";
import { UDP, type UdpHandler } from "./listeners.js";
import { ProxyPolicy, proxyStats } from "./proxy-protocol.js";
import { checkServerArgs, DRAIN_TIMEOUT_MS, serverArgProperties, serverDependencies, type ServerArgs } from "./server-common.js";
import { serverFailureLog } from "./failure-log.js";

/** An answer that needs I/O first. A function of its own: a closure in the message handler would make every datagram allocate its scope. */
function sendLater(socket: Socket, answer: Promise<Answer>, port: number, address: string): void {
  void answer.then((a) => a && socket.send(a, port, address));
}

interface UdpServerArgs extends ServerArgs {
  max_udp_size: number;
}

export const udpServer = definePlugin<UdpServerArgs, "server">({
  type: "udp_server",
  kind: "server",
  feature: "core",
  summary: "Answers DNS over UDP on a listen address.",
  schema: {
    type: "object",
    additionalProperties: false,
    required: ["entry", "listen"],
    // 1232: the DNS Flag Day 2020 size, which fits common paths without IP fragmentation.
    properties: { ...serverArgProperties, max_udp_size: { type: "integer", minimum: 512, maximum: 65535, default: 1232 } },
  },
  check: checkServerArgs,
  dependencies: serverDependencies,
  async create(args, ctx) {
    const entry = ctx.executor(args.entry.replace(/^\$/, ""));
    const failures = serverFailureLog(ctx);
    const handler = new QueryHandler(entry, "udp", serverStats(ctx.services.metrics, ctx.tag, "udp"), failures, args.max_udp_size);
    const listener = await ctx.services.listeners.claim(UDP, parseListen(args.listen), ctx.owner);
    const socket = listener.socket;
    const proxy = ProxyPolicy.from(args.proxy_protocol, proxyStats(ctx.services.metrics, ctx.tag, "udp"));
    // Answers go back to the peer (the balancer, when a header named another client).
    const onMessage: UdpHandler =
      proxy === null
        ? (msg, rinfo) => {
            const answer = handler.handle(msg, rinfo.address, rinfo.port);
            if (answer === null) return;
            if (isPromise(answer)) sendLater(socket, answer, rinfo.port, rinfo.address);
            else socket.send(answer, rinfo.port, rinfo.address);
          }
        : (msg, rinfo) => {
            const at = proxy.unwrap(msg, rinfo.address, rinfo.port);
            if (at < 0) return;
            const answer = handler.handle(at === 0 ? msg : msg.subarray(at), proxy.client.address, proxy.client.port);
            if (answer === null) return;
            if (isPromise(answer)) sendLater(socket, answer, rinfo.port, rinfo.address);
            else socket.send(answer, rinfo.port, rinfo.address);
          };
    return {
      address: () => ({ protocol: "udp", ...listener.address() }),
      start() {
        handler.clients = ctx.clients();
        listener.handler = onMessage;
        const a = listener.address();
        ctx.log.info({ protocol: "udp", address: a.address, port: a.port }, "udp server listening");
        return Promise.resolve();
      },
      async destroy() {
        if (listener.handler === onMessage) listener.handler = null;
        await handler.drain(DRAIN_TIMEOUT_MS);
        failures.close();
        await ctx.services.listeners.release(listener, ctx.owner);
      },
    };
  },
});
