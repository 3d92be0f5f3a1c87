// What the management API sees of the process: a narrow interface owned by the API, implemented
// by the App (src/app/app.ts). Routes read actor snapshots and send events through it; they never
// reach into the App, and src/api never imports src/app.

import type { AnyActorRef } from "xstate";
import type { AppActor, ConfigActor, UpgradeActor } from "../../actors/app.actor.js";
import type { WorkersStatus } from "../registry/process-role.js";
import type { Bus } from "../bus.js";
import type { SharedChange } from "../cluster/cluster.js";
import type { RedisStatus } from "../cluster/redis.js";
import type { OutboundSettings } from "../net/outbound.js";
import type { SluiceConfig } from "../config/load.js";
import type { UpgradeConfig } from "../config/upgrade.js";
import type { ValidationJob, ValidationOutcome, ValidatorLimits } from "../config/validation.js";
import type { LogRing } from "../observability/log-ring.js";
import type { Logger } from "../observability/logger.js";
import type { MetricsHub } from "../observability/metrics.js";
import type { Catalog } from "../registry/catalog.js";
import type { Analysis } from "../registry/analyze.js";
import type { LivePlugin } from "../registry/runtime.js";

/** The generation answering queries: its number and its plugins. */
export interface LiveRuntime {
  readonly plugins: ReadonlyMap<string, LivePlugin>;
  /** The configuration this generation runs, and its analysis (what GET /api/backup archives). */
  readonly config: SluiceConfig;
  readonly analysis: Analysis;
}

export interface ApiHost {
  /** Unix ms when the process started. */
  readonly startedAt: number;
  /** Unix ms now, as session and token lifetimes count it (tests move services.clockShift instead of waiting). */
  now(): number;
  /** Working directory (-d) that relative paths resolve against. */
  readonly baseDir: string;
  /** Environment for ${VAR} expansion when validating configuration text. */
  readonly env: NodeJS.ProcessEnv;
  readonly catalog: Catalog;
  readonly bus: Bus;
  readonly logRing: LogRing;
  readonly log: Logger;
  readonly metrics: MetricsHub;
  /** The app actor: lifecycle and reload status; its system holds every other actor. */
  readonly actor: AppActor;
  /** Serialises configuration saves. */
  readonly configActor: ConfigActor;
  /** The self-upgrade task: one at a time; it asks the app to restart into a new release. */
  readonly upgradeActor: UpgradeActor;
  /** Validates configuration text in a worker thread, off the event loop, through the validation actor's queue (RefusedError when full). */
  validateConfig(job: ValidationJob, transfer: ArrayBuffer[]): Promise<ValidationOutcome>;
  /** The heap cap and time limit validations run under now. */
  validationLimits(): ValidatorLimits;
  /** The configuration file the process runs. */
  configPath(): string;
  /** The running configuration's `upgrade` section. */
  upgradeSettings(): UpgradeConfig | null;
  /** The running configuration's egress profiles (network.outbound), which upgrade.outbound names. */
  outboundProfiles(): Readonly<Record<string, OutboundSettings>>;
  /** Interval of the `: heartbeat` comment on SSE streams opened now (api.http.sse_heartbeat). */
  sseHeartbeatMs(): number;
  /** The generation answering queries (null before the first one is up and after the last is gone). */
  liveRuntime(): LiveRuntime | null;
  /** The Redis connections (cache tiers, cluster): none, all up, or some being retried. */
  redisStatus(): RedisStatus;
  /** Tells the other members of this instance's cluster about a change its API made (nothing without a cluster). */
  publishChange(change: SharedChange): void;
  /** A replica's follower of its primary's configuration (--config-from), null otherwise. */
  followStatus(): Record<string, unknown> | null;
  /** The data-plane workers (`workers` > 1): expected, serving, restarts; null in a single process. */
  workersStatus(): WorkersStatus | null;
  /** Their `worker:<n>` actors, shown by /api/actors beside the app's. */
  workerActors(): AnyActorRef[];
  /** The Prometheus exposition: this process's, or the primary's and its workers' as one process's view. */
  metricsText(): Promise<string>;
}
