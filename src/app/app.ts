// One Sluice process: configuration, services, the running generation of plugins, the management
// API, and the actor system that sequences them (machines/app.machine.ts). The procedures below
// are what the app machine invokes; API handlers talk to the actors, never to these directly.

import type { Writable } from "node:stream";
import { waitFor } from "xstate";
import { createAppActor, type AppActor, type ConfigActor, type ReloadActor } from "../../actors/app.actor.js";
import { runtimeObserver } from "../../actors/runtime.observer.js";
import { ReloadFailure, type AppOutput, type ReloadOutcome } from "../../machines/app.machine.js";
import type { SaveRequest, SaveResult } from "../../machines/config.machine.js";
import type { ApiServer } from "../api/server.js";
import { Bus } from "../bus.js";
import { saveConfigFile } from "./config-save.js";
import { ConfigError, formatDiagnostic } from "../config/diagnostics.js";
import { configLimits } from "../config/limits.js";
import { loadConfigFile, type SluiceConfig } from "../config/load.js";
import type { LogLevel } from "../config/schema.js";
import { ConfigValidator } from "../config/validate-pool.js";
import { LogRing } from "../observability/log-ring.js";
import { createLogger, pinoLevel, type Logger } from "../observability/logger.js";
import { MetricsHub } from "../observability/metrics.js";
import { ListenerPool } from "../plugins/servers/listeners.js";
import { analyzeConfig, type Analysis } from "../registry/analyze.js";
import { createCatalog, type Catalog } from "../registry/catalog.js";
import { PluginInitError, Runtime } from "../registry/runtime.js";
import type { Services } from "../registry/services.js";

export interface AppOptions {
  configPath: string;
  /** Working directory for relative paths in the configuration (-d). */
  baseDir: string;
  /** Overrides `log.level` (-l) for the life of the process, reloads included. */
  logLevel?: LogLevel;
  stdout?: Writable;
  env?: NodeJS.ProcessEnv;
  catalog?: Catalog;
}

/** Loads and statically validates a configuration file. Throws ConfigError. */
export function checkConfig(configPath: string, catalog: Catalog, env?: NodeJS.ProcessEnv): { config: SluiceConfig; analysis: Analysis } {
  const config = loadConfigFile(configPath, { env });
  return { config, analysis: analyzeConfig(config, catalog) };
}

/** Ring capacity of GET /api/logs. */
const LOG_RING_CAPACITY = 2000;

interface Generation {
  number: number;
  config: SluiceConfig;
  analysis: Analysis;
  runtime: Runtime;
}

function describe(err: unknown): string {
  if (err instanceof ConfigError || err instanceof PluginInitError) {
    return err.diagnostics.length > 0 ? err.diagnostics.map(formatDiagnostic).join("\n") : err.message;
  }
  return err instanceof Error ? err.message : String(err);
}

export class App {
  readonly bus = new Bus();
  readonly logRing: LogRing;
  readonly log: Logger;
  readonly services: Services;
  readonly catalog: Catalog;
  /** Validations asked for through the API run here, in worker threads (limits follow reloads). */
  readonly validator: ConfigValidator;
  /** Unix ms when the process started. */
  readonly startedAt = Date.now();
  readonly actor: AppActor;
  /** Resolves when the app machine reaches `stopped`. */
  readonly done: Promise<AppOutput>;
  private current: Generation | null = null;
  private generations = 0;
  private api: ApiServer | null = null;
  /** The startup failure, kept with its type for the CLI. */
  private startupError: unknown = null;

  private constructor(
    readonly options: AppOptions,
    private initial: { config: SluiceConfig; analysis: Analysis } | null,
  ) {
    this.catalog = options.catalog ?? createCatalog();
    this.logRing = new LogRing(LOG_RING_CAPACITY, this.bus);
    const config = (initial as { config: SluiceConfig }).config;
    this.log = createLogger({ level: options.logLevel ?? config.log.level, file: config.log.file, stdout: options.stdout, sinks: [this.logRing.sink()] });
    this.services = { log: this.log, metrics: new MetricsHub(), listeners: new ListenerPool(), baseDir: options.baseDir };
    this.validator = new ConfigValidator(() => configLimits(this.config.api?.limits), this.catalog.build, this.log);
    this.actor = createAppActor(this, this.bus);
    // Lifecycle and reload states are logged, so even short-lived ones (pending, reloading) can be followed.
    const last = new Map<string, string>();
    this.bus.on("actor.transition", (t) => {
      if (t.id !== "app" && t.id !== "reload") return;
      const state = JSON.stringify(t.state);
      if (last.get(t.id) === state) return;
      last.set(t.id, state);
      this.log.info({ target: "control", actor: t.id, state: t.state }, "state changed");
    });
    this.done = new Promise((resolve) => {
      this.actor.subscribe({ complete: () => resolve(this.actor.getSnapshot().output as AppOutput) });
    });
  }

  /** Validates, starts the actor system and resolves once serving. Throws ConfigError/PluginInitError. */
  static async start(options: AppOptions): Promise<App> {
    const catalog = options.catalog ?? createCatalog();
    const initial = checkConfig(options.configPath, catalog, options.env);
    const app = new App({ ...options, catalog }, initial);
    app.actor.start();
    const snap = await waitFor(app.actor, (s) => s.matches("serving") || s.status === "done", { timeout: Infinity });
    // Stopped before serving: a failure, unless a stop was asked for while starting (then `done` says so).
    if (snap.status === "done" && snap.context.error !== null) throw app.startupError instanceof Error ? app.startupError : new Error(snap.context.error);
    return app;
  }

