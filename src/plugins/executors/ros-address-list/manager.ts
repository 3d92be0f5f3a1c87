// The work of the manager actor (machines/ros-address-list.machine.ts): batches of observed addresses,
// scans of the lists (start-up recovery and reconcile), and the cleanup when the plugin goes. The
// ledger is what the manager knows the router holds for it, so an address seen again costs no call
// until its row needs a longer timeout: a row is refreshed once less than a quarter of the new TTL
// is left. The actor runs one of these at a time; the data plane only reads the ledger.

import type { Logger } from "pino";
import type { RosCleanupResult, RosScanResult, RosSyncResult } from "../../../../machines/ros-address-list.machine.js";
import type { Cell } from "../../../observability/metrics.js";
import { normalizeAddress, type PersistentAddress } from "./args.js";
import { MAX_CONNECTIONS, parseRouterosDuration, RosError, routerosDuration, type RosClient, type RosRow } from "./client.js";
import { keyOf, release, type Intake, type Pending } from "./intake.js";
import { claimedByAnother, claimKey, type Ownership } from "./ownership.js";

/** What the ledger knows of one address: our row (dynamic or persistent) or someone else's that covers it. */
export interface Held {
  id: string | null;
  kind: "D" | "P" | "foreign";
  /** On the manager's clock (ms); null: the row has no timeout. */
  expiresAt: number | null;
}

export interface ManagerCounters {
  added: Cell;
  refreshed: Cell;
  removed: Cell;
  retried: Cell;
  failed: Cell;
  error: Cell;
  timeout: Cell;
  entries: Cell;
}

export interface ManagerOptions {
  client: RosClient;
  ownership: Ownership;
  lists: { 4?: string; 6?: string };
  persistent: readonly PersistentAddress[];
  intake: Intake;
  backlog: Intake;
  batchSize: number;
  retries: number;
  counters: ManagerCounters;
  log: Logger;
  /** Monotonic ms, moved by services.clockShift (the data plane reads a query's arrival time plus the same shift). */
  clock: () => number;
}

/** Cleanup's whole budget: a router that does not answer does not hold the shutdown longer. */
export const CLEANUP_BUDGET_MS = 30_000;
/** How often a batch also forgets rows whose timeout has run out (the router removed them). */
const SWEEP_EVERY_MS = 60_000;

const asRosError = (err: unknown): RosError => (err instanceof RosError ? err : new RosError(err instanceof Error ? err.message : String(err), "answer"));

/** Runs `work` over `items`, at most `limit` at once. */
async function eachLimited<T>(items: readonly T[], limit: number, work: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) await work(items[next++]);
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
}

export class RosManager {
  /** What the router holds for this plugin, by address key (`4|1.2.3.4`). Replaced by each scan. */
  ledger = new Map<string, Held>();
  private readonly desired: Map<string, PersistentAddress>;
  private sweptAt: number;

  constructor(private readonly o: ManagerOptions) {
    this.desired = new Map(o.persistent.map((p) => [keyOf(p.family, p.address), p]));
    this.sweptAt = o.clock();
  }

  get hasPersistent(): boolean {
    return this.desired.size > 0;
  }

  get families(): (4 | 6)[] {
    return ([4, 6] as const).filter((f) => this.o.lists[f] !== undefined);
  }

  /** Whether an address seen now with `ttl` needs the router (no row known, or one due for a longer timeout). */
  needs(key: string, ttl: number | null, now: number): boolean {
    const held = this.ledger.get(key);
    if (held === undefined) return true;
    if (held.kind === "P" || held.expiresAt === null) return false;
    const left = held.expiresAt - now;
    if (left <= 0) return true;
    return held.kind === "D" && ttl !== null && left < (ttl * 1000) / 4;
  }

