// One Sluice process: configuration, services, the running generation of plugins, the management
// API, and the actor system that sequences them (machines/app.machine.ts). The procedures below
// are what the app machine invokes; API handlers talk to the actors, never to these directly.

import type { Writable } from "node:stream";
import { waitFor, type AnyActorRef } from "xstate";
import { controlResolver, createAppActor, runtimeOf, validateConfig, type AppActor, type ConfigActor, type UpgradeActor } from "../../actors/app.actor.js";
import { sendIfAccepted } from "../../actors/ask.js";
import { refusalError } from "../api/guards.js";
import type { AppOutput, Prepared, PrepareInput } from "../../machines/app.machine.js";
import type { RestoredUpgrade, UpgradeTrial } from "../../machines/upgrade.machine.js";
import type { SaveRequest, SaveResult } from "../../machines/config.machine.js";
import type { RuntimeHost } from "../../machines/runtime.machine.js";
import type { ApiHost } from "../api/host.js";
import type { ApiServer } from "../api/server.js";
import { Bus } from "../bus.js";
import { ClusterLink, type ApplyOutcome, type SharedChange } from "../cluster/cluster.js";
import { sourceName } from "../cluster/config-source.js";
import { fetchPrimary, followInput, followRecord, savePulled, type Following } from "../cluster/follow.js";
import type { ApplyResult, Fetched } from "../../machines/config-follow.machine.js";
import { RedisHub, type RedisStatus } from "../cluster/redis.js";
import { sseHeartbeatMs } from "../config/heartbeat.js";
import { instanceName, type ClusterConfig } from "../config/cluster.js";
import { saveConfigFile } from "./config-save.js";
import { ConfigError, formatDiagnostic } from "../config/diagnostics.js";
import { configLimits } from "../config/limits.js";
import { loadConfigFile, releaseSources, type SluiceConfig } from "../config/load.js";
import type { LogLevel } from "../config/schema.js";
import type { UpgradeConfig } from "../config/upgrade.js";
import { ConfigValidator } from "./validate-pool.js";
import type { ValidationJob, ValidationOutcome, ValidatorLimits } from "../config/validation.js";
import type { ValidationRequest } from "../../machines/validation.machine.js";
import { LogRing } from "../observability/log-ring.js";
import { createLogger, pinoLevel, type Logger } from "../observability/logger.js";
import { MetricsHub } from "../observability/metrics.js";
import { ListenerPool } from "../registry/listener-pool.js";
import { analyzeConfig, type Analysis } from "../registry/analyze.js";
import { createCatalog } from "../plugins/catalog.js";
import type { Catalog } from "../registry/catalog.js";
import { PluginInitError, Runtime } from "../registry/runtime.js";
import type { ClockShift, Services } from "../registry/services.js";
import { UpgradeWork } from "./upgrade-work.js";
import { applySharedChange, currentChanges, sharedChangeOf, type ChangeHost } from "./shared-changes.js";
import { logStateChanges } from "./state-log.js";
import { VERSION } from "../version.js";
import type { WorkersStatus } from "../registry/process-role.js";
import { ProcessPart, type PartHost, type WorkerLink } from "./workers/part.js";

export interface AppOptions {
  configPath: string;
  /** Working directory for relative paths in the configuration (-d). */
  baseDir: string;
  /** Overrides `log.level` (-l) for the life of the process, reloads included. */
  logLevel?: LogLevel;
  stdout?: Writable;
  env?: NodeJS.ProcessEnv;
  catalog?: Catalog;
  /** The last upgrade's outcome recorded in the install directory (GET /api/upgrade/status shows it). */
  upgradeRestored?: RestoredUpgrade | null;
  /** This start is the new release's trial (src/upgrade/trial.ts): the install directory it is recorded in, and where `sluice start` ran. */
  upgradeTrial?: { trial: UpgradeTrial; installDir: string; originalCwd: string } | null;
  /** Added to the monotonic clock where cached answers age (services.clockShift); tests move it instead of waiting. */
  clockShift?: ClockShift;
  /** A replica: follow the primary's configuration (--config-from). */
  follow?: Following;
  /**
   * This process is data-plane worker `index` of a primary (src/app/workers/main.ts): no API, no
   * cluster membership; `activated` is told each generation it serves.
   */
  worker?: WorkerLink;
}

