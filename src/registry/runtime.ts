// A runtime is one configuration brought to life: every live plugin created and initialised in
// dependency order. A reload builds a second runtime beside the first and swaps only on success.
// The order of work is the runtime machine's; this file holds the plugins and makes each one.

import { failureSummaryMs } from "../config/log-settings.js";
import { isAbsolute, resolve } from "node:path";
import type { ConfigError } from "../config/diagnostics.js";
import { recordsInstance } from "../config/cluster.js";
import type { SluiceConfig } from "../config/load.js";
import { renderPath } from "../config/diagnostics.js";
import type { Executor, Matcher } from "../engine/types.js";
import { openOutbound } from "../engine/upstream/outbound.js";
import type { Outbound } from "../net/outbound.js";
import type { ClientDirectory } from "../engine/clients.js";
import type { DeclaredNames } from "../engine/plugin-args.js";
import { collectDeclared, outboundProblem, resolveArgs, splitQuickSetup, type Analysis, type ResolvedPlugin } from "./analyze.js";
import type { Catalog } from "./catalog.js";
import type { Concern, ConcernEnv } from "./control.js";
import { MatcherModes } from "./matcher-mode.js";
import { remoteServer } from "./remote-server.js";
import type { Services } from "./services.js";
import { ArgError, type AnyDefinition, type AnyPlugin, type CheckEnv, type ControlHandle, type CreateContext, type EncryptedEndpoint, type PluginKind, type ProviderPlugin, type ServerPlugin } from "./types.js";

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

/** A quick-setup instance as its parent's plugin actor shows it (machines/quick.machine.ts). */
export interface QuickSetup {
  tag: string;
  type: string;
  kind: PluginKind;
  /** Its type's concern when the type runs one for quick setups too (PluginControl.quickConcern). */
  concern: Concern | null;
}

/** How a runtime reaches the control plane of its plugins (provided by the actor layer). */
export type ControlResolver = (tag: string) => ControlHandle;

/**
 * The plugins of one configuration and the procedures that make them: the runtime machine
 * (machines/runtime.machine.ts) decides when each plugin is created, started and destroyed.
 */
export class Runtime {
  readonly plugins = new Map<string, LivePlugin>();
  readonly modes = new MatcherModes();
  /** Set once every server has started (what `encryptedEndpoints` waits for). */
  private started = false;
  /** The egress profiles plugins asked for (ctx.outbound), made once per runtime. */
  private readonly outbounds = new Map<string, Outbound>();
  private declaredNames: Map<string, DeclaredNames> | null = null;

  constructor(
    /** The configuration this runtime was built from. */
    readonly config: SluiceConfig,
    readonly analysis: Analysis,
    readonly services: Services,
    private readonly catalog: Catalog,
    private readonly controls: ControlResolver,
  ) {
    for (const tag of analysis.skipped) {
      services.log.warn({ target: "registry", plugin: tag }, "skipped provider initialization: no live plugin uses it");
    }
    this.modes.pausable = this.names().get("pausable_matcher")?.names ?? new Set();
  }

  /** What the configuration's declaring plugins declare (`client`, `group`, `pausable_matcher`). */
  private names(): Map<string, DeclaredNames> {
    this.declaredNames ??= collectDeclared(this.analysis.plugins.map((p) => ({ tag: p.config.tag, def: p.def, args: p.args })));
    return this.declaredNames;
  }

  /** Tags in creation order (dependencies first); destroyed in reverse. */
  get order(): readonly string[] {
    return this.analysis.initOrder;
  }

  /** Creates and initialises one plugin (its dependencies already are); returns its concern, if any, and its quick-setup instances. */
  async createPlugin(tag: string): Promise<{ type: string; kind: PluginKind; concern: Concern | null; quick: QuickSetup[] }> {
    const rp = this.analysis.byTag.get(tag);
    if (!rp) throw new PluginInitError(tag, `plugin '${tag}' is not part of this configuration`);
    let live: LivePlugin;
    const role = this.services.process;
    try {
      // The primary of several processes: the workers listen and answer.
      live =
        role.kind === "primary" && rp.def.kind === "server"
          ? { tag, type: rp.def.type, kind: rp.def.kind, instance: remoteServer(rp.def.type, tag, rp.args, (t) => role.serverAddress(t)), children: [] }
          : await this.instantiate(rp.def, rp.args, tag);
    } catch (err) {
      throw this.initError(rp, err);
    }
    this.plugins.set(tag, live);
    const env: ConcernEnv = {
      tag,
      log: this.services.log.child({ target: `plugin:${tag}` }),
      metrics: this.services.metrics,
      matcherMode: rp.def.kind === "matcher" ? this.modes.cell(tag) : null,
      role: role.kind,
      pluginError: (err, failed) => this.initError(rp, err, failed),
    };
    // Scheduled work of the whole service (cron jobs, downloads) runs in the primary only.
    const here = role.kind !== "worker" || rp.def.control?.primaryOnly !== true;
    const concern = here ? (rp.def.control?.concern?.(live.instance, env) ?? null) : null;
    return { type: rp.def.type, kind: rp.def.kind, concern, quick: this.quickSetups(live, rp) };
  }

  /** Every quick-setup instance a plugin owns, its own ones' included, in creation order. */
  private quickSetups(live: LivePlugin, rp: ResolvedPlugin): QuickSetup[] {
    return live.children.flatMap((c) => [{ tag: c.tag, type: c.type, kind: c.kind, concern: this.quickConcern(c, rp) }, ...this.quickSetups(c, rp)]);
  }

