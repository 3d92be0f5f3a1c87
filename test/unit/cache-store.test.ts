// The cache's LRU store: several entries per name (qtype, bits, ECS scope) share one map slot, and
// removal, replacement and eviction keep both the per-name chain and the recency list consistent.
import { expect, test } from "vitest";
import type { Entry } from "../../src/plugins/executors/cache/store.js";
import { LruStore } from "../../src/plugins/executors/cache/store.js";

function entry(qname: string, qtype: number, bits = 0, ecs = ""): Entry {
  return {
    qname, qtype, qclass: 1, bits, ecs, wire: Buffer.alloc(12), ttls: [], qnameEnd: 13, storedName: qname, ttl: 60, negative: false,
    cachedAt: 0, freshUntil: 60_000, expireAt: 60_000, lastAccess: 0, seq: 0, born: 0, hits: 0, refreshing: false, prev: null, next: null, sibling: null,
  };
}

const keys = (s: LruStore): string[] => [...s.byRecency()].map((e) => `${e.qname}/${String(e.qtype)}/${String(e.bits)}/${e.ecs}`);

test("entries for one name are found, replaced and removed independently", () => {
  const s = new LruStore(10);
  const a = entry("x.test", 1);
  const aaaa = entry("x.test", 28);
  const aDo = entry("x.test", 1, 1);
  const aEcs = entry("x.test", 1, 0, "1/24/0a0000");
  for (const e of [a, aaaa, aDo, aEcs]) s.insert(e);
  expect(s.size).toBe(4);
  expect(s.find("x.test", 1, 1, 0, "")).toBe(a);
  expect(s.find("x.test", 28, 1, 0, "")).toBe(aaaa);
  expect(s.find("x.test", 1, 1, 1, "")).toBe(aDo);
  expect(s.find("x.test", 1, 1, 0, "1/24/0a0000")).toBe(aEcs);
  expect(s.find("x.test", 15, 1, 0, "")).toBeUndefined();
  expect(s.find("y.test", 1, 1, 0, "")).toBeUndefined();

  // Remove one from the middle of the chain, then the first, then the last.
  s.remove(aDo);
  expect(s.find("x.test", 1, 1, 1, "")).toBeUndefined();
  expect(s.find("x.test", 28, 1, 0, "")).toBe(aaaa);
  s.remove(aEcs);
  s.remove(a);
  expect(s.find("x.test", 28, 1, 0, "")).toBe(aaaa);
  expect(s.size).toBe(1);
  s.remove(a); // already gone: no effect
  expect(s.size).toBe(1);

  // Replacing a key keeps one entry for it.
  const aaaa2 = entry("x.test", 28);
  s.insert(aaaa2);
  expect(s.size).toBe(1);
  expect(s.find("x.test", 28, 1, 0, "")).toBe(aaaa2);
  s.remove(aaaa2);
  expect(s.size).toBe(0);
  expect(keys(s)).toEqual([]);
});

test("eviction takes the least recently used entry, whichever chain it sits in", () => {
  const s = new LruStore(3);
  const x1 = entry("x.test", 1);
  const y1 = entry("y.test", 1);
  const x28 = entry("x.test", 28);
  s.insert(x1);
  s.insert(y1);
  s.insert(x28);
  s.touch(x1, 5.7);
  expect(x1.lastAccess).toBe(5);
  expect(s.insert(entry("z.test", 1))).toBe(1); // y1 was the least recently used
  expect(s.find("y.test", 1, 1, 0, "")).toBeUndefined();
  expect(keys(s)).toEqual(["z.test/1/0/", "x.test/1/0/", "x.test/28/0/"]);
  expect(s.insert(entry("w.test", 1))).toBe(1); // now x28, which heads x.test's chain
  expect(s.find("x.test", 28, 1, 0, "")).toBeUndefined();
  expect(s.find("x.test", 1, 1, 0, "")).toBe(x1);
  expect(s.size).toBe(3);
  expect(s.clear()).toBe(3);
  expect(s.find("x.test", 1, 1, 0, "")).toBeUndefined();
});