/** Loads and statically validates a configuration file. Throws ConfigError. */
export function checkConfig(configPath: string, catalog: Catalog, env?: NodeJS.ProcessEnv): { config: SluiceConfig; analysis: Analysis } {
  const config = loadConfigFile(configPath, { env });
  return { config, analysis: analyzeConfig(config, catalog) };
}

/** Sends `event` if the actor takes it now; otherwise nothing (a report that only matters when it can be shown). */
function sendIfAcceptedQuietly(actor: AppActor, event: Parameters<AppActor["send"]>[0]): void {
  const snap = actor.getSnapshot();
  if (snap.status === "active" && snap.can(event)) actor.send(event);
}

/** Ring capacity of GET /api/logs. */
const LOG_RING_CAPACITY = 2000;

/** An error as the reload status and the log show it: every diagnostic as file:line:column: error: message. */
export function describe(err: unknown): string {
  if (err instanceof ConfigError || err instanceof PluginInitError) {
    return err.diagnostics.length > 0 ? err.diagnostics.map(formatDiagnostic).join("\n") : err.message;
  }
  return err instanceof Error ? err.message : String(err);
}

export class App implements ApiHost {
  readonly bus = new Bus();
  readonly logRing: LogRing;
  readonly log: Logger;
  readonly services: Services;
  readonly catalog: Catalog;
  /** Validations asked for through the API run here, in worker threads (limits follow reloads). */
  readonly validator: ConfigValidator;
  /** The upgrade actor's work (a task, a trial's confirm or rollback). */
  readonly upgrade: UpgradeWork;
  /** Unix ms when the process started. */
  readonly startedAt = Date.now();
  readonly actor: AppActor;
  /** Resolves when the app machine reaches `stopped`. */
  readonly done: Promise<AppOutput>;
  /** "sluice started" is logged by the first activation only. */
  private announced = false;
  private api: ApiServer | null = null;
  /** The startup failure, kept with its type for the CLI. */
  private startupError: unknown = null;
  /** Membership of the configuration's `cluster`, if it has one. */
  private cluster: ClusterLink | null = null;
  /** This process's part with data-plane workers: none, their primary, or one of them. */
  private readonly part: ProcessPart;

  /** The configuration read at start, analysed, until the first generation is prepared from it. */
  private initial: { config: SluiceConfig; analysis: Analysis } | null;
  /** The configuration while no generation runs: the one read at start, then the last one activated. */
  private lastConfig: SluiceConfig;

