// A provider's serving rules: built once at start, rebuilt and swapped by a reload. The new set
// replaces the old one only when the rebuild succeeds, so queries always see a complete set. One
// reload at a time is the provider actor's rule (machines/provider.machine.ts), not this file's.
// Every provider reports its rule count, skipped rules, build time and reloads as metrics here.
// A build gets a Slicer and runs in slices of a few milliseconds that yield to the event loop
// (reading, parsing and compiling alike), so rebuilding 100 000s of rules never stalls DNS.

import { Slicer } from "../../engine/rules/slicer.js";
import type { Cell, MetricsHub } from "../../observability/metrics.js";
import type { Logger } from "../../observability/logger.js";

/** What a rule set must tell: rules in force, and (where the format has them) rules skipped. */
export interface Countable {
  readonly size: number;
  readonly skipped?: number;
}

/** The part of a plugin's CreateContext the serving rules need. */
export interface ServingRulesEnv {
  readonly tag: string;
  readonly log: Logger;
  readonly services: { readonly metrics: MetricsHub };
}

interface ProviderCells {
  rules: Cell;
  skipped: Cell;
  buildSeconds: Cell;
  reloadOk: Cell;
  reloadError: Cell;
}

function cells(env: ServingRulesEnv): ProviderCells {
  const m = env.services.metrics;
  const labels = { plugin_tag: env.tag };
  const reloads = m.counter("provider_reload_total", "Provider reloads by result (ok: new rules serving; error: the previous rules kept)", ["plugin_tag", "result"]);
  return {
    rules: m.gauge("provider_rules", "Rules in the provider's serving snapshot", ["plugin_tag"])(labels),
    skipped: m.gauge("provider_rules_skipped", "Rules the last successful build skipped as unsupported", ["plugin_tag"])(labels),
    buildSeconds: m.gauge("provider_build_duration_seconds", "Time the last successful build of the provider's rules took, seconds", ["plugin_tag"])(labels),
    reloadOk: reloads({ plugin_tag: env.tag, result: "ok" }),
    reloadError: reloads({ plugin_tag: env.tag, result: "error" }),
  };
}

/** Builds a provider's rules, pausing whenever `slicer` says the slice has used its time. */
export type SlicedBuild<T> = (slicer: Slicer) => Promise<T>;

/** The rules a provider serves from: built once at start, rebuilt and swapped by a reload (not an actor snapshot). */
export class ServingRules<T extends Countable> {
  private constructor(
    /** Read by the data plane; replaced by one reference assignment. */
    public current: T,
    private readonly build: SlicedBuild<T>,
    private readonly log: Logger,
    private readonly kind: string,
    private readonly cells: ProviderCells,
  ) {}

  static async load<T extends Countable>(kind: string, env: ServingRulesEnv, build: SlicedBuild<T>): Promise<ServingRules<T>> {
    const started = performance.now();
    const first = await build(new Slicer());
    const ms = performance.now() - started;
    const snapshot = new ServingRules(first, build, env.log, kind, cells(env));
    snapshot.record(ms);
    env.log.info({ rules: first.size, ...(first.skipped ? { skipped: first.skipped } : {}), ms: Math.round(ms) }, `${kind} loaded`);
    return snapshot;
  }

  /** Rules in the snapshot serving now. */
  get rules(): number {
    return this.current.size;
  }

  private record(ms: number): void {
    this.cells.rules.value = this.current.size;
    this.cells.skipped.value = this.current.skipped ?? 0;
    this.cells.buildSeconds.value = ms / 1000;
  }

  /** Rebuilds from the startup args; a failure keeps the current snapshot and rejects. */
  async reload(): Promise<{ rules: number }> {
    const started = performance.now();
    try {
      this.current = await this.build(new Slicer());
    } catch (err) {
      this.cells.reloadError.value++;
      this.log.warn({ err: (err as Error).message }, `${this.kind} reload failed; keeping the previous rules`);
      throw err;
    }
    const ms = performance.now() - started;
    this.cells.reloadOk.value++;
    this.record(ms);
    this.log.info({ rules: this.current.size, ...(this.current.skipped ? { skipped: this.current.skipped } : {}), ms: Math.round(ms) }, `${this.kind} reloaded`);
    return { rules: this.current.size };
  }
}