  /** One batch: the retry backlog first, then the intake, up to batch_size addresses. */
  async sync(signal: AbortSignal): Promise<RosSyncResult> {
    const o = this.o;
    const batch = o.backlog.take(o.batchSize);
    batch.push(...o.intake.take(o.batchSize - batch.length));
    let error: string | null = null;
    let handled = 0;
    await eachLimited(batch, MAX_CONNECTIONS, async (p) => {
      try {
        await this.apply(p, signal);
        handled++;
      } catch (err) {
        const e = asRosError(err);
        if (e.kind === "cancelled") return release(p);
        o.counters.error.value++;
        if (e.kind === "timeout") o.counters.timeout.value++;
        error = e.message;
        if (e.transient && p.attempts < o.retries && o.backlog.putBack({ ...p, attempts: p.attempts + 1, waiters: null })) {
          o.counters.retried.value++;
        } else {
          o.counters.failed.value++;
          handled++;
          o.log.warn({ address: p.address, err: e.message, attempts: p.attempts + 1 }, "ros_address_list: giving up on an address");
        }
      }
      // A sync-mode query waits for the first attempt only.
      release(p);
    });
    this.sweep();
    o.counters.entries.value = this.ledger.size;
    if (error !== null) o.log.warn({ batch: batch.length, retry: o.backlog.size, err: error }, "ros_address_list: calls of a batch failed");
    return { handled, retry: o.backlog.size, error };
  }

  /** Forgets expired rows now and then, so the ledger holds what the router holds, not every address ever seen. */
  private sweep(): void {
    const now = this.o.clock();
    if (now - this.sweptAt < SWEEP_EVERY_MS) return;
    this.sweptAt = now;
    for (const [key, held] of this.ledger) if (held.expiresAt !== null && held.expiresAt <= now) this.ledger.delete(key);
  }

  private async apply(p: Pending, signal: AbortSignal): Promise<void> {
    const o = this.o;
    const now = o.clock();
    const held = this.ledger.get(p.key);
    if (held !== undefined && !this.needs(p.key, p.ttl, now)) return;
    if (held?.kind === "D" && held.id !== null && held.expiresAt !== null && held.expiresAt > now && p.ttl !== null) {
      try {
        await o.client.update(p.family, held.id, { timeout: routerosDuration(p.ttl) }, signal);
        held.expiresAt = now + p.ttl * 1000;
        o.counters.refreshed.value++;
        return;
      } catch (err) {
        if (!asRosError(err).missing) throw err;
      }
    }
    this.ledger.delete(p.key);
    await this.add(p.family, p.address, "D", p.ttl, p.domain, signal);
  }

  /** Adds a row (dynamic with the TTL, or persistent); a duplicate is looked up and taken into the ledger. */
  private async add(family: 4 | 6, address: string, kind: "D" | "P", ttl: number | null, domain: string, signal: AbortSignal): Promise<void> {
    const o = this.o;
    const list = o.lists[family] as string;
    const row = { list, address, ...(ttl === null ? {} : { timeout: routerosDuration(ttl) }), comment: o.ownership.comment(kind, domain) };
    try {
      const created = await o.client.add(family, row, signal);
      this.ledger.set(keyOf(family, address), { id: created[".id"], kind, expiresAt: ttl === null ? null : o.clock() + ttl * 1000 });
      o.counters.added.value++;
    } catch (err) {
      if (!asRosError(err).duplicate) throw err;
      await this.adopt(family, address, kind, ttl, signal);
    }
  }

  /** The row the router already has for `address`: ours is taken over (and refreshed if due), someone else's covers it. */
  private async adopt(family: 4 | 6, address: string, kind: "D" | "P", ttl: number | null, signal: AbortSignal): Promise<void> {
    const o = this.o;
    const list = o.lists[family] as string;
    let rows = await o.client.find(family, list, address, signal);
    // The router may print the address in another form (a /128, say): look through the list.
    if (rows.length === 0) rows = (await o.client.list(family, list, signal)).filter((r) => normalizeAddress(r.address ?? "")?.address === address);
    const row = rows[0];
    if (row === undefined) throw new RosError(`${o.client.where}: ${address} was refused as already listed in '${list}', then not found there`, "conflict");
    const key = keyOf(family, address);
    const owned = o.ownership.kindOf(row.comment);
    const now = o.clock();
    const left = parseRouterosDuration(row.timeout);
    const held: Held = { id: owned === null ? null : row[".id"], kind: owned ?? "foreign", expiresAt: left === null ? null : now + left * 1000 };
    this.ledger.set(key, held);
    if (held.kind === "D" && held.id !== null && ttl !== null && this.needs(key, ttl, now)) {
      await o.client.update(family, held.id, { timeout: routerosDuration(ttl) }, signal);
      held.expiresAt = now + ttl * 1000;
      o.counters.refreshed.value++;
    } else if (kind === "P" && held.kind === "D" && held.id !== null) {
      // Configured persistent now: our dynamic row gives way to a persistent one.
      await o.client.remove(family, held.id, signal);
      this.ledger.delete(key);
      await this.add(family, address, "P", null, "", signal);
    }
  }