  private constructor(
    readonly options: AppOptions,
    initial: { config: SluiceConfig; analysis: Analysis },
  ) {
    this.initial = initial;
    this.lastConfig = initial.config;
    this.catalog = options.catalog ?? createCatalog();
    this.logRing = new LogRing(LOG_RING_CAPACITY, this.bus);
    const config = initial.config;
    const log = createLogger({ level: options.logLevel ?? config.log.level, file: config.log.file, stdout: options.stdout, sinks: [this.logRing.sink()] });
    const worker = options.worker;
    this.log = worker ? log.child({ worker: worker.index }) : log;
    const metrics = new MetricsHub();
    const host: PartHost = {
      log: this.log,
      bus: this.bus,
      logRing: this.logRing,
      requestReload: () => this.requestReload(),
      currentChanges: (tell) => currentChanges(this.changeHost(), tell),
      sharedChangeOf: (target, event) => sharedChangeOf(this.changeHost(), target, event),
    };
    const shared = new Set(this.catalog.definitions().flatMap((d) => d.control?.shared?.events ?? []));
    const start = { configPath: options.configPath, baseDir: options.baseDir, logLevel: options.logLevel ?? null };
    const part = new ProcessPart(host, config.workers, start, shared, worker);
    this.part = part;
    this.services = { log: this.log, metrics, listeners: new ListenerPool(), redis: new RedisHub(metrics, this.log), baseDir: options.baseDir, clockShift: options.clockShift ?? { ms: 0 }, app: { requestReload: () => part.requestReload() }, process: part.role };
    this.validator = new ConfigValidator(() => configLimits(this.config.api?.limits), this.catalog.build, this.log);
    const trial = options.upgradeTrial;
    this.upgrade = new UpgradeWork(
      { log: this.log, configPath: () => this.configPath(), baseDir: options.baseDir, canRestart: () => this.actor.getSnapshot().can({ type: "RESTART" }) },
      trial ? { installDir: trial.installDir, originalCwd: trial.originalCwd } : null,
    );
    this.actor = createAppActor(this, this.bus, {
      clock: Date.now,
      describe,
      upgradeInput: { version: VERSION, restored: options.upgradeRestored ?? null, trial: options.upgradeTrial?.trial ?? null },
      followInput: options.follow ? followInput(options.follow) : null,
    });
    logStateChanges(this.actor, this.upgradeActor, this.log);
    this.done = new Promise((resolve) => {
      this.actor.subscribe({ complete: () => resolve(this.actor.getSnapshot().output as AppOutput) });
    });
  }

  /** Validates, starts the actor system and resolves once serving. Throws ConfigError/PluginInitError. */
  static async start(options: AppOptions): Promise<App> {
    const catalog = options.catalog ?? createCatalog();
    const initial = checkConfig(options.configPath, catalog, options.env);
    // Analysed: problems found from here on (a plugin that fails to start) parse their file again.
    releaseSources(initial.config);
    const app = new App({ ...options, catalog }, initial);
    app.actor.start();
    const snap = await waitFor(app.actor, (s) => s.matches({ running: "serving" }) || s.status === "done", { timeout: Infinity });
    // Stopped before serving: a failure, unless a stop was asked for while starting (then `done` says so).
    if (snap.status === "done" && snap.context.error !== null) throw app.startupError instanceof Error ? app.startupError : new Error(snap.context.error);
    if (options.follow && snap.status === "active") app.reportPull(options.follow);
    // A primary serves once at least one data-plane worker does; none: it stops and says why.
    if (snap.status === "active")
      await app.part.start().catch(async (err: unknown) => {
        await app.stop();
        throw err;
      });
    return app;
  }

  /** A replica: report how the pull before start went (the app actor started the follower when it began serving). */
  private reportPull(following: Following): void {
    const { initial, source } = following;
    const name = sourceName(source);
    if (initial.applied) this.log.info({ target: "config", source: name, version: initial.version }, "configuration pulled from the primary");
    else if (initial.version !== null) {
      this.log.warn({ target: "config", source: name, version: initial.version, err: initial.error }, "configuration from the primary refused; the last good configuration keeps serving");
      sendIfAcceptedQuietly(this.actor, { type: "RELOAD.REFUSED", error: initial.error ?? "refused", version: initial.version });
    } else this.log.warn({ target: "config", source: name, err: initial.error }, "the primary could not be read; serving the local configuration and polling");
  }

  /**
   * The generation answering queries: the one the app actor's context names (the one source of
   * truth), null before the first is up and once the last is gone.
   */
  private get current(): Runtime | null {
    const actor = this.actor as AppActor | undefined;
    return actor ? (runtimeOf(actor.system, actor.getSnapshot().context.current) as Runtime | null) : null;
  }

  get config(): SluiceConfig {
    return this.current?.config ?? this.lastConfig;
  }

  /** The generation that answers queries. */
  get runtime(): Runtime {
    if (!this.current) throw new Error("no runtime is running");
    return this.current;
  }

