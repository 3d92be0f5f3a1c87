// What the UDP and TCP servers share: args, dependency on the entry executor, draining on destroy.

import { listenProblem } from "../../config/listen.js";
import type { ArgProblem, DependencySpec } from "../../registry/types.js";

export interface ServerArgs {
  entry: string;
  listen: string;
}

export const serverArgProperties = {
  entry: { type: "string", minLength: 1 },
  listen: { type: "string", minLength: 1 },
} as const;

export function checkServerArgs(args: ServerArgs): ArgProblem[] {
  const problem = listenProblem(args.listen);
  return problem ? [{ path: ["listen"], message: problem }] : [];
}

export function serverDependencies(args: ServerArgs): DependencySpec[] {
  return [{ argsPath: ["entry"], target: args.entry.replace(/^\$/, ""), kind: "executor" }];
}

/** How long a server being replaced or stopped waits for its in-flight queries. */
export const DRAIN_TIMEOUT_MS = 10_000;
