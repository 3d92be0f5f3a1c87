// Background refreshes of a stored entry, with no client waiting: serve-stale's refresh of an entry past
// its fresh period and prefetch's refresh of a popular one about to expire. Either runs the rest of the
// sequence on a copy of the query, one per key at a time (the entry's `refreshing` flag), and gives up
// after REFRESH_TIMEOUT_MS; the caller stores a cacheable answer in place of the entry.

import type { DnsContext } from "../../../engine/context.js";
import { isPromise, type Continuation, type StepResult } from "../../../engine/types.js";
import type { Logger } from "../../../observability/logger.js";
import type { CacheStats } from "./stats.js";
import type { Entry } from "./store.js";

export const REFRESH_TIMEOUT_MS = 5000;

/** Which questions prefetch refreshes, and how many at once. */
export interface PrefetchPolicy {
  /** Fresh hits since the entry was stored before a hit may start a prefetch. */
  minHits: number;
  /** Milliseconds of the last stretch per second of the entry's TTL (prefetch_threshold_percent × 10). */
  windowMsPerTtlSecond: number;
  /** Prefetches in flight at once; a hit beyond it starts none (counted as dropped). */
  concurrency: number;
}

/**
 * Runs `next` on a copy of `ctx` in the background for entry `e` (nothing when one runs already).
 * `store(branch)` is called with the finished copy and says whether its answer was stored; `done(ok)`
 * follows exactly once: true when stored, false after an error, a timeout or an answer not stored.
 */
export function refreshEntry(
  ctx: DnsContext,
  e: Entry,
  next: Continuation,
  store: (branch: DnsContext) => boolean,
  done: (ok: boolean) => void,
  log: Logger,
): void {
  e.refreshing = true;
  const branch = ctx.copy();
  branch.response = null;
  let settled = false;
  const finish = (ok: boolean): void => {
    if (settled) return;
    settled = true;
    clearTimeout(timer);
    // A stored result has replaced the entry; after a failure a later hit may try again.
    e.refreshing = false;
    done(ok);
  };
  const timer = setTimeout(() => finish(false), REFRESH_TIMEOUT_MS);
  timer.unref();
  const complete = (): void => {
    if (!settled) finish(store(branch));
  };
  const failed = (err: unknown): void => {
    log.debug({ qname: e.qname, qtype: e.qtype, err: err instanceof Error ? err.message : String(err) }, "cache refresh failed");
    finish(false);
  };
  let r: StepResult;
  try {
    r = next(branch);
  } catch (err) {
    failed(err);
    return;
  }
  if (isPromise(r)) void r.then(complete, failed);
  else complete();
}

/**
 * Prefetch: a hit on a popular entry (prefetch_min_hits fresh hits since it was stored) in the last
 * prefetch_threshold_percent of its TTL refreshes it in the background, at most prefetch_concurrency at
 * once (a hit beyond that starts nothing; a later one tries again). A failure keeps the entry and needs
 * prefetch_min_hits more hits before the next try, so a failing upstream is not asked on every hit.
 */
export class Prefetcher {
  private inFlight = 0;

  constructor(
    private readonly policy: PrefetchPolicy,
    private readonly stats: CacheStats,
    private readonly log: Logger,
    /** Stores the finished copy's answer in place of `e`; true when it was stored. */
    private readonly store: (branch: DnsContext, e: Entry) => boolean,
  ) {}

  /** Called on a fresh hit of `e` once it has prefetch_min_hits hits, after the hit has been served. */
  consider(ctx: DnsContext, e: Entry, now: number, next: Continuation): void {
    const p = this.policy;
    if (e.refreshing || e.freshUntil - now > e.ttl * p.windowMsPerTtlSecond) return;
    const s = this.stats;
    if (this.inFlight >= p.concurrency) {
      s.prefetchDropped.value++;
      return;
    }
    this.inFlight++;
    s.prefetch.value++;
    const done = (ok: boolean): void => {
      this.inFlight--;
      if (ok) return;
      s.prefetchFailed.value++;
      e.hits = 0;
    };
    refreshEntry(ctx, e, next, (branch) => this.store(branch, e), done, this.log);
  }
}