  get generation(): number {
    return this.actor.getSnapshot().context.current ?? 0;
  }

  /** The management API listener, when the configuration has an `api` section. */
  get apiServer(): ApiServer | null {
    return this.api;
  }

  /** Serialises configuration saves (PUT /api/config). */
  get configActor(): ConfigActor {
    return this.actor.system.get("config") as ConfigActor;
  }

  /** The self-upgrade task (machines/upgrade.machine.ts). */
  get upgradeActor(): UpgradeActor {
    return this.actor.system.get("upgrade") as UpgradeActor;
  }

  /** Graceful stop through the app machine; resolves when stopped. */
  async stop(): Promise<AppOutput> {
    const snap = this.actor.getSnapshot();
    if (snap.status === "active" && snap.can({ type: "SHUTDOWN" })) this.actor.send({ type: "SHUTDOWN" });
    return this.done;
  }

  // ---- what the management API sees (ApiHost) ------------------------------------------------

  get baseDir(): string {
    return this.options.baseDir;
  }

  get env(): NodeJS.ProcessEnv {
    return this.options.env ?? process.env;
  }

  get metrics(): MetricsHub {
    return this.services.metrics;
  }

  configPath(): string {
    return this.config.path as string;
  }

  now(): number {
    return Date.now() + this.services.clockShift.ms;
  }

  sseHeartbeatMs(): number {
    return sseHeartbeatMs(this.config.api);
  }

  upgradeSettings(): UpgradeConfig | null {
    return this.config.upgrade;
  }

  outboundProfiles(): SluiceConfig["outbound"] {
    return this.config.outbound;
  }

  liveRuntime(): Runtime | null {
    return this.current;
  }

  redisStatus(): RedisStatus {
    return this.services.redis.status();
  }

  publishChange(change: SharedChange): void {
    this.cluster?.publish(change);
  }

  workersStatus(): WorkersStatus | null {
    return this.part.status();
  }

  workerActors(): AnyActorRef[] {
    return this.part.actors();
  }

  metricsText(): Promise<string> {
    return this.part.metricsText(this.metrics);
  }

  observeEvent(target: AnyActorRef, event: { type: string }): void {
    this.part.observe(target, event);
  }

  /** A change from another member (or, in a worker, from its primary), asked of this process's concern actor for the same plugin, as its API would. */
  applyChange(change: SharedChange, from: string): Promise<ApplyOutcome> {
    return applySharedChange(this.changeHost(), change, from);
  }

  private changeHost(): ChangeHost {
    return { actor: this.actor, catalog: this.catalog, runtime: this.current, log: this.log, worker: this.options.worker !== undefined };
  }

  followStatus(): Record<string, unknown> | null {
    const follower = this.actor.system.get("config-follow") as AnyActorRef | undefined;
    return follower ? followRecord(follower) : null;
  }

  // ---- the cluster (src/cluster/cluster.ts) --------------------------------------------------

  /** Joins, leaves or rejoins the cluster when a configuration brings a different `cluster` section (a worker: its primary is the member). */
  private syncCluster(config: ClusterConfig | null): void {
    if (this.options.worker) return;
    if (JSON.stringify(config) === JSON.stringify(this.cluster?.config ?? null)) return;
    void this.cluster?.close();
    this.cluster = config ? new ClusterLink(config, instanceName(config), this.services.redis, this.metrics, this.log, (c, from) => this.applyChange(c, from)) : null;
  }

  // ---- procedures invoked by the app machine -------------------------------------------------

  async startApi(): Promise<void> {
    const api = this.config.api;
    if (!api || this.options.worker) return;
    const { createApiServer } = await import("../api/server.js");
    this.api = await createApiServer(this, api);
    await this.api.listen();
  }

