// What a plugin type declares (PluginDefinition) and what its factory receives (CreateContext).
// Registering a new type is one file exporting a definition plus one line in src/plugins/index.ts.

import type { Logger } from "pino";
import type { Question } from "../dns/message.js";
import type { ClientDirectory } from "../engine/clients.js";
import type { ArgProblem, CheckEnv, DependencySpec, PluginKind } from "../engine/plugin-args.js";
import type { DomainProvider, Executor, IpProvider, Matcher } from "../engine/types.js";
import type { Outbound } from "../net/outbound.js";
import type { PluginControl } from "./control.js";
import type { Services } from "./services.js";

// How args are judged lives below the engine (its parsers report ArgErrors too); plugin definitions
// take all of their contract from this file.
export { ArgError, argProblems, type ArgProblem, type CheckEnv, type DependencySpec, type PluginKind } from "../engine/plugin-args.js";

export interface Lifecycle {
  /** Called right after this plugin is created (its dependencies are created and initialised already), before the next plugin is. */
  init?(): Promise<void> | void;
  /** Called in reverse init order when the runtime is torn down. */
  destroy?(): Promise<void> | void;
}

export interface ExecutorPlugin extends Executor, Lifecycle {}
export interface MatcherPlugin extends Matcher, Lifecycle {}
export interface ProviderPlugin extends Lifecycle, Partial<DomainProvider>, Partial<IpProvider> {
  /** Rebuild from the startup args and swap atomically; a failure keeps the old snapshot. */
  reload?(): Promise<{ rules: number }>;
  /** Rules in the snapshot serving now. */
  readonly rules?: number;
  /** Whole-question matching (name, and type where the provider's rules can say so); used by `question`. */
  containsQuestion?(q: Question): boolean;
  /** Identifies each query's client (the `clients` provider); servers call it before the sequence. */
  readonly directory?: ClientDirectory;
}
export interface ServerPlugin extends Lifecycle {
  /** Begin answering; called once the whole runtime is ready. */
  start(): Promise<void>;
  /** Where it listens (the real port when the config said 0). */
  address(): { protocol: string; address: string; port: number };
  /** The encrypted DNS it serves (DoT, DoH over TLS), which `ddr` advertises; null or absent: none. */
  encrypted?(): EncryptedEndpoint | null;
}

/** A DNS-over-TLS or DNS-over-HTTPS service of a server of this runtime. */
export interface EncryptedEndpoint {
  /** The server's tag. */
  tag: string;
  protocol: "dot" | "doh";
  /** The bound address (`0.0.0.0` / `::` for every address) and the real port. */
  address: string;
  port: number;
  /** DoH: the path of the server's first entry (`/dns-query`). */
  path?: string;
}

export interface PluginByKind {
  server: ServerPlugin;
  executor: ExecutorPlugin;
  matcher: MatcherPlugin;
  provider: ProviderPlugin;
}
export type AnyPlugin = PluginByKind[PluginKind];


export interface CreateContext {
  readonly tag: string;
  /** Identity of the runtime being built (listeners are claimed per runtime). */
  readonly owner: object;
  readonly log: Logger;
  readonly services: Services;
  /** This instance's name: `cluster.instance` when set, else the host name (records carry it). */
  readonly instance: string;
  /** How often DNS servers sum up their failed queries (`log.failure_summary`), ms. */
  readonly failureSummaryMs: number;
  /** Resolves a path from the config against the working directory (-d). */
  resolvePath(path: string): string;
  executor(tag: string): Executor;
  /** A declared matcher, honouring its runtime mode, optionally negated. */
  matcher(tag: string, negate?: boolean): Matcher;
  provider(tag: string): ProviderPlugin;
  /** Builds a private quick-setup instance `type param` owned by this plugin. */
  quickExecutor(expr: string, internalTag: string): Promise<Executor>;
  quickMatcher(expr: string, internalTag: string, negate?: boolean): Promise<Matcher>;
  /** Whether `word` is an executor type of this build (as CheckEnv.isExecutorType). */
  isExecutorType(word: string): boolean;
  /**
   * The control plane of another plugin of this runtime (its concern actor), for executors that
   * drive one (`reload_provider` → a provider's reload). Resolved when called, not at create time.
   */
  control(tag: string): ControlHandle;
  /**
   * The encrypted DNS services of this runtime's servers, in configuration order; null until the
   * servers have started (they are created after the executors they call, so ask while answering).
   */
  encryptedEndpoints(): readonly EncryptedEndpoint[] | null;
  /**
   * The egress profile `name` of network.outbound (docs/operations.md#outbound-profiles): its bind
   * address, SOCKS5 proxy and resolver, with `connect`, `lookup` and `agent` for HTTP. DIRECT when
   * `name` is null or undefined. A plugin arg naming a profile is checked with `env.outboundProblem`.
   */
  outbound(name: string | null | undefined): Outbound;
  /**
   * The runtime's client directory (its `clients` provider), or null when it declares none. Servers
   * ask when they start, once every plugin exists.
   */
  clients(): ClientDirectory | null;
}

