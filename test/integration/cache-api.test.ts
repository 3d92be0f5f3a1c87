// The cache driven in-process: the size bound under 200 000 names, LRU order, and the functions
// the API routes call (entries, deleteEntry, flush, dump, load).

import { afterEach, expect, test } from "vitest";
import { QTYPE, RCODE } from "../../src/dns/constants.js";
import { DnsResponse } from "../../src/dns/response.js";
import { Step } from "../../src/engine/types.js";
import { MetricsHub } from "../../src/observability/metrics.js";
import { silentLogger } from "../../src/observability/logger.js";
import { CacheExecutor, InvalidDumpError, InvalidEntryIdError, InvalidQueryError } from "../../src/plugins/executors/cache/index.js";
import type { CacheOptions } from "../../src/plugins/executors/cache/executor.js";
import { localAnswer, negative, queryContext, run } from "./cache-helpers.js";

const made: CacheExecutor[] = [];
afterEach(async () => {
  for (const c of made.splice(0)) await c.destroy();
});

function makeCache(size: number, extra: Partial<CacheOptions> = {}): { cache: CacheExecutor; metrics: MetricsHub } {
  const metrics = new MetricsHub({ processMetrics: false });
  const cache = new CacheExecutor(
    {
      tag: "c",
      size,
      shortCircuit: true,
      ecsInKey: false,
      policy: { maxPositiveTtl: null, minPositiveTtl: 0, cacheNegative: true, maxNegativeTtl: 300, negativeTtlWithoutSoa: 60, lazyMs: 0 },
      dumpFile: null,
      dumpIntervalMs: 600_000,
      ...extra,
    },
    metrics,
    silentLogger(),
  );
  made.push(cache);
  return { cache, metrics };
}

test("200 000 names through a size-1000 cache: never more than 1000 entries, and the newest are kept", () => {
  const { cache } = makeCache(1000);
  const next = localAnswer();
  let max = 0;
  for (let i = 0; i < 200_000; i++) {
    run(cache, queryContext(`n${i}.example`), next);
    if (cache.size > max) max = cache.size;
  }
  expect(max).toBe(1000);
  expect(next.calls).toBe(200_000);
  const page = cache.entries({ limit: 500 });
  expect(page.total_entries).toBe(1000);
  expect(page.entries[0].domain).toBe("n199999.example");
  // The most recent 1000 are hits; the one before them is gone.
  for (let i = 199_000; i < 200_000; i += 97) expect(run(cache, queryContext(`n${i}.example`), next)).toBe(Step.Stop);
  expect(next.calls).toBe(200_000);
  run(cache, queryContext("n198999.example"), next);
  expect(next.calls).toBe(200_001);
});

test("a hit makes an entry recently used, so the least recently used one is evicted instead", async () => {
  const { cache, metrics } = makeCache(3);
  const next = localAnswer();
  for (const n of ["a", "b", "c"]) run(cache, queryContext(`${n}.example`), next);
  run(cache, queryContext("a.example"), next); // hit: a is now the most recent
  run(cache, queryContext("d.example"), next); // evicts b
  // b, the least recently used, was evicted; the listing is newest-stored first.
  expect(cache.entries().entries.map((r) => r.domain)).toEqual(["d.example", "c.example", "a.example"]);
  const text = await metrics.text();
  expect(text).toMatch(/cache_evicted_total\{plugin_tag="c"\} 1/);
  expect(text).toMatch(/cache_entries\{plugin_tag="c"\} 3/);
  expect(text).toMatch(/cache_hit_total\{plugin_tag="c",kind="fresh"\} 1/);
});

