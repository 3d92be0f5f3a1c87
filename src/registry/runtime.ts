// A runtime is one configuration brought to life: every live plugin created and initialised in
// dependency order. A reload builds a second runtime beside the first and swaps only on success.

import { isAbsolute, resolve } from "node:path";
import type { ConfigError} from "../config/diagnostics.js";
import { renderPath } from "../config/diagnostics.js";
import type { Executor, Matcher } from "../engine/types.js";
import { resolveArgs, splitQuickSetup, type Analysis, type ResolvedPlugin } from "./analyze.js";
import type { Catalog } from "./catalog.js";
import { MatcherModes, type MatcherMode } from "./matcher-mode.js";
import type { Services } from "./services.js";
import { ArgError, type AnyDefinition, type AnyPlugin, type CheckEnv, type CreateContext, type PluginKind, type ServerPlugin } from "./types.js";

export interface LivePlugin {
  tag: string;
  type: string;
  kind: PluginKind;
  instance: AnyPlugin;
  /** Quick-setup instances this plugin owns (destroyed with it). */
  children: LivePlugin[];
}

/** A plugin failed to start; carries the tag and, for bad args, the YAML location. */
export class PluginInitError extends Error {
  constructor(
    readonly tag: string,
    message: string,
    readonly diagnostics: ConfigError["diagnostics"] = [],
  ) {
    super(message);
    this.name = "PluginInitError";
  }
}

/** Told about each declared plugin's lifecycle (the control plane mirrors it in actors). */
export interface RuntimeObserver {
  creating(tag: string, type: string, kind: PluginKind): void;
  ready(tag: string): void;
  failed(tag: string, error: string): void;
  destroying(tag: string): void;
  destroyed(tag: string): void;
}

const quietObserver: RuntimeObserver = { creating() {}, ready() {}, failed() {}, destroying() {}, destroyed() {} };

export class Runtime {
  readonly plugins = new Map<string, LivePlugin>();
  /** Creation order (dependencies first); destroyed in reverse. */
  private readonly created: LivePlugin[] = [];
  readonly modes = new MatcherModes();
  private destroyed = false;

  private constructor(
    readonly analysis: Analysis,
    readonly services: Services,
    private readonly catalog: Catalog,
    private readonly observer: RuntimeObserver,
  ) {}

  /** Creates and initialises every live plugin; on failure destroys what was made, in reverse. */
  static async build(analysis: Analysis, services: Services, catalog: Catalog, observer: RuntimeObserver = quietObserver): Promise<Runtime> {
    const rt = new Runtime(analysis, services, catalog, observer);
    for (const tag of analysis.skipped) {
      services.log.warn({ target: "registry", plugin: tag }, "skipped provider initialization: no live plugin uses it");
    }
    for (const tag of analysis.initOrder) {
      const rp = analysis.byTag.get(tag) as ResolvedPlugin;
      observer.creating(tag, rp.def.type, rp.def.kind);
      try {
        const live = await rt.instantiate(rp.def, rp.args, tag);
        rt.plugins.set(tag, live);
        rt.created.push(live);
        if (rp.def.kind === "matcher") rt.modes.declare(tag);
        observer.ready(tag);
      } catch (err) {
        const failure = rt.initError(rp, err);
        observer.failed(tag, failure.message);
        await rt.destroy();
        throw failure;
      }
    }
    return rt;
  }

  private initError(rp: ResolvedPlugin, err: unknown): PluginInitError {
    const message = err instanceof Error ? err.message : String(err);
    if (err instanceof ArgError) {
      const path = [...rp.config.path, "args", ...err.path];
      const where = err.path.length > 0 ? `${renderPath(["args", ...err.path])}: ` : "";
      const d = rp.config.source.locate(path, `plugin '${rp.config.tag}': ${where}${message}`);
      return new PluginInitError(rp.config.tag, d.message, [d]);
    }
    const d = rp.config.source.locate(rp.config.path, `plugin '${rp.config.tag}' (${rp.def.type}) failed to initialize: ${message}`);
    return new PluginInitError(rp.config.tag, d.message, [d]);
  }

