// Serve-stale (lazy_cache_ttl): expired answers are served at once while exactly one background
// refresh per name asks upstream; a failed refresh keeps the stale answer and is counted.

import { afterEach, expect, test } from "vitest";
import { RCODE } from "../../src/dns/constants.js";
import { decodeMessage, replyTo } from "../../src/dns/message.js";
import { answerIps, query, buildQuery, rcodeOf, udpExchange } from "../helpers/dns.js";
import { answerWith, type Responder } from "../helpers/responder.js";
import type { RunningSluice } from "../helpers/sluice.js";
import { asked, cacheSluice, metric, negative, sleep, upstream } from "./cache-helpers.js";

const cleanups: (() => unknown)[] = [];

async function until(what: string, fn: () => Promise<boolean>, ms = 5000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await fn())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** The cache ages by the test's clock: an answer's 1 s TTL runs out when the test moves it, not after a real second. */
async function setup(handler: Parameters<typeof upstream>[0]): Promise<{ up: Responder; s: RunningSluice; clock: { ms: number } }> {
  const up = await upstream(handler);
  cleanups.push(() => up.close());
  const clock = { ms: 0 };
  const s = await cacheSluice("{ lazy_cache_ttl: 60 }", up.port, "", clock);
  cleanups.push(() => s.stop());
  return { up, s, clock };
}

test("after expiry 100 concurrent queries are answered at once from the stale entry and upstream sees exactly one refresh", async () => {
  let calls = 0;
  // The refresh's answer is held until the test lets it go: stale answers must not wait for it.
  let release: () => void = () => undefined;
  const held = new Promise<void>((r) => (release = r));
  const { up, s, clock } = await setup(async (q) => {
    calls++;
    if (calls === 1) return answerWith(q, ["192.0.2.1"], 1);
    await held;
    return answerWith(q, ["192.0.2.2"], 300);
  });
  await query(s.udpPort, "stale.example");
  // TTLs are whole seconds: the entry expires once the cache's clock has moved 1 s.
  clock.ms += 1100;
  const started = performance.now();
  const answers = await Promise.all(Array.from({ length: 100 }, (_, i) => udpExchange(s.udpPort, buildQuery("stale.example", "A", { id: i + 1 }), 3000)));
  const took = performance.now() - started;
  for (const [i, raw] of answers.entries()) {
    expect(raw).not.toBeNull();
    const m = decodeMessage(raw as Buffer);
    expect(m.id).toBe(i + 1);
    expect(answerIps(m)).toEqual(["192.0.2.1"]);
    expect(m.answers[0].ttl).toBe(1);
  }
  expect(took).toBeLessThan(1200);
  await until("the one refresh asked upstream", async () => Promise.resolve(asked(up, "stale.example") === 2));
  release();
  await until("the refresh stored", async () => (await metric(s, "cache_lazy_refresh_total", { plugin_tag: "c", result: "success" })) === 1);
  const refreshed = await query(s.udpPort, "stale.example");
  expect(answerIps(refreshed)).toEqual(["192.0.2.2"]);
  expect(refreshed.answers[0].ttl).toBeGreaterThanOrEqual(298);
  expect(asked(up, "stale.example")).toBe(2);
  expect(await metric(s, "cache_hit_total", { plugin_tag: "c", kind: "stale" })).toBe(100);
  expect(await metric(s, "cache_lazy_refresh_total", { plugin_tag: "c", result: "started" })).toBe(1);
  expect(await metric(s, "cache_lazy_refresh_total", { plugin_tag: "c", result: "success" })).toBe(1);
});

test("a refresh that gets no cacheable answer is counted as failed, the stale answer stays, and a later stale hit retries", async () => {
  let calls = 0;
  const { up, s, clock } = await setup((q) => {
    calls++;
    return calls === 1 ? answerWith(q, ["192.0.2.1"], 1) : replyTo(q, RCODE.SERVFAIL);
  });
  await query(s.udpPort, "flaky.example");
  clock.ms += 1100;
  const stale = await query(s.udpPort, "flaky.example");
  expect(answerIps(stale)).toEqual(["192.0.2.1"]);
  await until("the refresh counted as failed", async () => (await metric(s, "cache_lazy_refresh_total", { plugin_tag: "c", result: "failed" })) === 1);
  const again = await query(s.udpPort, "flaky.example");
  expect(answerIps(again)).toEqual(["192.0.2.1"]);
  await until("the second refresh asked upstream", async () => Promise.resolve(asked(up, "flaky.example") === 3));
  expect(await metric(s, "cache_lazy_refresh_total", { plugin_tag: "c", result: "failed" })).toBe(2);
  expect(await metric(s, "cache_lazy_refresh_total", { plugin_tag: "c", result: "started" })).toBe(2);
});

test("lazy_cache_ttl does not apply to negative answers: once expired they are asked for again", async () => {
  let calls = 0;
  const { up, s, clock } = await setup((q) => {
    calls++;
    return calls === 1 ? negative(q, RCODE.NXDOMAIN, 60, 1) : answerWith(q, ["192.0.2.5"], 300);
  });
  expect(rcodeOf(await query(s.udpPort, "neg.example"))).toBe(RCODE.NXDOMAIN);
  expect(rcodeOf(await query(s.udpPort, "neg.example"))).toBe(RCODE.NXDOMAIN);
  expect(asked(up, "neg.example")).toBe(1);
  clock.ms += 1100;
  const after = await query(s.udpPort, "neg.example");
  expect(answerIps(after)).toEqual(["192.0.2.5"]);
  expect(asked(up, "neg.example")).toBe(2);
  expect(await metric(s, "cache_hit_total", { plugin_tag: "c", kind: "stale" })).toBe(0);
});
