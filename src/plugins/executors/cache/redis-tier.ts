// The cache's second level in Redis (`cache` arg `redis`): shared by every instance that names the
// same Redis and prefix. Entries go there as wire bytes with a small binary header and their
// lifetime as the Redis TTL, fire-and-forget after they are stored locally (at most
// max_pending_writes outstanding; more are dropped and counted). A local miss asks Redis and
// waits at most read_budget_ms (later = miss). While Redis is down nothing waits on it: reads are
// misses and writes are dropped at once, and the link reconnects with backoff (cluster/redis.ts).

import type { Logger } from "../../../observability/logger.js";
import type { Cell, MetricsHub, Observer } from "../../../observability/metrics.js";
import { DNS_DURATION_BUCKETS } from "../../../observability/metrics.js";
import type { RedisLink } from "../../../cluster/redis.js";

export interface RedisTierOptions {
  prefix: string;
  readBudgetMs: number;
  maxPendingWrites: number;
}

export interface RedisTierStats {
  hit: Cell;
  miss: Cell;
  overBudget: Cell;
  unavailable: Cell;
  readError: Cell;
  written: Cell;
  dropped: Cell;
  writeError: Cell;
  loaded: Cell;
  readSeconds: Observer;
}

export function redisTierStats(metrics: MetricsHub, tag: string): RedisTierStats {
  const read = metrics.counter("cache_redis_read_total", "Redis reads after a local miss: hit, miss, over_budget (slower than read_budget_ms), unavailable (Redis down), error", ["plugin_tag", "result"]);
  const write = metrics.counter("cache_redis_write_total", "Entries written to Redis: ok, dropped (Redis down or too many outstanding), error", ["plugin_tag", "result"]);
  const labels = (result: string) => ({ plugin_tag: tag, result });
  return {
    hit: read(labels("hit")),
    miss: read(labels("miss")),
    overBudget: read(labels("over_budget")),
    unavailable: read(labels("unavailable")),
    readError: read(labels("error")),
    written: write(labels("ok")),
    dropped: write(labels("dropped")),
    writeError: write(labels("error")),
    loaded: metrics.counter("cache_redis_loaded_total", "Entries loaded from Redis into the local cache at start", ["plugin_tag"])({ plugin_tag: tag }),
    readSeconds: metrics.histogram("cache_redis_read_duration_seconds", "Time Redis took to answer a read (answered reads only), seconds", ["plugin_tag"], DNS_DURATION_BUCKETS)({ plugin_tag: tag }),
  };
}

/** What a stored value says besides the message: times are Unix ms, so every instance reads them alike. */
export interface SharedEntry {
  negative: boolean;
  ttl: number;
  freshUntil: number;
  expireAt: number;
  wire: Buffer;
}

const VALUE_VERSION = 1;
const HEADER = 1 + 1 + 4 + 8 + 8;

export function encodeShared(e: SharedEntry): Buffer {
  const out = Buffer.allocUnsafe(HEADER + e.wire.length);
  out[0] = VALUE_VERSION;
  out[1] = e.negative ? 1 : 0;
  out.writeUInt32BE(e.ttl, 2);
  out.writeDoubleBE(e.freshUntil, 6);
  out.writeDoubleBE(e.expireAt, 14);
  e.wire.copy(out, HEADER);
  return out;
}

/** null for anything this version did not write (another program's key, a newer format). */
export function decodeShared(v: Buffer): SharedEntry | null {
  if (v.length < HEADER + 12 || v[0] !== VALUE_VERSION || v[1] > 1) return null;
  const ttl = v.readUInt32BE(2);
  const freshUntil = v.readDoubleBE(6);
  const expireAt = v.readDoubleBE(14);
  if (ttl > 0x7fffffff || !Number.isFinite(freshUntil) || !Number.isFinite(expireAt) || freshUntil > expireAt) return null;
  return { negative: v[1] === 1, ttl, freshUntil, expireAt, wire: Buffer.from(v.subarray(HEADER)) };
}

/** Keys per SCAN step and per UNLINK/MGET batch. */
const BATCH = 500;

