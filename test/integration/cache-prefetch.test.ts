// Prefetch: a name asked prefetch_min_hits times whose entry is in the last prefetch_threshold_percent of its
// TTL is refreshed in the background when a hit arrives, so popular names never miss; unpopular ones are
// not; at most prefetch_concurrency run at once, one per name; failures are counted and the old entry
// stays. Also min_positive_ttl. The cache's clock is moved by the test (clockShift), never waited out.

import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, expect, test } from "vitest";
import { RCODE } from "../../src/dns/constants.js";
import { replyTo, type Message } from "../../src/dns/message.js";
import { answerIps, query, rcodeOf } from "../helpers/dns.js";
import { answerWith, type Reply, type Responder } from "../helpers/responder.js";
import { checkErrors } from "../helpers/check.js";
import { tempDir, type RunningSluice } from "../helpers/sluice.js";
import { asked, cacheOf, cacheSluice, metric, negative, sleep, upstream } from "./cache-helpers.js";

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function until(what: string, fn: () => boolean | Promise<boolean>, ms = 5000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await fn())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(10);
  }
}

/**
 * An upstream whose first answer per name is 192.0.2.1 with TTL 10; later answers (the refreshes) come from
 * `later`, and are held until the test calls `release()`.
 */
function heldUpstream(later: (q: Message) => Reply = (q) => answerWith(q, ["192.0.2.2"], 10)) {
  const seenNames = new Map<string, number>();
  let open: () => void = () => undefined;
  let gate = new Promise<void>((r) => (open = r));
  const handler = async (q: Message): Promise<Reply> => {
    const name = q.questions[0].name.toLowerCase();
    const n = (seenNames.get(name) ?? 0) + 1;
    seenNames.set(name, n);
    if (n === 1) return answerWith(q, ["192.0.2.1"], 10);
    await gate;
    return later(q);
  };
  const release = (): void => {
    open();
    gate = new Promise<void>((r) => (open = r));
  };
  return { handler, release: () => release() };
}

async function setup(cacheArgs: string, handler: Parameters<typeof upstream>[0]): Promise<{ up: Responder; s: RunningSluice; clock: { ms: number } }> {
  const up = await upstream(handler);
  cleanups.push(() => up.close());
  const clock = { ms: 0 };
  const s = await cacheSluice(cacheArgs, up.port, "", clock);
  cleanups.push(() => s.stop());
  return { up, s, clock };
}

const count = (s: RunningSluice, name: string): Promise<number> => metric(s, name, { plugin_tag: "c" });

test("a popular name in the last 10 % of its TTL is refreshed in the background on a hit; the client does not wait and the name never misses", async () => {
  const held = heldUpstream();
  const { up, s, clock } = await setup("{ prefetch: true, prefetch_min_hits: 3, prefetch_threshold_percent: 10 }", held.handler);
  await query(s.udpPort, "popular.example");
  // Three hits early in the TTL: popular now, but far from expiry, so nothing is refreshed yet.
  for (let i = 0; i < 3; i++) await query(s.udpPort, "popular.example");
  expect(await count(s, "cache_prefetch_total")).toBe(0);
  // 9.2 s of the 10 s spent: 0.8 s left, inside the last 10 %.
  clock.ms += 9200;
  const hit = await query(s.udpPort, "popular.example");
  // Answered from the entry while the upstream still holds the refresh's answer.
  expect(answerIps(hit)).toEqual(["192.0.2.1"]);
  expect(hit.answers[0].ttl).toBe(1);
  await until("the prefetch reached the upstream", () => asked(up, "popular.example") === 2);
  expect(await count(s, "cache_prefetch_total")).toBe(1);
  held.release();
  await until("the refreshed answer stored", async () => (await count(s, "cache_insert_total")) === 2);
  const renewed = await query(s.udpPort, "popular.example");
  expect(answerIps(renewed)).toEqual(["192.0.2.2"]);
  expect(renewed.answers[0].ttl).toBeGreaterThanOrEqual(9);
  // Past the first answer's expiry the renewed entry still answers: no miss, no upstream query.
  clock.ms += 1500;
  expect(answerIps(await query(s.udpPort, "popular.example"))).toEqual(["192.0.2.2"]);
  expect(asked(up, "popular.example")).toBe(2);
  expect(await count(s, "cache_miss_total")).toBe(1);
  expect(await count(s, "cache_prefetch_failed_total")).toBe(0);
});

