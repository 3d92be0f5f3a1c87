// @ts-check
// The cache's own counters, read from a Sluice's /api/metrics between the measurement phases of a scenario,
// so a scenario can report how many lookups each phase answered from the cache (the prefetch scenario).

/**
 * @typedef {object} CacheCounters
 * @property {number} lookups
 * @property {number} hits      fresh and stale
 * @property {number} misses
 * @property {number} prefetches
 * @property {number} prefetchFailed
 * @property {number} prefetchDropped
 */

/**
 * @typedef {object} CachePhase  the counters' change over one phase, and the share of lookups that hit
 * @property {number} lookups
 * @property {number} hits
 * @property {number} misses
 * @property {number | null} hitRate
 * @property {number} prefetches
 * @property {number} prefetchFailed
 * @property {number} prefetchDropped
 */

/**
 * Sums a counter over its label sets (one cache per configuration here).
 * @param {string} text @param {string} name
 */
function total(text, name) {
  let sum = 0;
  for (const m of text.matchAll(new RegExp(`^${name}(?:\\{[^}]*\\})? ([0-9.e+-]+)$`, "gm"))) sum += Number(m[1]);
  return sum;
}

/** @param {number} apiPort @returns {Promise<CacheCounters>} */
export async function cacheCounters(apiPort) {
  const text = await (await fetch(`http://127.0.0.1:${apiPort}/api/metrics`)).text();
  return {
    lookups: total(text, "cache_lookup_total"),
    hits: total(text, "cache_hit_total"),
    misses: total(text, "cache_miss_total"),
    prefetches: total(text, "cache_prefetch_total"),
    prefetchFailed: total(text, "cache_prefetch_failed_total"),
    prefetchDropped: total(text, "cache_prefetch_dropped_total"),
  };
}

/** @param {CacheCounters} a @param {CacheCounters} b @returns {CachePhase} */
export function cachePhase(a, b) {
  const lookups = b.lookups - a.lookups;
  const hits = b.hits - a.hits;
  return {
    lookups,
    hits,
    misses: b.misses - a.misses,
    hitRate: lookups > 0 ? hits / lookups : null,
    prefetches: b.prefetches - a.prefetches,
    prefetchFailed: b.prefetchFailed - a.prefetchFailed,
    prefetchDropped: b.prefetchDropped - a.prefetchDropped,
  };
}

/**
 * @typedef {Record<string, { saturation: CachePhase, latency: CachePhase }>} CacheResult  per server (sluice, plain)
 */

/** @param {number | null} r */
const pct = (r) => (r === null ? "—" : `${(r * 100).toFixed(3)} %`);

/**
 * The cache table of the scenarios that measured one (markdown).
 * @param {{ name: string, cache?: CacheResult, labels?: Record<string, string> }[]} scenarios
 */
export function cacheTable(scenarios) {
  const lines = [
    "| scenario | server | hit rate (saturation) | misses (saturation) | hit rate @20k | misses @20k | prefetches @20k (failed, dropped) |",
    "|---|---|---:|---:|---:|---:|---:|",
  ];
  for (const s of scenarios) {
    if (!s.cache) continue;
    for (const [server, c] of Object.entries(s.cache)) {
      const label = s.labels?.[server] ?? (server === "sluice" ? "Sluice" : server);
      const l = c.latency;
      lines.push(
        `| ${s.name} | ${label} | ${pct(c.saturation.hitRate)} | ${c.saturation.misses.toLocaleString("en-US")} | ${pct(l.hitRate)} | ${l.misses.toLocaleString("en-US")} | ` +
          `${l.prefetches.toLocaleString("en-US")} (${l.prefetchFailed}, ${l.prefetchDropped}) |`,
      );
    }
  }
  return lines.join("\n");
}
