// The cache executor: lookup and hit serving (hot path), admission after a miss, serve-stale with
// one background refresh per key, and the operations its actor (machines/cache.machine.ts) and the
// API routes call: start-up load, sweep, persist, dump, load, flush.

import { randomBytes } from "node:crypto";
import { DnsResponse } from "../../../dns/response.js";
import type { DnsContext } from "../../../engine/context.js";
import { isPromise, runNext, Step, type Continuation, type StepResult } from "../../../engine/types.js";
import type { Logger } from "../../../observability/logger.js";
import type { MetricsHub } from "../../../observability/metrics.js";
import type { ControlHandle, ExecutorPlugin } from "../../../registry/types.js";
import type { ClockShift } from "../../../registry/services.js";
import { SINGLE, type ProcessRole } from "../../../registry/process-role.js";
import { makeEntry, type AdmitPolicy } from "./admit.js";
import { listEntries, type CacheEntriesPage, type CacheEntriesQuery } from "./api.js";
import { Slicer } from "../../../engine/rules/slicer.js";
import { decodeDumpStream, encodeDump, writeFileAtomic } from "./dump.js";
import { readDumpFile } from "./dump-file.js";
import { InvalidEntryIdError } from "./errors.js";
import { keyFromId, keyString, requestBits, requestEcs, type KeyParts } from "./key.js";
import type { RedisTier } from "./redis-tier.js";
import { adoptShared, loadShared, shareEntry } from "./shared.js";
import { cacheStats, type CacheStats } from "./stats.js";
import { Prefetcher, refreshEntry, type PrefetchPolicy } from "./refresh.js";
import { LruStore, type Entry } from "./store.js";
import { answerCacheQuestions, WorkerCaches } from "./workers.js";

export interface CacheOptions {
  tag: string;
  size: number;
  shortCircuit: boolean;
  ecsInKey: boolean;
  policy: AdmitPolicy;
  /** Absolute path, or null. */
  dumpFile: string | null;
  dumpIntervalMs: number;
  /** The second level in Redis (none by default). */
  tier?: RedisTier | null;
  /** Fill the local cache from Redis after start. */
  loadAtStart?: boolean;
  /** Gives the Redis link back (on destroy). */
  releaseTier?: () => Promise<void>;
  /** Added to the monotonic clock where entries age (the process's services.clockShift; 0 by default). */
  clockShift?: ClockShift;
  /** Refreshes popular entries before they expire (none by default). */
  prefetch?: PrefetchPolicy | null;
  /** The process's part (the only process by default): with data-plane workers the primary's routes ask the workers' caches. */
  role?: ProcessRole;
}

const NO_SHIFT: ClockShift = { ms: 0 };

/** RFC 8767 §4 suggests 30 s for stale answers: clients come back soon and get the refreshed one. */
export const STALE_ANSWER_TTL = 30;
/** Expired entries are also dropped when looked up; the sweep frees those nobody asks for again. */
export const SWEEP_INTERVAL_MS = 30_000;

export class CacheExecutor implements ExecutorPlugin {
  readonly continuation = true;
  /** Replaced whole by a load (built aside, then swapped), so queries never see a half-loaded cache. */
  private store: LruStore;
  private readonly stats: CacheStats;
  private readonly shortCircuit: boolean;
  private readonly ecsInKey: boolean;
  private readonly policy: AdmitPolicy;
  /** Moves the monotonic clock entries' stored and expiry times are measured in (tests only). */
  private readonly shift: ClockShift;
  /** Inserts, deletions, flushes and loads since the last dump written. */
  private changes = 0;
  /** Set by destroy: answers that arrive after it (refreshes, Redis reads) are not stored. */
  private destroyed = false;
  private readonly tier: RedisTier | null;
  /** Signs the paging cursors this cache hands out. */
  private readonly cursorKey = randomBytes(16);
  /** With data-plane workers, in the primary: the routes' work, asked of the workers' caches (workers.ts). */
  readonly workers: WorkerCaches | null;
  /** In a worker: stops answering the primary's questions. */
  private readonly unlisten: () => void = () => undefined;
  /** Fresh hits an entry needs before a hit may prefetch it; Infinity when prefetch is off. */
  private readonly prefetchHits: number;
  private readonly prefetcher: Prefetcher | null;

