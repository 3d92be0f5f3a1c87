// Wires configuration, services and the plugin runtime together for one process.

import type { Writable } from "node:stream";
import { loadConfigFile, type SluiceConfig } from "../config/load.js";
import type { LogLevel } from "../config/schema.js";
import { createLogger, type Logger } from "../observability/logger.js";
import { MetricsHub } from "../observability/metrics.js";
import { ListenerPool } from "../plugins/servers/listeners.js";
import { analyzeConfig, type Analysis } from "../registry/analyze.js";
import { createCatalog, type Catalog } from "../registry/catalog.js";
import { Runtime } from "../registry/runtime.js";
import type { Services } from "../registry/services.js";

export interface AppOptions {
  configPath: string;
  /** Working directory for relative paths in the configuration (-d). */
  baseDir: string;
  /** Overrides `log.level` (-l). */
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

export class App {
  private constructor(
    readonly config: SluiceConfig,
    readonly services: Services,
    readonly runtime: Runtime,
    readonly log: Logger,
  ) {}

  /** Loads, validates, builds and starts. Throws ConfigError or PluginInitError. */
  static async start(options: AppOptions): Promise<App> {
    const catalog = options.catalog ?? createCatalog();
    const { config, analysis } = checkConfig(options.configPath, catalog, options.env);
    const log = createLogger({ level: options.logLevel ?? config.log.level, file: config.log.file, stdout: options.stdout });
    const services: Services = {
      log,
      metrics: new MetricsHub(),
      listeners: new ListenerPool(),
      baseDir: options.baseDir,
    };
    const runtime = await Runtime.build(analysis, services, catalog);
    await runtime.start();
    log.info({ target: "app", config: config.path, plugins: analysis.initOrder.length }, "sluice started");
    return new App(config, services, runtime, log);
  }

  /** Graceful stop: servers stop taking queries, in-flight ones finish, plugins are destroyed. */
  async stop(): Promise<void> {
    this.log.info({ target: "app" }, "shutting down");
    await this.runtime.destroy();
    await this.services.listeners.closeAll();
  }
}