/** Asks a plugin's concern actor to do something and waits for the outcome. */
export interface ControlHandle {
  /** Resolves with the operation's output; rejects with a RefusedError or the operation's error. */
  ask(event: { type: string } & Record<string, unknown>): Promise<unknown>;
}

export interface PluginDefinition<Args = unknown, K extends PluginKind = PluginKind, I extends PluginByKind[K] = PluginByKind[K]> {
  readonly type: string;
  readonly kind: K;
  /** Build feature that gates the type (see bundles.ts). */
  readonly feature: string;
  /** One line for `--help`, the build record and docs. */
  readonly summary: string;
  /** ajv JSON schema of `args` after `shorthand`; defaults are filled in. */
  readonly schema: object;
  /** Turns accepted short forms (string, list, null) into the object the schema describes. */
  shorthand?(raw: unknown): unknown;
  /** Parses a quick-setup parameter string (`forward 1.1.1.1` → `1.1.1.1`) into raw args. */
  quickSetup?(param: string): unknown;
  /** Semantic checks beyond the schema, pure and cheap; `sluice check` runs them too. */
  check?(args: Args, env: CheckEnv): ArgProblem[];
  /** References to other plugins found in the args (no plugin is created). */
  dependencies?(args: Args, env: CheckEnv): DependencySpec[];
  /**
   * Created before every other plugin that does not depend on it: its start-up work (a `download`
   * fetching missing files) makes what other plugins read when they are created.
   */
  readonly createdFirst?: boolean;
  /**
   * A provider the whole runtime uses without a reference (the `clients` directory): created even
   * when no plugin names it, and declared at most once per configuration.
   */
  readonly runtimeWide?: boolean;
  /**
   * Names this plugin declares for others to use, by namespace (`client`, `group`): a check of another
   * plugin reads them through `env.declared(space)`.
   */
  declares?(args: Args): Record<string, readonly string[]>;
  /**
   * The files this plugin reads or writes as data (rule lists, state files, dumps, databases), as written
   * in its args (relative to the working directory, or absolute): what `sluice backup` puts in its archive.
   * Absent: the plugin keeps no data of its own in files.
   */
  dataFiles?(args: Args): DataFile[];
  create(args: Args, ctx: CreateContext): I | Promise<I>;
  /** The instance's control plane: a concern actor (its machine) and API routes. */
  readonly control?: PluginControl<I>;
}

/** A file a plugin names as data (PluginDefinition.dataFiles). */
export interface DataFile {
  /** As written in the args. */
  path: string;
  /** A SQLite database: copied with SQLite's online backup, never byte by byte (it may be in WAL mode, and open). */
  sqlite?: boolean;
  /** The query database: only in a backup that asks for it (`--with-queries`, `?queries=true`). */
  queries?: boolean;
}

export type AnyDefinition = PluginDefinition<unknown, PluginKind, AnyPlugin>;

/** Declares a plugin type with its args (and, when it has a control plane, its instance) type checked against its own factory. */
export function definePlugin<Args, K extends PluginKind, I extends PluginByKind[K] = PluginByKind[K]>(def: PluginDefinition<Args, K, I>): AnyDefinition {
  return def;
}