  private async instantiate(def: AnyDefinition, args: unknown, tag: string): Promise<LivePlugin> {
    const children: LivePlugin[] = [];
    const ctx = this.createContext(tag, children);
    let instance: AnyPlugin | undefined;
    try {
      instance = await def.create(args, ctx);
      await instance.init?.();
    } catch (err) {
      if (instance) await this.destroyOne({ tag, type: def.type, kind: def.kind, instance, children });
      else for (const c of children.reverse()) await this.destroyOne(c);
      throw err;
    }
    return { tag, type: def.type, kind: def.kind, instance, children };
  }

  private createContext(tag: string, children: LivePlugin[]): CreateContext {
    const services = this.services;
    const quick = async (kind: "executor" | "matcher", expr: string, internalTag: string): Promise<AnyPlugin> => {
      const { type, param } = splitQuickSetup(expr);
      const found = this.catalog.lookup(type);
      if ("error" in found) throw new Error(`'${expr}': ${found.error}`);
      const def = found.def;
      if (def.kind !== kind || !def.quickSetup) throw new Error(`'${expr}' is not a ${kind} quick setup`);
      const r = resolveArgs(def, def.quickSetup(param), this.checkEnv());
      if (r.problems.length > 0) throw new Error(`'${expr}': ${r.problems.map((p) => p.message).join("; ")}`);
      const live = await this.instantiate(def, r.args, internalTag);
      children.push(live);
      return live.instance;
    };
    return {
      tag,
      owner: this,
      log: services.log.child({ target: `plugin:${tag}` }),
      services,
      resolvePath: (p) => (isAbsolute(p) ? p : resolve(services.baseDir, p)),
      executor: (t) => this.get(t, "executor") as Executor,
      matcher: (t, negate = false) => this.modes.wrap(t, this.get(t, "matcher") as Matcher, negate),
      provider: (t) => this.get(t, "provider"),
      quickExecutor: async (expr, internalTag) => (await quick("executor", expr, internalTag)) as Executor,
      quickMatcher: async (expr, internalTag, negate = false) => {
        const m = (await quick("matcher", expr, internalTag)) as Matcher;
        return negate ? { match: (c) => !m.match(c) } : m;
      },
    };
  }

  /** Quick-setup args were fully checked during analysis; nothing nests further here. */
  private checkEnv(): CheckEnv {
    return { quickSetup: () => ({ problems: [], deps: [] }) };
  }

  private get(tag: string, kind: PluginKind): AnyPlugin {
    const live = this.plugins.get(tag);
    if (!live) throw new Error(`plugin '${tag}' is not available (not declared, or not initialised yet)`);
    if (live.kind !== kind) throw new Error(`plugin '${tag}' is a ${live.kind}, not a ${kind}`);
    return live.instance;
  }

  live(tag: string): LivePlugin | undefined {
    return this.plugins.get(tag);
  }

  /** Sets a declared matcher's runtime mode; false when `tag` is not a declared matcher. */
  setMatcherMode(tag: string, mode: MatcherMode): boolean {
    return this.modes.set(tag, mode);
  }

  /** Starts every server (after the whole runtime is ready). */
  async start(): Promise<void> {
    for (const live of this.created) if (live.kind === "server") await (live.instance as ServerPlugin).start();
  }

  private async destroyOne(live: LivePlugin): Promise<void> {
    try {
      await live.instance.destroy?.();
    } catch (err) {
      this.services.log.warn({ target: "registry", plugin: live.tag, err: (err as Error).message }, "plugin destroy failed");
    }
    for (const c of live.children.slice().reverse()) await this.destroyOne(c);
  }

  /** Destroys every plugin in reverse creation order; errors are logged, not thrown. */
  async destroy(): Promise<void> {
    if (this.destroyed) return;
    this.destroyed = true;
    for (const live of this.created.slice().reverse()) {
      this.observer.destroying(live.tag);
      await this.destroyOne(live);
      this.observer.destroyed(live.tag);
    }
    this.plugins.clear();
  }
}