  constructor(
    private readonly options: CacheOptions,
    metrics: MetricsHub,
    private readonly log: Logger,
    /** The cache:<tag> actor that runs this instance's persistence (none for an instance made outside a runtime). */
    private readonly self: ControlHandle | null = null,
  ) {
    this.store = new LruStore(options.size);
    this.stats = cacheStats(metrics, options.tag);
    this.shortCircuit = options.shortCircuit;
    this.ecsInKey = options.ecsInKey;
    this.policy = options.policy;
    this.tier = options.tier ?? null;
    this.shift = options.clockShift ?? NO_SHIFT;
    const prefetch = options.prefetch ?? null;
    this.prefetchHits = prefetch === null ? Infinity : prefetch.minHits;
    this.prefetcher = prefetch === null ? null : new Prefetcher(prefetch, this.stats, log, (branch, e) => this.admit(branch, e));
    const role = options.role ?? SINGLE;
    this.workers = role.kind === "primary" ? new WorkerCaches(options.tag, role, options.size, () => this.now(), () => this.unixNow(), log) : null;
    if (role.kind === "worker" && self !== null) this.unlisten = answerCacheQuestions(options.tag, role, this, self);
  }

  execute(ctx: DnsContext, next: Continuation | null): StepResult {
    const q = ctx.query;
    if (q.questions.length !== 1 || (q.flags & 0x7800) !== 0) return runNext(ctx, next);
    const question = q.questions[0];
    const bits = requestBits(q);
    const ecs = this.ecsInKey ? requestEcs(q) : "";
    const s = this.stats;
    s.lookup.value++;
    const e = this.store.find(ctx.qname, question.type, question.class, bits, ecs);
    if (e !== undefined) {
      // The query's arrival time: a clock read costs as much as the rest of a hit.
      const now = ctx.startedAt + this.shift.ms;
      if (now < e.freshUntil) {
        s.hitFresh.value++;
        this.serve(ctx, e, now, true);
        // Prefetch off: prefetchHits is Infinity, and this is all a hit costs.
        if (++e.hits >= this.prefetchHits && next !== null) this.prefetcher?.consider(ctx, e, now, next);
        return this.shortCircuit ? Step.Stop : runNext(ctx, next);
      }
      if (now < e.expireAt) {
        s.hitStale.value++;
        // Served before the refresh starts: a refresh whose pipeline answers at once replaces the entry.
        this.serve(ctx, e, now, false);
        if (next !== null) this.refresh(ctx, e, next);
        return this.shortCircuit ? Step.Stop : runNext(ctx, next);
      }
      s.expired.value++;
      this.store.remove(e);
      s.entries.value = this.store.size;
    }
    s.miss.value++;
    const key: KeyParts = { qname: ctx.qname, qtype: question.type, qclass: question.class, bits, ecs };
    const shared = this.tier === null ? null : this.tier.read(keyString(key));
    if (shared !== null) return this.missShared(ctx, next, key, shared);
    return this.missOnward(ctx, next, key);
  }

  /** A miss at every level: the rest of the pipeline answers, and its answer is admitted. */
  private missOnward(ctx: DnsContext, next: Continuation | null, key: KeyParts): StepResult {
    const r = runNext(ctx, next);
    if (isPromise(r)) {
      return r.then((step) => {
        this.admit(ctx, key);
        return step;
      });
    }
    this.admit(ctx, key);
    return r;
  }

  /** A local miss with a Redis tier: an entry found there within the budget is stored and served like a local one. */
  private missShared(ctx: DnsContext, next: Continuation | null, key: KeyParts, read: Promise<Buffer | null>): Promise<Step> {
    return read.then((value) => {
      const e = value === null || this.destroyed ? null : this.adopt(key, value);
      if (e !== null) {
        const now = this.now();
        if (now < e.freshUntil) {
          this.serve(ctx, e, now, true);
          return this.shortCircuit ? Step.Stop : runNext(ctx, next);
        }
        this.serve(ctx, e, now, false);
        if (next !== null) this.refresh(ctx, e, next);
        return this.shortCircuit ? Step.Stop : runNext(ctx, next);
      }
      return this.missOnward(ctx, next, key);
    });
  }

  /** Stores an entry read from Redis locally (replacing any); null when it is unusable or has expired. */
  private adopt(key: KeyParts, value: Buffer): Entry | null {
    const e = adoptShared(key, value, this.now(), this.unixNow());
    if (e === null) return null;
    this.stats.evicted.value += this.store.insert(e);
    this.stats.entries.value = this.store.size;
    this.changes++;
    return e;
  }