test("a name asked fewer than prefetch_min_hits times is not prefetched and misses once it expires", async () => {
  const { up, s, clock } = await setup("{ prefetch: true, prefetch_min_hits: 3 }", (q) => answerWith(q, ["192.0.2.1"], 10));
  await query(s.udpPort, "rare.example");
  await query(s.udpPort, "rare.example");
  clock.ms += 9500;
  // The second hit: in the window, but one short of prefetch_min_hits. The decision is taken on the hit itself.
  await query(s.udpPort, "rare.example");
  expect(await count(s, "cache_prefetch_total")).toBe(0);
  expect(asked(up, "rare.example")).toBe(1);
  clock.ms += 600;
  await query(s.udpPort, "rare.example");
  expect(asked(up, "rare.example")).toBe(2);
  expect(await count(s, "cache_miss_total")).toBe(2);
});

test("without prefetch: true a popular name is never refreshed early", async () => {
  const { up, s, clock } = await setup("{}", (q) => answerWith(q, ["192.0.2.1"], 10));
  await query(s.udpPort, "plain.example");
  for (let i = 0; i < 5; i++) await query(s.udpPort, "plain.example");
  clock.ms += 9900;
  await query(s.udpPort, "plain.example");
  expect(await count(s, "cache_prefetch_total")).toBe(0);
  expect(asked(up, "plain.example")).toBe(1);
});

test("at most prefetch_concurrency prefetches run at once, one per name; a hit beyond the bound is counted as dropped and a later hit catches up", async () => {
  const held = heldUpstream();
  const { up, s, clock } = await setup("{ prefetch: true, prefetch_min_hits: 1, prefetch_concurrency: 2 }", held.handler);
  const names = ["a.example", "b.example", "c.example"];
  for (const n of names) await query(s.udpPort, n);
  clock.ms += 9500;
  for (const n of names) expect(answerIps(await query(s.udpPort, n))).toEqual(["192.0.2.1"]);
  // a's refresh is in flight: more hits on it start no second one.
  for (let i = 0; i < 3; i++) await query(s.udpPort, "a.example");
  await until("two prefetches at the upstream", () => asked(up, "a.example") + asked(up, "b.example") === 4);
  expect(asked(up, "c.example")).toBe(1);
  expect(await count(s, "cache_prefetch_total")).toBe(2);
  expect(await count(s, "cache_prefetch_dropped_total")).toBe(1);
  held.release();
  await until("both refreshes stored", async () => (await count(s, "cache_insert_total")) === 5);
  // c is still in its window: its next hit starts the prefetch the bound held back.
  await query(s.udpPort, "c.example");
  await until("c's prefetch at the upstream", () => asked(up, "c.example") === 2);
  held.release();
  await until("c's refresh stored", async () => (await count(s, "cache_insert_total")) === 6);
  expect(answerIps(await query(s.udpPort, "c.example"))).toEqual(["192.0.2.2"]);
  expect(await count(s, "cache_prefetch_total")).toBe(3);
  expect(asked(up, "a.example")).toBe(2);
});

test("a failed prefetch is counted, the old entry is still served, and the next try waits for prefetch_min_hits more hits", async () => {
  const { up, s, clock } = await setup("{ prefetch: true, prefetch_min_hits: 2 }", (q) => (asked(up, q.questions[0].name) === 1 ? answerWith(q, ["192.0.2.1"], 10) : replyTo(q, RCODE.SERVFAIL)));
  await query(s.udpPort, "flaky.example");
  await query(s.udpPort, "flaky.example");
  clock.ms += 9200;
  await query(s.udpPort, "flaky.example");
  await until("the prefetch failed", async () => (await count(s, "cache_prefetch_failed_total")) === 1);
  expect(asked(up, "flaky.example")).toBe(2);
  // The entry stays; one hit is not enough for another try, the second is.
  const kept = await query(s.udpPort, "flaky.example");
  expect(answerIps(kept)).toEqual(["192.0.2.1"]);
  expect(await count(s, "cache_prefetch_total")).toBe(1);
  await query(s.udpPort, "flaky.example");
  expect(await count(s, "cache_prefetch_total")).toBe(2);
  await until("the second prefetch failed", async () => (await count(s, "cache_prefetch_failed_total")) === 2);
  expect(asked(up, "flaky.example")).toBe(3);
  expect(answerIps(await query(s.udpPort, "flaky.example"))).toEqual(["192.0.2.1"]);
  expect(cacheOf(s).size).toBe(1);
});