  /**
   * Reads the lists and rebuilds the ledger from them: our rows are taken in (dynamic ones with the
   * timeout they have left), persistent rows no longer configured are removed, configured ones missing
   * are added. Someone else's row covering a configured address is left alone.
   */
  async scan(signal: AbortSignal): Promise<RosScanResult> {
    const o = this.o;
    const now = o.clock();
    const next = new Map<string, Held>();
    let added = 0;
    let removed = 0;
    for (const family of this.families) {
      const rows = await o.client.list(family, o.lists[family] as string, signal);
      for (const row of rows) {
        const norm = normalizeAddress(row.address ?? "");
        const key = norm === null ? `${family}|${row.address ?? ""}` : keyOf(family, norm.address);
        const kind = o.ownership.kindOf(row.comment);
        const left = parseRouterosDuration(row.timeout);
        const expiresAt = left === null ? null : now + left * 1000;
        if (kind === null) {
          if (this.desired.has(key)) next.set(key, { id: null, kind: "foreign", expiresAt });
          continue;
        }
        // A persistent row no longer configured, or a dynamic row an address now configured persistent replaces.
        if ((kind === "P" && !this.desired.has(key)) || (kind === "D" && this.desired.has(key))) {
          await this.removeRow(family, row, signal);
          removed++;
          continue;
        }
        next.set(key, { id: row[".id"], kind, expiresAt });
      }
    }
    this.ledger = next;
    for (const [key, p] of this.desired) {
      const held = next.get(key);
      if (held !== undefined && (held.kind === "P" || held.expiresAt === null || held.expiresAt > now)) continue;
      const before = o.counters.added.value;
      await this.add(p.family, p.address, "P", null, "", signal);
      if (o.counters.added.value > before) added++;
    }
    o.counters.entries.value = this.ledger.size;
    let owned = 0;
    for (const h of this.ledger.values()) if (h.kind !== "foreign") owned++;
    return { owned, added, removed };
  }

  private async removeRow(family: 4 | 6, row: RosRow, signal: AbortSignal): Promise<void> {
    try {
      await this.o.client.remove(family, row[".id"], signal);
      this.o.counters.removed.value++;
    } catch (err) {
      if (!asRosError(err).missing) throw err;
    }
  }

  /**
   * Removes every row this plugin owns (read from the lists, not the ledger: rows added by an earlier
   * configuration count too), except in lists a newer configuration of the plugin claims.
   */
  async cleanup(owner: object, router: string): Promise<RosCleanupResult> {
    const o = this.o;
    const signal = AbortSignal.timeout(CLEANUP_BUDGET_MS);
    const result: RosCleanupResult = { removed: 0, failed: 0, handed_over: 0 };
    for (const family of this.families) {
      const list = o.lists[family] as string;
      if (claimedByAnother(claimKey(router, o.ownership, family, list), owner)) {
        result.handed_over++;
        continue;
      }
      let rows: RosRow[];
      try {
        rows = (await o.client.list(family, list, signal)).filter((r) => o.ownership.kindOf(r.comment) !== null);
      } catch (err) {
        result.failed++;
        o.log.warn({ list, err: asRosError(err).message }, "ros_address_list: could not read a list to clean it up");
        continue;
      }
      await eachLimited(rows, MAX_CONNECTIONS, async (row) => {
        try {
          await this.removeRow(family, row, signal);
          result.removed++;
        } catch (err) {
          result.failed++;
          o.log.warn({ list, address: row.address, err: asRosError(err).message }, "ros_address_list: could not remove a row at shutdown");
        }
      });
    }
    this.ledger.clear();
    o.counters.entries.value = 0;
    return result;
  }

  /** Rows of each kind the ledger holds (for the status route). */
  counts(): { dynamic: number; persistent: number; foreign: number } {
    const out = { dynamic: 0, persistent: 0, foreign: 0 };
    for (const h of this.ledger.values()) {
      if (h.kind === "D") out.dynamic++;
      else if (h.kind === "P") out.persistent++;
      else out.foreign++;
    }
    return out;
  }
}
