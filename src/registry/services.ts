// Process-wide services handed to every plugin; they outlive any one runtime (reloads).

import type { Logger } from "pino";
import type { RedisHub } from "../cluster/redis.js";
import type { MetricsHub } from "../observability/metrics.js";
import type { ListenerPool } from "./listener-pool.js";

export interface Services {
  readonly log: Logger;
  readonly metrics: MetricsHub;
  /** Sockets that survive a reload when the new runtime listens on the same address. */
  readonly listeners: ListenerPool;
  /** Connections to Redis (cache tiers, cluster), shared by URL and kept across reloads. */
  readonly redis: RedisHub;
  /** Working directory (-d) that relative paths in the configuration resolve against. */
  readonly baseDir: string;
  /** The application's controls that a plugin may use (provided by the App). */
  readonly app: AppControl;
}

export interface AppControl {
  /**
   * Asks for a reload of the configuration file, as POST /api/reload does (same actor, same
   * guards). Throws an Error saying why when it is refused (a reload pending or running, stopping).
   */
  requestReload(): void;
}