export class RedisTier {
  private pendingWrites = 0;

  constructor(
    readonly link: RedisLink,
    private readonly options: RedisTierOptions,
    private readonly stats: RedisTierStats,
    private readonly log: Logger,
  ) {}

  get prefix(): string {
    return this.options.prefix;
  }

  /**
   * The stored value for `key` (without prefix), or null: absent, slower than the budget, or an error.
   * Null at once, without a promise, while Redis is down: the miss goes on synchronously.
   */
  read(key: string): Promise<Buffer | null> | null {
    const s = this.stats;
    if (!this.link.ready) {
      s.unavailable.value++;
      return null;
    }
    return new Promise((resolve) => {
      const started = performance.now();
      let settled = false;
      const timer = setTimeout(() => {
        settled = true;
        s.overBudget.value++;
        resolve(null);
      }, this.options.readBudgetMs);
      this.link.bytes.get(this.options.prefix + key).then(
        (value) => {
          if (settled) return;
          settled = true;
          clearTimeout(timer);
          s.readSeconds.observe((performance.now() - started) / 1000);
          if (value === null) s.miss.value++;
          else s.hit.value++;
          resolve(value);
        },
        () => {
          if (settled) return;
          settled = true;
          clearTimeout(timer);
          s.readError.value++;
          resolve(null);
        },
      );
    });
  }

  /** Stores `value` under `key` for `ttlMs`, without waiting; dropped when Redis is down or too many writes are outstanding. */
  write(key: string, value: Buffer, ttlMs: number): void {
    const s = this.stats;
    if (!this.link.ready || this.pendingWrites >= this.options.maxPendingWrites || ttlMs < 1) {
      s.dropped.value++;
      return;
    }
    this.pendingWrites++;
    this.link.client.set(this.options.prefix + key, value, { PX: Math.ceil(ttlMs) }).then(
      () => {
        this.pendingWrites--;
        s.written.value++;
      },
      () => {
        this.pendingWrites--;
        s.writeError.value++;
      },
    );
  }

  /** Removes one key, without waiting. */
  remove(key: string): void {
    if (this.link.ready) this.link.client.unlink(this.options.prefix + key).catch(() => undefined);
  }

  /** Removes every key under the prefix (SCAN + UNLINK in batches); how many were removed. Throws when Redis is down. */
  async clear(): Promise<number> {
    if (!this.link.ready) throw new Error(`redis ${this.link.target} is not reachable`);
    let removed = 0;
    for await (const keys of this.link.client.scanIterator({ MATCH: `${escapeGlob(this.options.prefix)}*`, COUNT: BATCH })) {
      if (keys.length > 0) removed += await this.link.client.unlink(keys);
    }
    return removed;
  }

  /**
   * Reads stored entries (at most `max`) and hands each to `take` with its key (without prefix);
   * stops early when `take` returns false. Returns how many were taken.
   */
  async load(max: number, take: (key: string, value: Buffer) => boolean): Promise<number> {
    let taken = 0;
    const prefix = this.options.prefix;
    for await (const keys of this.link.client.scanIterator({ MATCH: `${escapeGlob(prefix)}*`, COUNT: BATCH })) {
      if (keys.length === 0) continue;
      const values = await this.link.bytes.mGet(keys);
      for (let i = 0; i < keys.length; i++) {
        const v = values[i];
        if (!Buffer.isBuffer(v)) continue;
        if (!take(keys[i].slice(prefix.length), v)) continue;
        taken++;
        this.stats.loaded.value++;
        if (taken >= max) return taken;
      }
    }
    return taken;
  }

  logLoadFailure(err: unknown): void {
    this.log.warn({ target: "redis", redis: this.link.target, err: err instanceof Error ? err.message : String(err) }, "cache entries could not be loaded from redis; starting with what is local");
  }
}

/** The prefix as a SCAN MATCH pattern that matches it literally. */
function escapeGlob(s: string): string {
  return s.replace(/[*?[\]\\]/g, (c) => `\\${c}`);
}