  /** Answers from the stored bytes: copy, then patch ID, TTLs and the question name's letter case. */
  private serve(ctx: DnsContext, e: Entry, now: number, fresh: boolean): void {
    const src = e.wire;
    const out = Buffer.allocUnsafe(src.length);
    out.set(src);
    const id = ctx.query.id;
    out[0] = id >>> 8;
    out[1] = id & 0xff;
    const ttls = e.ttls;
    if (fresh) {
      // Whole seconds left, never 0 while fresh (0 tells clients not to cache at all).
      let left = Math.floor((e.freshUntil - now) / 1000);
      if (left < 1) left = 1;
      else if (left > e.ttl) left = e.ttl; // a query that arrived before the entry was stored
      const spent = e.ttl - left;
      for (let i = 0; i < ttls.length; i += 2) {
        const c = ttls[i + 1];
        let t = c - spent;
        if (t < 1) t = c === 0 ? 0 : 1;
        writeTtl(out, ttls[i], t);
      }
    } else {
      let t = Math.ceil((e.expireAt - now) / 1000);
      if (t > STALE_ANSWER_TTL) t = STALE_ANSWER_TTL;
      if (t > e.ttl) t = e.ttl;
      if (t < 1) t = 1;
      for (let i = 0; i < ttls.length; i += 2) writeTtl(out, ttls[i], ttls[i + 1] < t ? ttls[i + 1] : t);
    }
    // Echo the asker's 0x20 case: same name, so same length; only letters can differ.
    const name = ctx.query.questions[0].name;
    if (name !== e.storedName && name.length === e.qnameEnd - 14) {
      for (let i = 0; i < name.length; i++) {
        const c = name.charCodeAt(i);
        if ((c >= 65 && c <= 90) || (c >= 97 && c <= 122)) out[13 + i] = c;
      }
    }
    this.store.touch(e, now);
    ctx.response = DnsResponse.fromWire(out);
  }

  /** Stores the final response of a miss or refresh when it is cacheable; true when stored. */
  private admit(ctx: DnsContext, key: KeyParts): boolean {
    const resp = ctx.response;
    if (resp === null || this.destroyed) return false;
    let entry;
    try {
      entry = makeEntry(key, resp.toWire(), resp.index, this.policy, this.now(), this.ecsInKey);
    } catch {
      entry = "uncacheable" as const;
    }
    const s = this.stats;
    if (typeof entry === "string") {
      s.skip[entry].value++;
      return false;
    }
    s.evicted.value += this.store.insert(entry);
    s.insert.value++;
    s.entries.value = this.store.size;
    this.changes++;
    if (this.tier !== null) shareEntry(this.tier, entry, this.now(), this.unixNow());
    return true;
  }

  /** Serve-stale: refreshes an entry past its fresh period in the background, once per key. */
  private refresh(ctx: DnsContext, stale: Entry, next: Continuation): void {
    if (stale.refreshing) return;
    const s = this.stats;
    s.lazyStarted.value++;
    const done = (ok: boolean): void => {
      if (ok) s.lazySuccess.value++;
      else s.lazyFailed.value++;
    };
    refreshEntry(ctx, stale, next, (branch) => this.admit(branch, stale), done, this.log);
  }

  // ---- lifecycle (run by the cache:<tag> actor, machines/cache.machine.ts) ----------------------

  /**
   * Asks the actor to wind down (it waits for a running operation or persist, then writes dump_file
   * a last time) before the Redis link goes. Refreshes still in flight finish unseen.
   */
  async destroy(): Promise<void> {
    this.destroyed = true;
    this.unlisten();
    await this.self?.ask({ type: "CACHE.STOP" }).catch(() => undefined);
    await this.options.releaseTier?.();
  }

  get persistent(): boolean {
    return this.options.dumpFile !== null;
  }

  get dumpIntervalMs(): number {
    return this.options.dumpIntervalMs;
  }

  /** Inserts, deletions, flushes and loads that dump_file does not have yet. */
  get unsavedChanges(): number {
    return this.changes;
  }

  /** Wall-clock time as the cache sees it (dumps and the shared level carry wall times), moved by the same shift. */
  unixNow(): number {
    return Date.now() + this.shift.ms;
  }

  /** Monotonic ms on the clock entries are measured by. */
  now(): number {
    return performance.now() + this.shift.ms;
  }

  /** Drops the entries expired by now; returns how many. */
  sweep(): number {
    const n = this.store.sweep(this.now());
    this.stats.entries.value = this.store.size;
    return n;
  }