test("entries pages newest first with an opaque cursor, filters by name, and reports rows", () => {
  const { cache } = makeCache(100);
  const next = localAnswer("192.0.2.8", 120);
  for (let i = 0; i < 7; i++) run(cache, queryContext(`host${i}.Alpha.example`), next);
  run(cache, queryContext("other.example"), next);
  const nx = queryContext("missing.alpha.example");
  run(cache, nx, (ctx) => {
    ctx.response = DnsResponse.fromMessage(negative(ctx.query, RCODE.NXDOMAIN, 600, 30));
    return Step.Next;
  });
  const seen: string[] = [];
  let cursor: string | null = null;
  let pages = 0;
  do {
    const page = cache.entries({ limit: 3, cursor, qname: " ALPHA.example. " });
    expect(page.total_entries).toBe(8);
    seen.push(...page.entries.map((r) => r.domain));
    cursor = page.next_cursor;
    pages++;
  } while (cursor !== null);
  expect(pages).toBe(3);
  expect(seen).toEqual(["missing.alpha.example", ...[6, 5, 4, 3, 2, 1, 0].map((i) => `host${i}.alpha.example`)]);
  const [nxRow] = cache.entries({ qname: "missing" }).entries;
  expect(nxRow).toMatchObject({ domain: "missing.alpha.example", qtype: "A", qclass: "IN", rcode: "NXDOMAIN", answer_count: 0, authority_count: 1, additional_count: 0, ttl: 30, fresh: true, stale: false, do_bit: false, cd_bit: false, ecs: null });
  const [row] = cache.entries({ qname: "host3" }).entries;
  expect(row).toMatchObject({ domain: "host3.alpha.example", rcode: "NOERROR", answer_count: 1, ttl: 120, fresh: true });
  expect(row.remaining_ttl).toBeGreaterThanOrEqual(119);
  expect(row.expires_at_ms - row.cached_at_ms).toBe(120_000);
  expect(Math.abs(row.cached_at_ms - Date.now())).toBeLessThan(5000);
  expect(row.answers).toEqual([{ name: "host3.Alpha.example.", class: "IN", ttl: 120, rr_type: "A", payload_kind: "a", payload_text: "192.0.2.8", payload: { address: "192.0.2.8" } }]);
  expect(() => cache.entries({ cursor: "nonsense" })).toThrow(InvalidQueryError);
  // Well-formed but never handed out: a stamp with no MAC, a forged MAC, another cache's cursor.
  const issued = cache.entries({ limit: 2 }).next_cursor as string;
  expect(issued).toMatch(/^b[0-9a-z]+\.[A-Za-z0-9_-]{16}$/);
  const { cache: other } = makeCache(100);
  for (const forged of ["b5", issued.replace(/^b[0-9a-z]+/, "b1"), `${issued.slice(0, -1)}${issued.endsWith("A") ? "B" : "A"}`]) {
    expect(() => cache.entries({ cursor: forged })).toThrow(InvalidQueryError);
  }
  expect(() => other.entries({ cursor: issued })).toThrow(InvalidQueryError);
  expect(() => cache.entries({ limit: 1.5 })).toThrow(InvalidQueryError);
  expect(cache.entries({ limit: 10_000 }).entries).toHaveLength(9);
});

test("deleteEntry removes one entry by id; a bad id is a typed error; flush empties the cache", () => {
  const { cache } = makeCache(100);
  const next = localAnswer();
  run(cache, queryContext("a.example"), next);
  run(cache, queryContext("a.example", 2, QTYPE.AAAA), next);
  run(cache, queryContext("b.example"), next);
  const [aaaa] = cache.entries({ qname: "a.example" }).entries.filter((r) => r.qtype === "AAAA");
  expect(cache.deleteEntry(aaaa.id)).toBe(true);
  expect(cache.deleteEntry(aaaa.id)).toBe(false);
  expect(cache.size).toBe(2);
  // The A entry of the same name is untouched.
  run(cache, queryContext("a.example"), next);
  expect(next.calls).toBe(3);
  expect(() => cache.deleteEntry("not an id!")).toThrow(InvalidEntryIdError);
  expect(() => cache.deleteEntry(Buffer.from("1|1|9||x").toString("base64url"))).toThrow(InvalidEntryIdError);
  expect(cache.flush()).toBe(2);
  expect(cache.size).toBe(0);
  run(cache, queryContext("b.example"), next);
  expect(next.calls).toBe(4);
});

test("dump and load round-trip entries; garbage, truncated or altered dumps throw and change nothing", async () => {
  const { cache } = makeCache(100);
  const next = localAnswer();
  for (const n of ["x", "y", "z"]) run(cache, queryContext(`${n}.example`), next);
  const dump = cache.dump();
  const before = cache.entries().entries.map((r) => r.id);
  const { cache: other } = makeCache(100);
  expect(await other.load(dump)).toBe(3);
  expect(other.entries().entries.map((r) => r.id)).toEqual(before);
  for (const n of ["x", "y", "z"]) expect(run(other, queryContext(`${n}.example`), next)).toBe(Step.Stop);
  expect(next.calls).toBe(3);

  const altered = Buffer.from(dump);
  altered[altered.length - 40] ^= 0xff;
  for (const bad of [Buffer.from("hello, not a dump"), dump.subarray(0, dump.length - 10), altered, Buffer.alloc(0)]) {
    await expect(other.load(bad)).rejects.toThrow(InvalidDumpError);
    expect(other.size).toBe(3);
  }
  // A smaller cache keeps the most recently used entries of a bigger dump.
  const { cache: small } = makeCache(2);
  expect(await small.load(dump)).toBe(2);
  expect(small.entries().entries.map((r) => r.domain)).toEqual(["z.example", "y.example"]);
});
