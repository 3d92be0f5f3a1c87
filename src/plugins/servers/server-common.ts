// What the UDP and TCP servers share: args, dependency on the entry executor, draining on destroy.

import { listenProblem } from "../../config/listen.js";
import type { ArgProblem, DependencySpec } from "../../registry/types.js";
import { checkProxyArgs, proxyArgSchema, type ProxyArgs } from "./proxy-protocol.js";

export interface ServerArgs {
  entry: string;
  listen: string;
  /** PROXY protocol v2 from these peers (a load balancer in front); absent: never. */
  proxy_protocol?: ProxyArgs;
}

export const serverArgProperties = {
  entry: { type: "string", minLength: 1 },
  listen: { type: "string", minLength: 1 },
  proxy_protocol: proxyArgSchema,
} as const;

export function checkServerArgs(args: ServerArgs): ArgProblem[] {
  const problem = listenProblem(args.listen);
  return [...(problem ? [{ path: ["listen"], message: problem }] : []), ...checkProxyArgs(args)];
}

export function serverDependencies(args: ServerArgs): DependencySpec[] {
  return [{ argsPath: ["entry"], target: args.entry.replace(/^\$/, ""), kind: "executor" }];
}

/** How long a server being replaced or stopped waits for its in-flight queries. */
export const DRAIN_TIMEOUT_MS = 10_000;
