// The audit trail of the management API: the sink the API's hook appends to (a bounded queue in
// memory: never blocks, never throws, a full queue drops and counts), the `audit` actor
// (machines/audit.machine.ts) bound to a store (./sqlite-store.ts or ./pg-store.ts), the routes
// (./routes.ts), and the settings of `api.http.audit`, which follow reloads.

import type { FastifyInstance } from "fastify";
import { createActor, fromPromise, waitFor, type Actor } from "xstate";
import { busInspector } from "../../../actors/inspect.js";
import { AUDIT_FLUSH_DELAY_MS, AUDIT_PRUNE_INTERVAL_MS, auditMachine, type FlushResult } from "../../../machines/audit.machine.js";
import { auditSettings, sameAuditStore, type AuditSettings } from "../../config/audit.js";
import type { ApiConfig } from "../../config/schema.js";
import type { Cell } from "../../observability/metrics.js";
import type { ApiHost } from "../host.js";
import type { RouteContext } from "../server.js";
import type { AuditEntry, AuditSink } from "./entry.js";
import { PgAuditStore } from "./pg-store.js";
import { registerAuditRoutes } from "./routes.js";
import { SqliteAuditStore } from "./sqlite-store.js";
import type { AuditStore } from "./store.js";

export interface Audit {
  readonly sink: AuditSink;
  register(api: FastifyInstance, ctx: RouteContext): void;
  update(config: ApiConfig): void;
  close(): Promise<void>;
}

export type AuditActor = Actor<typeof auditMachine>;

/** Entries waiting for the store at most; more are dropped and counted. */
export const AUDIT_QUEUE_LIMIT = 10_000;
/** Entries written by one flush (one transaction) at most. */
const BATCH_LIMIT = 1000;

export interface AuditOptions {
  /** Unix ms now: retention is measured from it (default: the host's clock, which tests move with services.clockShift). */
  clock?: () => number;
  flushDelayMs?: number;
  pruneIntervalMs?: number;
}

const message = (err: unknown): string => (err instanceof Error ? err.message : String(err));

/** The audit trail; `actor` and `store()` are for the routes and tests. */
export class AuditTrail implements Audit {
  readonly sink: AuditSink;
  readonly actor: AuditActor;
  private settings: AuditSettings | null;
  private current: AuditStore | null = null;
  /** Counts opens: a store opened by an open the actor no longer waits for is closed at once. */
  private opens = 0;
  private readonly queue: AuditEntry[] = [];
  private closed = false;
  private readonly written: Cell;
  private readonly dropped: Cell;
  private readonly clock: () => number;

  constructor(
    private readonly host: ApiHost,
    config: ApiConfig,
    options: AuditOptions = {},
  ) {
    this.settings = auditSettings(config.audit, host.baseDir);
    this.clock = options.clock ?? (() => host.now());
    this.written = host.metrics.counter("audit_entries_total", "Audit trail entries written to its store", [])({});
    this.dropped = host.metrics.counter("audit_dropped_total", "Audit trail entries dropped: the queue for the store was full (store slow or down)", [])({});
    this.sink = { append: (entry) => this.append(entry) };
    const machine = auditMachine.provide({
      actors: {
        open: fromPromise(() => this.open()),
        flush: fromPromise(() => this.flush()),
        prune: fromPromise(() => this.prune()),
      },
      actions: { closeStore: () => this.closeStore() },
    });
    this.actor = createActor(machine, {
      systemId: "audit",
      input: { enabled: this.settings !== null, flushDelayMs: options.flushDelayMs ?? AUDIT_FLUSH_DELAY_MS, pruneIntervalMs: options.pruneIntervalMs ?? AUDIT_PRUNE_INTERVAL_MS },
      inspect: busInspector(host.bus),
    });
  }

  /** The open store (null while opening, failed or off). */
  store(): AuditStore | null {
    return this.current;
  }

  /** Entries waiting for the store. */
  queued(): number {
    return this.queue.length;
  }

  private append(entry: AuditEntry): void {
    if (this.closed || this.settings === null) return;
    if (this.queue.length >= AUDIT_QUEUE_LIMIT) {
      this.dropped.value++;
      return;
    }
    this.queue.push(entry);
    if (this.queue.length === 1) this.actor.send({ type: "AUDIT.QUEUED" });
  }

