// Process-wide services handed to every plugin; they outlive any one runtime (reloads).

import type { Logger } from "pino";
import type { RedisHub } from "../cluster/redis.js";
import type { MetricsHub } from "../observability/metrics.js";
import type { ListenerPool } from "./listener-pool.js";
import type { ProcessRole } from "./process-role.js";

export interface Services {
  readonly log: Logger;
  readonly metrics: MetricsHub;
  /** Sockets that survive a reload when the new runtime listens on the same address. */
  readonly listeners: ListenerPool;
  /** Connections to Redis (cache tiers, cluster), shared by URL and kept across reloads. */
  readonly redis: RedisHub;
  /** Working directory (-d) that relative paths in the configuration resolve against. */
  readonly baseDir: string;
  /**
   * Milliseconds added to the monotonic clock (performance.now(), a query's arrival time) where the
   * data plane ages what it keeps (cache entries and their TTLs): 0 in a server; a test moves it, so a
   * TTL runs out without waiting. Read as one property, so a cache hit still reads no clock.
   */
  readonly clockShift: ClockShift;
  /** The application's controls that a plugin may use (provided by the App). */
  readonly app: AppControl;
  /** One process, or the primary or a worker of several (./process-role.ts). */
  readonly process: ProcessRole;
}

export interface ClockShift {
  readonly ms: number;
}

export interface AppControl {
  /**
   * Asks for a reload of the configuration file, as POST /api/reload does (same actor, same
   * guards). Throws an Error saying why when it is refused (a reload pending or running, stopping).
   */
  requestReload(): void;
}
