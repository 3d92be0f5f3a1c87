// The `cluster` section: instances that share a name and a Redis apply one another's runtime
// changes (matcher modes, provider reloads, cache flushes) made through the API (src/cluster/).

import { hostname } from "node:os";
import { redisUrlProblem } from "../cluster/redis-url.js";

export interface ClusterConfig {
  /** Instances with the same name (and Redis) form one cluster. */
  name: string;
  /** redis://[user:password@]host:port[/db] (rediss:// for TLS). */
  redis: string;
  /** How this instance is named in logs and messages; default `<hostname>-<pid>`. */
  instance?: string;
}

const NAME = "^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$";

export const clusterSchema = {
  type: "object",
  additionalProperties: false,
  required: ["name", "redis"],
  properties: {
    name: { type: "string", pattern: NAME },
    redis: { type: "string", minLength: 1 },
    instance: { type: "string", pattern: NAME },
  },
} as const;

/** What the schema cannot say; each problem names its key. */
export function clusterProblems(cluster: ClusterConfig | undefined): { key: string; message: string }[] {
  if (!cluster) return [];
  const url = redisUrlProblem(cluster.redis);
  return url ? [{ key: "redis", message: `cluster.redis: ${url}` }] : [];
}

/** This member's name on the cluster channel: `instance`, else one unique per process (its own messages are ignored by it). */
export function instanceName(cluster: ClusterConfig): string {
  return cluster.instance ?? `${hostname()}-${process.pid}`;
}

/** The name a query record carries: `cluster.instance`, else the host name (the same across restarts, unlike a member's default). */
export function recordsInstance(cluster: ClusterConfig | null | undefined): string {
  return cluster?.instance ?? hostname();
}
