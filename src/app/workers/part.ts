// This process's part in a `workers` setup (registry/process-role.ts), as the App uses it. A single
// process has nothing to do here. A primary forks its data-plane workers (./pool.ts), has them build
// each new generation once its own is ready, sends them the changes its concern actors take, and adds
// their metrics and log lines to its own. A worker tells its primary each generation it serves, and
// hands it the reloads its `reload` executor asks for.

import type { AnyActorRef } from "xstate";
import type { Bus } from "../../bus.js";
import type { SharedChange } from "../../cluster/cluster.js";
import type { LogRing } from "../../observability/log-ring.js";
import type { Logger } from "../../observability/logger.js";
import type { MetricsHub } from "../../observability/metrics.js";
import { SINGLE, type ProcessChannel, type ProcessRole, type ServerAddress, type WorkersStatus } from "../../registry/process-role.js";
import type { Runtime } from "../../registry/runtime.js";
import type { ServerPlugin } from "../../registry/types.js";
import { workerCount } from "./count.js";
import { takeLogs } from "./log-forward.js";
import { WorkerPool } from "./pool.js";
import type { WorkerStart } from "./protocol.js";

/** A data-plane worker's link to its primary (src/app/workers/main.ts). */
export interface WorkerLink {
  index: number;
  channel: ProcessChannel;
  /** Told each generation the worker serves, with where its servers listen. */
  activated(generation: number, servers: Record<string, ServerAddress>): void;
}

/** What the part needs of its App. */
export interface PartHost {
  readonly log: Logger;
  readonly bus: Bus;
  /** Where the workers' log lines go too (GET /api/logs and the log stream). */
  readonly logRing: LogRing;
  /** This process's reload, as its own `reload` executor asks for it (throws the refusal). */
  requestReload(): void;
  /** The shared changes that bring a fresh worker to this process's state (matcher modes). */
  currentChanges(tell: (change: SharedChange) => void): void;
  /** The shared change an event one of this process's concern actors received makes; null for none. */
  sharedChangeOf(target: AnyActorRef, event: { type: string }): SharedChange | null;
}

export class ProcessPart {
  readonly role: ProcessRole;
  /** The data-plane workers, when `workers` asks for more than one process (this one is their primary). */
  private readonly pool: WorkerPool | null = null;

  constructor(
    private readonly host: PartHost,
    /** `workers` as the process started with it (a reload does not change the processes). */
    private readonly atStart: number | "auto",
    start: Omit<WorkerStart, "index">,
    /** Concern events some plugin type shares (what the workers replay). */
    private readonly sharedEvents: ReadonlySet<string>,
    private readonly worker: WorkerLink | undefined,
  ) {
    const count = worker ? 1 : workerCount(atStart);
    if (count > 1) this.pool = new WorkerPool({ count, start, log: host.log, bus: host.bus, clock: Date.now, resync: (tell) => host.currentChanges(tell), requestReload: () => this.reloadForWorker(), logs: (m, w) => takeLogs(m, w, host.logRing, host.log) });
    this.role = worker ? { kind: "worker", index: worker.index, channel: worker.channel } : (this.pool?.role ?? SINGLE);
  }

  /** services.app.requestReload: in a worker the primary reloads (and so every worker); else this process does. */
  requestReload(): void {
    if (!this.worker) return this.host.requestReload();
    if (!this.worker.channel.send({ t: "reload?", key: "" })) throw new Error("the primary process cannot be reached");
  }

  /** What a worker's `reload` executor asked for, as this process's own executor would. */
  private reloadForWorker(): void {
    try {
      this.host.requestReload();
      this.host.log.info({ target: "workers" }, "reload requested by a worker's reload executor");
    } catch (err) {
      this.host.log.warn({ target: "workers", err: err instanceof Error ? err.message : String(err) }, "a worker's reload request was refused");
    }
  }

  /** A primary serves once at least one data-plane worker does; none: throws saying why. */
  async start(): Promise<void> {
    const pool = this.pool;
    if (!pool) return;
    const serving = await pool.start();
    this.host.log.info({ target: "workers", expected: pool.role.workers, serving }, "data-plane workers started");
    if (serving > 0) return;
    const error = `no data-plane worker could start: ${pool.firstError() ?? "unknown error"}`;
    this.host.log.error({ target: "workers", err: error }, "startup failed");
    throw new Error(error);
  }

  /** A generation serves in this process (`first`: the process's first). */
  activated(runtime: Runtime, generation: number, first: boolean): void {
    // The workers build the same file's generation once the primary's is ready (their first: when they start).
    if (!first) this.pool?.reload();
    if (runtime.config.workers !== this.atStart) this.host.log.warn({ target: "workers", workers: runtime.config.workers }, "`workers` changed: it takes effect at the next restart");
    if (!this.worker) return;
    const servers: Record<string, ServerAddress> = {};
    for (const p of runtime.plugins.values()) if (p.kind === "server") servers[p.tag] = (p.instance as ServerPlugin).address();
    this.worker.activated(generation, servers);
  }

  status(): WorkersStatus | null {
    return this.pool?.status() ?? null;
  }

  actors(): AnyActorRef[] {
    return this.pool?.actors ?? [];
  }

  /** GET /api/metrics: this process's, or with workers, theirs and this one's as one process's view. */
  async metricsText(metrics: MetricsHub): Promise<string> {
    const pool = this.pool;
    return pool ? metrics.textWith(await pool.metrics()) : metrics.text();
  }

  /** An event one of the primary's concern actors received (the app actor's inspection): shared ones go to the workers. */
  observe(target: AnyActorRef, event: { type: string }): void {
    const pool = this.pool;
    if (!pool || !this.sharedEvents.has(event.type)) return;
    const change = this.host.sharedChangeOf(target, event);
    if (change) pool.change(change);
  }

  /** Every worker drains and exits (a primary's first step in stopping). */
  stop(): Promise<void> {
    return this.pool?.stop() ?? Promise.resolve();
  }
}