  private async open(): Promise<void> {
    const attempt = ++this.opens;
    const settings = this.settings;
    if (settings === null) throw new Error("the audit trail is off");
    let store: AuditStore | null = null;
    try {
      const s = settings.store;
      store = s.kind === "sqlite" ? SqliteAuditStore.open(s.path) : await PgAuditStore.open(s.url, s.schema, (err) => this.lost(store, err));
    } catch (err) {
      this.host.log.warn({ target: "audit", store: settings.store.kind, err: message(err) }, "the audit store could not be opened; entries wait in memory and it is tried again");
      throw err;
    }
    if (attempt !== this.opens || this.closed) {
      await store.close();
      throw new Error("superseded by a newer open");
    }
    this.current = store;
  }

  private lost(store: AuditStore | null, err: Error): void {
    if (store === null || store !== this.current || this.closed) return;
    this.host.log.warn({ target: "audit", err: err.message }, "the audit store's connection was lost; it is opened again");
    this.actor.send({ type: "STORE.LOST", error: err.message });
  }

  private closeStore(): void {
    const store = this.current;
    this.current = null;
    void store?.close().catch(() => undefined);
  }

  /** One batch from the queue in one transaction; on failure the batch goes back to the queue's head. */
  private async flush(): Promise<FlushResult> {
    const store = this.current;
    if (store === null) throw new Error("the audit store is not open");
    const batch = this.queue.splice(0, BATCH_LIMIT);
    try {
      const stored = await store.insert(batch);
      this.written.value += stored.length;
      for (const entry of stored) this.host.bus.emit("audit", entry);
      return { written: stored.length, left: this.queue.length };
    } catch (err) {
      this.putBack(batch);
      this.host.log.warn({ target: "audit", entries: batch.length, err: message(err) }, "writing the audit trail failed; the entries wait in memory");
      throw err;
    }
  }

  private putBack(batch: AuditEntry[]): void {
    if (this.settings === null || this.closed) return;
    this.queue.unshift(...batch);
    const over = this.queue.length - AUDIT_QUEUE_LIMIT;
    if (over > 0) {
      this.queue.splice(AUDIT_QUEUE_LIMIT);
      this.dropped.value += over;
    }
  }

  private prune(): Promise<number> {
    const store = this.current;
    const settings = this.settings;
    if (store === null || settings === null) return Promise.reject(new Error("the audit store is not open"));
    return store.prune(this.clock() - settings.retentionMs, settings.maxEntries);
  }

  /** Starts the actor; a SQLite store is open (or has failed) when it resolves. */
  async start(): Promise<void> {
    this.actor.start();
    if (this.settings?.store.kind === "sqlite") await waitFor(this.actor, (s) => !s.matches("opening"));
  }

  register(api: FastifyInstance, ctx: RouteContext): void {
    registerAuditRoutes(api, ctx, this);
  }

  update(config: ApiConfig): void {
    const next = auditSettings(config.audit, this.host.baseDir);
    const previous = this.settings;
    this.settings = next;
    if (sameAuditStore(previous?.store ?? null, next?.store ?? null)) return;
    if (next === null) this.queue.length = 0;
    this.actor.send({ type: "AUDIT.CONFIGURE", enabled: next !== null });
  }

  async close(): Promise<void> {
    if (this.closed) return;
    const store = this.current;
    // What is queued is written while the store is open; then nothing more is taken.
    if (store !== null && this.actor.getSnapshot().matches("ready")) {
      try {
        while (this.queue.length > 0) {
          const stored = await store.insert(this.queue.splice(0, BATCH_LIMIT));
          this.written.value += stored.length;
        }
      } catch (err) {
        this.host.log.warn({ target: "audit", err: message(err) }, "the audit entries still queued at shutdown could not be written");
      }
    }
    // Entries the store could not take before the end are lost: counted like a full queue's.
    this.dropped.value += this.queue.length;
    this.queue.length = 0;
    this.closed = true;
    this.current = null;
    this.actor.stop();
    await store?.close().catch(() => undefined);
  }
}

export async function createAudit(host: ApiHost, config: ApiConfig, options: AuditOptions = {}): Promise<AuditTrail> {
  const trail = new AuditTrail(host, config, options);
  await trail.start();
  return trail;
}