  get config(): SluiceConfig {
    return (this.current ?? (this.initial as { config: SluiceConfig })).config;
  }

  /** The generation that answers queries now. */
  get runtime(): Runtime {
    if (!this.current) throw new Error("no runtime is running");
    return this.current.runtime;
  }

  get generation(): number {
    return this.current?.number ?? 0;
  }

  /** The management API listener, when the configuration has an `api` section. */
  get apiServer(): ApiServer | null {
    return this.api;
  }

  get reloadActor(): ReloadActor {
    return this.actor.system.get("reload") as ReloadActor;
  }

  /** Serialises configuration saves (PUT /api/config). */
  get configActor(): ConfigActor {
    return this.actor.system.get("config") as ConfigActor;
  }

  /** Graceful stop through the app machine; resolves when stopped. */
  async stop(): Promise<AppOutput> {
    if (this.actor.getSnapshot().status === "active") this.actor.send({ type: "SHUTDOWN" });
    return this.done;
  }

  // ---- procedures invoked by the app machine -------------------------------------------------

  async startApi(): Promise<void> {
    const api = this.config.api;
    if (!api) return;
    const { createApiServer } = await import("../api/server.js");
    this.api = await createApiServer(this, api);
    await this.api.listen();
  }

  async startRuntime(): Promise<{ version: string }> {
    const { config, analysis } = this.initial as { config: SluiceConfig; analysis: Analysis };
    try {
      const gen = await this.buildGeneration(config, analysis);
      await gen.runtime.start();
      this.activate(gen);
    } catch (err) {
      this.startupError = err;
      this.log.error({ target: "app", err: describe(err) }, "startup failed");
      throw err;
    }
    this.log.info({ target: "app", config: config.path, plugins: analysis.initOrder.length, generation: this.generation }, "sluice started");
    return { version: config.version };
  }

  /** Builds the new generation beside the running one; swaps only when it is ready. */
  async reloadRuntime(): Promise<ReloadOutcome> {
    const path = this.config.path as string;
    let config: SluiceConfig;
    try {
      // The operator's own file (bounded by body_bytes when written through the API): parsed here, not in a worker.
      config = loadConfigFile(path, { env: this.options.env });
    } catch (err) {
      this.reloadActor.send({ type: "RELOAD.START", at: Date.now(), version: null });
      return this.reloadFailed(err);
    }
    this.reloadActor.send({ type: "RELOAD.START", at: Date.now(), version: config.version });
    this.log.info({ target: "app", config: path, version: config.version }, "reload started");
    let next: Generation;
    try {
      next = await this.buildGeneration(config, analyzeConfig(config, this.catalog));
      await next.runtime.start();
    } catch (err) {
      return this.reloadFailed(err);
    }
    const previous = this.current;
    this.activate(next);
    if (previous) await this.retire(previous);
    this.services.metrics.retainTags(new Set(next.runtime.plugins.keys()));
    this.log.info({ target: "app", version: config.version, generation: next.number }, "reload succeeded");
    return { at: Date.now(), version: config.version };
  }

  private reloadFailed(err: unknown): never {
    const message = describe(err);
    this.log.warn({ target: "app", err: message }, "reload failed; the previous configuration keeps serving");
    throw new ReloadFailure(message, Date.now());
  }

  /** Writes the configuration file the process runs (the config actor calls it, one at a time). */
  saveConfig(request: SaveRequest): Promise<SaveResult> {
    return saveConfigFile(request, { path: this.config.path as string, validator: this.validator, env: this.options.env ?? process.env, log: this.log });
  }

  async stopRuntime(restart: boolean): Promise<void> {
    this.log.info({ target: "app", restart }, restart ? "restarting" : "shutting down");
    if (this.current) await this.retire(this.current);
    this.current = null;
    await this.services.listeners.closeAll();
    await this.api?.close();
    this.api = null;
    await this.validator.close();
  }

  // ---- generations ---------------------------------------------------------------------------

  private async buildGeneration(config: SluiceConfig, analysis: Analysis): Promise<Generation> {
    const number = ++this.generations;
    this.actor.send({ type: "RUNTIME.NEW", generation: number, version: config.version });
    const observer = runtimeObserver(this.actor, number);
    try {
      const runtime = await Runtime.build(analysis, this.services, this.catalog, observer);
      return { number, config, analysis, runtime };
    } catch (err) {
      observer.runtime({ type: "RUNTIME.FAILED", error: describe(err) });
      this.actor.send({ type: "RUNTIME.REMOVE", generation: number });
      throw err;
    }
  }

  private activate(gen: Generation): void {
    this.current = gen;
    this.initial = null;
    runtimeObserver(this.actor, gen.number).runtime({ type: "RUNTIME.ACTIVE" });
    if (!this.options.logLevel) this.log.level = pinoLevel(gen.config.log.level);
    if (gen.config.api) this.api?.updatePolicy(gen.config.api);
  }

  /** Lets in-flight queries finish, then destroys the generation. */
  private async retire(gen: Generation): Promise<void> {
    const observer = runtimeObserver(this.actor, gen.number);
    observer.runtime({ type: "RUNTIME.DRAINING" });
    await gen.runtime.destroy();
    observer.runtime({ type: "RUNTIME.DESTROYED" });
    this.actor.send({ type: "RUNTIME.REMOVE", generation: gen.number });
  }
}