  /** Fills the local cache from Redis (null: no tier, load_at_start off, or Redis unavailable); stops taking entries on `signal`. */
  async loadFromTier(signal: AbortSignal): Promise<number | null> {
    const tier = this.tier;
    if (tier === null || this.options.loadAtStart !== true) return null;
    const n = await loadShared(tier, this.store.capacity - this.store.size, (key, value) => !signal.aborted && this.store.find(key.qname, key.qtype, key.qclass, key.bits, key.ecs) === undefined && this.adopt(key, value) !== null);
    if (n !== null) this.log.info({ target: "redis", redis: tier.link.target, entries: n }, "cache entries loaded from redis");
    return n;
  }

  /**
   * Loads dump_file (the start-up load): the entries taken, 0 when there is none or it is unreadable
   * or corrupt (logged; the cache starts empty). `signal` cancels a load still reading.
   */
  async loadDumpFile(signal: AbortSignal): Promise<number> {
    const file = this.options.dumpFile;
    if (file === null) return 0;
    const n = await readDumpFile(file, (source) => this.load(source), this.log, signal);
    // What the file holds is saved already (nothing else changes the cache before it is ready).
    this.changes = 0;
    return n;
  }

  /** Writes the dump to dump_file now (atomically); returns the entries written. The actor runs one write at a time. */
  async persist(): Promise<number> {
    const file = this.options.dumpFile;
    if (file === null) throw new Error("cache has no dump_file");
    const pending = this.changes;
    const size = this.store.size;
    try {
      await writeFileAtomic(file, this.dump());
    } catch (err) {
      this.log.warn({ file, err: (err as Error).message }, "cache dump could not be written");
      throw err;
    }
    this.changes -= pending;
    return size;
  }

  // ---- API-facing functions (each route is a one-liner over these) -----------------------------

  get size(): number {
    return this.store.size;
  }

  /** Live entries, most recently used first. Throws InvalidQueryError for a bad limit or cursor. */
  entries(query: CacheEntriesQuery = {}): CacheEntriesPage {
    return listEntries(this.store.byRecency(), query, this.now(), this.cursorKey);
  }

  /** Throws InvalidEntryIdError for an id this cache could not have made; false when absent. */
  deleteEntry(id: string): boolean {
    const k = keyFromId(id);
    if (k === null) throw new InvalidEntryIdError();
    this.tier?.remove(keyString(k));
    const e = this.store.find(k.qname, k.qtype, k.qclass, k.bits, k.ecs);
    if (!e) return false;
    this.store.remove(e);
    this.stats.entries.value = this.store.size;
    this.changes++;
    return true;
  }

  /** Removes every entry; returns how many there were. */
  flush(): number {
    const n = this.store.clear();
    this.stats.entries.value = 0;
    this.changes++;
    return n;
  }

  /** Removes this cache's entries from Redis too (a flush asked on this instance, not one replayed from a peer). */
  async clearShared(): Promise<void> {
    const tier = this.tier;
    if (tier === null) return;
    try {
      const n = await tier.clear();
      this.log.info({ target: "redis", redis: tier.link.target, removed: n }, "cache entries removed from redis");
    } catch (err) {
      this.log.warn({ target: "redis", redis: tier.link.target, err: (err as Error).message }, "cache entries could not be removed from redis; the local cache is flushed");
    }
  }

  dump(): Buffer {
    return encodeDump(this.store.byRecency(), this.now(), this.unixNow());
  }

  /**
   * Replaces the content with a dump's live entries (the `size` most recently used). The dump is
   * decoded as it arrives and the new content built aside, in slices that yield to the event loop;
   * queries use the old content until the new one is swapped in. Throws InvalidDumpError and
   * changes nothing on bad data.
   */
  async load(source: Buffer | AsyncIterable<Uint8Array>): Promise<number> {
    const slicer = new Slicer();
    const capacity = this.store.capacity;
    const loaded = await decodeDumpStream(Buffer.isBuffer(source) ? [source] : source, capacity, slicer, this.now(), this.unixNow());
    const fresh = new LruStore(capacity, this.store.births);
    for (let i = loaded.length - 1; i >= 0; i--) {
      fresh.insert(loaded[i]);
      if (slicer.due()) await slicer.pause();
    }
    this.store = fresh;
    this.stats.entries.value = fresh.size;
    this.changes++;
    return loaded.length;
  }
}

function writeTtl(buf: Buffer, at: number, ttl: number): void {
  buf[at] = ttl >>> 24;
  buf[at + 1] = (ttl >>> 16) & 0xff;
  buf[at + 2] = (ttl >>> 8) & 0xff;
  buf[at + 3] = ttl & 0xff;
}