test("min_positive_ttl keeps a short positive answer longer and raises the TTLs hits report; TTL 0 and negative answers are left alone", async () => {
  const { up, s, clock } = await setup("{ min_positive_ttl: 60, max_positive_ttl: 300 }", (q) => {
    const name = q.questions[0].name;
    if (name === "zero.example") return answerWith(q, ["192.0.2.9"], 0);
    if (name === "nx.example") return negative(q, RCODE.NXDOMAIN, 5, 5);
    if (name === "long.example") return answerWith(q, ["192.0.2.8"], 3600);
    return answerWith(q, ["192.0.2.7", "192.0.2.6"], 5);
  });
  // The miss passes the upstream's answer through unchanged.
  expect((await query(s.udpPort, "short.example")).answers[0].ttl).toBe(5);
  const hit = await query(s.udpPort, "short.example");
  for (const rr of hit.answers) expect(rr.ttl).toBeGreaterThanOrEqual(59);
  clock.ms += 30_000;
  const later = await query(s.udpPort, "short.example");
  expect(answerIps(later).sort()).toEqual(["192.0.2.6", "192.0.2.7"]);
  for (const rr of later.answers) expect(rr.ttl).toBeLessThanOrEqual(30);
  expect(asked(up, "short.example")).toBe(1);
  expect(cacheOf(s).entries({ qname: "short.example" }).entries[0].ttl).toBe(60);
  // max_positive_ttl still caps from above.
  await query(s.udpPort, "long.example");
  expect(cacheOf(s).entries({ qname: "long.example" }).entries[0].ttl).toBe(300);
  await query(s.udpPort, "zero.example");
  await query(s.udpPort, "zero.example");
  expect(asked(up, "zero.example")).toBe(2);
  expect(rcodeOf(await query(s.udpPort, "nx.example"))).toBe(RCODE.NXDOMAIN);
  clock.ms += 6000;
  await query(s.udpPort, "nx.example");
  expect(asked(up, "nx.example")).toBe(2);
  clock.ms += 31_000;
  await query(s.udpPort, "short.example");
  expect(asked(up, "short.example")).toBe(2);
});

test("sluice check: prefetch options without prefetch: true, min_positive_ttl above max_positive_ttl and out-of-range values are refused with their line", () => {
  const dir = tempDir("sluice-prefetch-check-");
  // What `sluice check` prints, computed in-process (test/helpers/check.ts); the CLI itself is cli.test.ts's.
  const check = (cacheArgs: string): string => {
    writeFileSync(join(dir, "s.yaml"), `plugins:\n  - tag: c\n    type: cache\n    args: ${cacheArgs}\n  - { tag: main, type: sequence, args: [{ exec: $c }] }\n`);
    return checkErrors(join(dir, "s.yaml"));
  };
  expect(check("{ prefetch_min_hits: 5 }")).toMatch(/s\.yaml:4:\d+: error: .*args\.prefetch_min_hits: prefetch_min_hits has no effect without prefetch: true/);
  expect(check("{ prefetch: false, prefetch_concurrency: 4 }")).toMatch(/prefetch_concurrency has no effect/);
  expect(check("{ min_positive_ttl: 600, max_positive_ttl: 300 }")).toMatch(/min_positive_ttl \(600\) must not exceed max_positive_ttl \(300\)/);
  expect(check("{ prefetch: true, prefetch_threshold_percent: 0 }")).toMatch(/prefetch_threshold_percent/);
  expect(check("{ prefetch: true, prefetch_threshold_percent: 101 }")).toMatch(/prefetch_threshold_percent/);
  expect(check("{ prefetch: true, prefetch_concurrency: 0 }")).toMatch(/prefetch_concurrency/);
  writeFileSync(join(dir, "s.yaml"), `plugins:\n  - tag: c\n    type: cache\n    args: { prefetch: true, prefetch_min_hits: 5, prefetch_threshold_percent: 20, prefetch_concurrency: 4, min_positive_ttl: 30 }\n  - { tag: main, type: sequence, args: [{ exec: $c }] }\n`);
  expect(() => checkErrors(join(dir, "s.yaml"))).toThrow(/is valid/);
});
