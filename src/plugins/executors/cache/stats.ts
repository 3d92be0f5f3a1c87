// The cache's metric cells (label plugin_tag, plus kind / reason / result where the name says so).

import type { Cell, MetricsHub } from "../../../observability/metrics.js";
import type { SkipReason } from "./admit.js";

export interface CacheStats {
  lookup: Cell;
  hitFresh: Cell;
  hitStale: Cell;
  miss: Cell;
  expired: Cell;
  insert: Cell;
  skip: Record<SkipReason, Cell>;
  lazyStarted: Cell;
  lazySuccess: Cell;
  lazyFailed: Cell;
  prefetch: Cell;
  prefetchFailed: Cell;
  prefetchDropped: Cell;
  entries: Cell;
  evicted: Cell;
}

export function cacheStats(metrics: MetricsHub, tag: string): CacheStats {
  const tagOnly = ["plugin_tag"] as const;
  const counter = (name: string, help: string): Cell => metrics.counter(name, help, tagOnly)({ plugin_tag: tag });
  const hit = metrics.counter("cache_hit_total", "Cache hits by kind (fresh, or stale under lazy_cache_ttl)", ["plugin_tag", "kind"]);
  const skip = metrics.counter("cache_skip_total", "Responses not stored, by reason", ["plugin_tag", "reason"]);
  const lazy = metrics.counter("cache_lazy_refresh_total", "Background refreshes of stale entries, by result", ["plugin_tag", "result"]);
  return {
    lookup: counter("cache_lookup_total", "Cache lookups (requests with one question and opcode QUERY)"),
    hitFresh: hit({ plugin_tag: tag, kind: "fresh" }),
    hitStale: hit({ plugin_tag: tag, kind: "stale" }),
    miss: counter("cache_miss_total", "Cache lookups that found no usable entry"),
    expired: counter("cache_expired_total", "Misses that found an entry past its lifetime (dropped then)"),
    insert: counter("cache_insert_total", "Entries stored (misses and refreshes)"),
    skip: {
      truncated: skip({ plugin_tag: tag, reason: "truncated" }),
      no_ttl: skip({ plugin_tag: tag, reason: "no_ttl" }),
      uncacheable: skip({ plugin_tag: tag, reason: "uncacheable" }),
    },
    lazyStarted: lazy({ plugin_tag: tag, result: "started" }),
    lazySuccess: lazy({ plugin_tag: tag, result: "success" }),
    lazyFailed: lazy({ plugin_tag: tag, result: "failed" }),
    prefetch: counter("cache_prefetch_total", "Background refreshes of popular entries about to expire (prefetch), started"),
    prefetchFailed: counter("cache_prefetch_failed_total", "Prefetches that stored nothing (error, timeout or an answer not cacheable); the old entry stays"),
    prefetchDropped: counter("cache_prefetch_dropped_total", "Prefetches not started because prefetch_concurrency were in flight"),
    entries: metrics.gauge("cache_entries", "Entries held now", tagOnly)({ plugin_tag: tag }),
    evicted: counter("cache_evicted_total", "Entries evicted to stay within size"),
  };
}