  /** A reload asked for by a plugin (the `reload` executor): the same event and guards as POST /api/reload. */
  requestReload(): void {
    try {
      sendIfAccepted(this.actor, { type: "RELOAD.REQUEST" });
    } catch (err) {
      // The same words as the API's answer: one table from guard to message (src/api/guards.ts).
      const refusal = refusalError(err);
      throw new Error(refusal instanceof Error ? refusal.message : String(refusal), { cause: err });
    }
  }

  async prepare(input: PrepareInput): Promise<Prepared> {
    let config: SluiceConfig;
    let analysis: Analysis;
    if (input.initial && this.initial) {
      ({ config, analysis } = this.initial);
      // From here the generation holds them; they are not kept a second time for its life and beyond.
      this.initial = null;
    } else {
      // The operator's own file (bounded by body_bytes when written through the API): parsed here, not in a worker.
      const path = this.configPath();
      config = loadConfigFile(path, { env: this.options.env });
      this.log.info({ target: "app", config: path, version: config.version }, "reload started");
      analysis = analyzeConfig(config, this.catalog);
      releaseSources(config);
    }
    const runtime = new Runtime(config, analysis, this.services, this.catalog, controlResolver(this.actor.system, input.generation));
    return { version: config.version, host: runtime };
  }

  activate(host: RuntimeHost, generation: number): void {
    const runtime = host as Runtime;
    this.lastConfig = runtime.config;
    const first = !this.announced;
    this.announced = true;
    if (!this.options.logLevel) this.log.level = pinoLevel(runtime.config.log.level);
    if (runtime.config.api) this.api?.updatePolicy(runtime.config.api);
    this.syncCluster(runtime.config.cluster);
    this.services.metrics.retainTags(runtime.allTags());
    if (first) this.log.info({ target: "app", config: runtime.config.path, plugins: runtime.order.length, generation }, "sluice started");
    this.part.activated(runtime, generation, first);
  }

  startupFailed(error: unknown): void {
    this.startupError = error;
    this.log.error({ target: "app", err: describe(error) }, "startup failed");
  }

  /** Writes the configuration file the process runs (the config actor calls it, one at a time). */
  saveConfig(request: SaveRequest): Promise<SaveResult> {
    return saveConfigFile(request, {
      path: this.configPath(),
      validate: (job) => this.validateConfig(job),
      limits: () => this.validator.limits(),
      env: this.env,
      log: this.log,
    });
  }

  /** Validates configuration text through the validation actor's queue (API and saves). */
  validateConfig(job: ValidationJob, transfer: ArrayBuffer[] = []): Promise<ValidationOutcome> {
    return validateConfig(this.actor.system, job, transfer);
  }

  validationLimits(): ValidatorLimits {
    return this.validator.limits();
  }

  /** The work of the validation actor: one job in a worker thread. */
  validate(request: ValidationRequest): Promise<unknown> {
    return this.validator.run(request.job as ValidationJob, request.transfer);
  }

  /** A replica's poll of its primary (the follower actor's `fetch`). */
  fetchPrimary(signal: AbortSignal): Promise<Fetched> {
    const source = this.options.follow?.source;
    if (!source) return Promise.reject(new Error("this process follows no primary"));
    return fetchPrimary(source, this.config, signal);
  }

  /** A replica's save of a version pulled from its primary (the follower actor's `apply`). */
  savePrimary(fetched: Fetched): Promise<ApplyResult> {
    const source = this.options.follow?.source;
    if (!source) return Promise.reject(new Error("this process follows no primary"));
    return savePulled(this, source, fetched);
  }

  async stopServices(restart: boolean): Promise<void> {
    this.log.info({ target: "app", restart }, restart ? "restarting" : "shutting down");
    // The workers drain their listeners first; the primary's own are none.
    await this.part.stop();
    await this.services.listeners.closeAll();
    await this.cluster?.close();
    this.cluster = null;
    await this.services.redis.closeAll();
    await this.api?.close();
    this.api = null;
    await this.validator.close();
  }
}