  private quickConcern(c: LivePlugin, rp: ResolvedPlugin): Concern | null {
    const found = this.catalog.lookup(c.type);
    const control = "def" in found ? found.def.control : undefined;
    if (control?.quickConcern !== true || !control.concern) return null;
    const log = this.services.log.child({ target: `plugin:${c.tag}` });
    return control.concern(c.instance, { tag: c.tag, log, metrics: this.services.metrics, matcherMode: null, role: this.services.process.kind, pluginError: (err, failed) => this.initError(rp, err, failed) });
  }

  /**
   * Destroys one plugin and the quick-setup instances it owns; errors are logged, not thrown. It
   * stays listed until its destroy returns, so its routes answer (a stopping cron: 503) meanwhile.
   */
  async destroyPlugin(tag: string): Promise<void> {
    const live = this.plugins.get(tag);
    if (!live) return;
    try {
      await this.destroyOne(live);
    } finally {
      this.plugins.delete(tag);
    }
  }

  private resolvePath(p: string): string {
    return isAbsolute(p) ? p : resolve(this.services.baseDir, p);
  }

  private initError(rp: ResolvedPlugin, err: unknown, failed = "failed to initialize"): PluginInitError {
    const message = err instanceof Error ? err.message : String(err);
    if (err instanceof ArgError) {
      const path = [...rp.config.path, "args", ...err.path];
      const where = err.path.length > 0 ? `${renderPath(["args", ...err.path])}: ` : "";
      const d = rp.config.source.locate(path, `plugin '${rp.config.tag}': ${where}${message}`);
      return new PluginInitError(rp.config.tag, d.message, [d]);
    }
    const d = rp.config.source.locate(rp.config.path, `plugin '${rp.config.tag}' (${rp.def.type}) ${failed}: ${message}`);
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
      instance: recordsInstance(this.config.cluster),
      failureSummaryMs: failureSummaryMs(this.config.log),
      resolvePath: (p) => this.resolvePath(p),
      executor: (t) => this.get(t, "executor") as Executor,
      matcher: (t, negate = false) => this.modes.wrap(t, this.get(t, "matcher") as Matcher, negate),
      provider: (t) => this.get(t, "provider"),
      quickExecutor: async (expr, internalTag) => (await quick("executor", expr, internalTag)) as Executor,
      quickMatcher: async (expr, internalTag, negate = false) => {
        const m = (await quick("matcher", expr, internalTag)) as Matcher;
        return negate ? { match: (c) => !m.match(c) } : m;
      },
      isExecutorType: (word) => this.isExecutorType(word),
      control: (t) => this.controls(t),
      encryptedEndpoints: () => (this.started ? this.encryptedEndpoints() : null),
      outbound: (name) => this.outbound(name),
      clients: () => this.clientDirectory(),
    };
  }

  /** The directory of the runtime-wide provider that identifies clients, if one is live. */
  private clientDirectory(): ClientDirectory | null {
    for (const live of this.plugins.values()) {
      const directory = live.kind === "provider" ? (live.instance as ProviderPlugin).directory : undefined;
      if (directory) return directory;
    }
    return null;
  }

  private encryptedEndpoints(): EncryptedEndpoint[] {
    const out: EncryptedEndpoint[] = [];
    for (const rp of this.analysis.plugins) {
      const live = this.plugins.get(rp.config.tag);
      const endpoint = live?.kind === "server" ? (live.instance as ServerPlugin).encrypted?.() : null;
      if (endpoint) out.push(endpoint);
    }
    return out;
  }

  /** The profile `name` of network.outbound (DIRECT for none); analysis made sure it exists. */
  outbound(name: string | null | undefined): Outbound {
    if (name === null || name === undefined) return openOutbound(null);
    let o = this.outbounds.get(name);
    if (!o) {
      const settings = this.config.outbound[name] as SluiceConfig["outbound"][string] | undefined;
      if (!settings) throw new ArgError(outboundProblem(name, this.config.outbound) ?? `no outbound profile '${name}'`);
      o = openOutbound(settings);
      this.outbounds.set(name, o);
    }
    return o;
  }

  private isExecutorType(word: string): boolean {
    const found = this.catalog.lookup(word);
    return "def" in found && found.def.kind === "executor";
  }

  /** Quick-setup args were fully checked during analysis; nothing nests further here. */
  private checkEnv(): CheckEnv {
    const names = this.names();
    return {
      quickSetup: () => ({ problems: [], deps: [] }),
      isExecutorType: (word) => this.isExecutorType(word),
      outboundProblem: (name) => outboundProblem(name, this.config.outbound),
      declared: (space) => names.get(space) ?? null,
    };
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

  /** Tags of every instance, quick-setup ones included (metrics of other tags belong to gone plugins). */
  allTags(): Set<string> {
    const tags = new Set<string>();
    const visit = (p: LivePlugin): void => {
      tags.add(p.tag);
      for (const c of p.children) visit(c);
    };
    for (const p of this.plugins.values()) visit(p);
    return tags;
  }

  /** Starts every server (after the whole runtime is ready), in creation order. */
  async start(): Promise<void> {
    for (const tag of this.order) {
      const live = this.plugins.get(tag);
      if (live?.kind === "server") await (live.instance as ServerPlugin).start();
    }
    this.started = true;
  }

  private async destroyOne(live: LivePlugin): Promise<void> {
    try {
      await live.instance.destroy?.();
    } catch (err) {
      this.services.log.warn({ target: "registry", plugin: live.tag, err: (err as Error).message }, "plugin destroy failed");
    }
    for (const c of live.children.slice().reverse()) await this.destroyOne(c);
  }
}
