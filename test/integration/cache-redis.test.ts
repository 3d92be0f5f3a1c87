// The cache's Redis tier against a real redis-server: two Sluice instances with the same Redis share
// answers (the second asks no upstream), a third loads the entries at start, TTLs keep counting
// down across instances, a flush clears Redis, and a Redis that is killed or stops answering never
// costs an answer: reads are misses within the budget, writes are bounded, health says so, and the
// link comes back by itself.
import { afterAll, beforeAll, expect, test } from "vitest";
import { answerIps, query } from "../helpers/dns.js";
import { metricValue } from "../helpers/proc.js";
import { RedisServer } from "../helpers/redis.js";
import type { Responder } from "../helpers/responder.js";
import { serversYaml, startSluice, type RunningSluice } from "../helpers/sluice.js";
import { asked, sleep, upstream } from "./cache-helpers.js";

let redis: RedisServer;
let up: Responder;
const running: RunningSluice[] = [];

const config = (extra = ""): string => `
api: { http: "127.0.0.1:0" }
plugins:
  - tag: c
    type: cache
    args: { redis: { url: "${redis.url}", prefix: "t:", read_budget_ms: 50, max_pending_writes: 3 ${extra} } }
  - tag: main
    type: sequence
    args:
      - exec: $c
      - matches: "!has_resp"
        exec: forward 127.0.0.1:${up.port}
${serversYaml()}`;

async function instance(extra = "", clockShift?: { ms: number }): Promise<RunningSluice> {
  const s = await startSluice(config(extra), {}, { clockShift });
  running.push(s);
  return s;
}

const metric = async (s: RunningSluice, name: string, labels: string): Promise<number> => metricValue(await (await s.api("/api/metrics")).text(), name, labels) || 0;
const health = async (s: RunningSluice): Promise<{ status: string; checks: Record<string, string> }> => (await s.api("/api/health")).json() as Promise<{ status: string; checks: Record<string, string> }>;

async function until(what: string, fn: () => Promise<boolean> | boolean, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await fn())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

let a: RunningSluice;
let b: RunningSluice;
/** B's clock, moved forward instead of waiting for an entry A wrote to age. */
const bClock = { ms: 0 };
beforeAll(async () => {
  redis = await RedisServer.start();
  up = await upstream();
  a = await instance();
  b = await instance("", bClock);
  await until("both connected", async () => (await health(a)).checks.redis === "ok" && (await health(b)).checks.redis === "ok");
  // Each loads what Redis holds once connected; until B has (nothing, here), an entry A writes could reach B that way instead of by a read.
  await until("both loaded", () => [a, b].every((s) => s.logs.some((l) => l.msg === "cache entries loaded from redis")));
});
afterAll(async () => {
  for (const s of running) await s.stop();
  await up.close();
  await redis.stop();
});

test("a name answered by A is served to B from Redis: the upstream sees one query, the TTL keeps counting down", async () => {
  const first = await query(a.udpPort, "shared.example");
  expect(first.answers[0].ttl).toBe(300);
  await until("the entry in redis", () => redis.cli("EXISTS", "t:1|1|0||shared.example") === "1");
  const pttl = Number(redis.cli("PTTL", "t:1|1|0||shared.example"));
  expect(pttl).toBeGreaterThan(290_000);
  expect(pttl).toBeLessThanOrEqual(300_000);
  // 3 s later for B: the stored times are Unix ms, so B counts the entry's age from A's write (at
  // least 3 s: 297 at most; 299 is what a few ms of real time already give).
  bClock.ms += 3000;
  const fromB = await query(b.udpPort, "SHARED.example");
  expect(answerIps(fromB)).toEqual(["192.0.2.1"]);
  expect(fromB.questions[0].name).toBe("SHARED.example");
  expect(fromB.answers[0].ttl).toBeLessThanOrEqual(297);
  expect(fromB.answers[0].ttl).toBeGreaterThanOrEqual(295);
  expect(asked(up, "shared.example")).toBe(1);
  expect(await metric(b, "cache_redis_read_total", 'result="hit"')).toBe(1);
  // Now in B's local cache: the next one does not ask Redis.
  await query(b.udpPort, "shared.example");
  expect(await metric(b, "cache_redis_read_total", 'result="hit"')).toBe(1);
  expect(await metric(a, "cache_redis_write_total", 'result="ok"')).toBeGreaterThanOrEqual(1);
  expect((await (await b.api("/api/metrics")).text())).toMatch(/cache_redis_read_duration_seconds_count\{plugin_tag="c"\} 1/);
});

test("an instance started later loads the entries at start and answers from memory", async () => {
  await query(a.udpPort, "preload.example");
  await until("the entry in redis", () => redis.cli("EXISTS", "t:1|1|0||preload.example") === "1");
  const c = await instance();
  await until("the load logged", () => c.logs.some((l) => l.msg === "cache entries loaded from redis" && Number(l.entries) >= 2));
  const answer = await query(c.udpPort, "preload.example");
  expect(answerIps(answer)).toEqual(["192.0.2.1"]);
  expect(asked(up, "preload.example")).toBe(1);
  expect(await metric(c, "cache_redis_read_total", 'result="hit"')).toBe(0);
  expect(await metric(c, "cache_hit_total", 'kind="fresh"')).toBe(1);
  expect(await metric(c, "cache_redis_loaded_total", "")).toBeGreaterThanOrEqual(2);
});

test("a flush through one instance's API clears the shared level too", async () => {
  await query(a.udpPort, "flushme.example");
  await until("the entry in redis", () => redis.cli("EXISTS", "t:1|1|0||flushme.example") === "1");
  const res = await a.api("/api/plugins/c/flush", { method: "POST" });
  expect(res.status).toBe(200);
  expect(redis.cli("KEYS", "t:*")).toBe("");
  // Another instance's keys under another prefix are not touched.
  redis.cli("SET", "other:x", "1");
  await a.api("/api/plugins/c/flush", { method: "POST" });
  expect(redis.cli("EXISTS", "other:x")).toBe("1");
});

test("Redis that stops answering: every query is still answered, reads end at the budget, writes stay bounded", async () => {
  redis.pause();
  try {
    const started = Date.now();
    const names = Array.from({ length: 8 }, (_, i) => `paused${i}.example`);
    const answers = await Promise.all(names.map((n) => query(a.udpPort, n)));
    expect(answers.every((m) => answerIps(m)[0] === "192.0.2.1")).toBe(true);
    // Generous sanity bound: a budget of 50 ms, not a wait on Redis.
    expect(Date.now() - started).toBeLessThan(1500);
    expect(await metric(a, "cache_redis_read_total", 'result="over_budget"')).toBeGreaterThanOrEqual(8);
    // Eight answers to store, at most three writes outstanding: the rest are dropped.
    expect(await metric(a, "cache_redis_write_total", 'result="dropped"')).toBeGreaterThanOrEqual(5);
  } finally {
    redis.resume();
  }
});

test("Redis killed: queries are answered from upstream and the local cache, health says down; it recovers when Redis returns", async () => {
  await query(a.udpPort, "beforekill.example");
  await redis.kill();
  await until("health shows redis down", async () => (await health(a)).checks.redis === "down");
  const h = await health(a);
  expect(h.status).toBe("ok");
  expect(answerIps(await query(a.udpPort, "beforekill.example"))).toEqual(["192.0.2.1"]);
  const started = Date.now();
  expect(answerIps(await query(a.udpPort, "whiledown.example"))).toEqual(["192.0.2.1"]);
  expect(Date.now() - started).toBeLessThan(1000);
  expect(await metric(a, "cache_redis_read_total", 'result="unavailable"')).toBeGreaterThanOrEqual(1);
  expect(await metric(a, "redis_up", "")).toBe(0);
  expect(a.logs.filter((l) => l.msg === "redis unreachable; retrying with backoff").length).toBeLessThanOrEqual(2);
  await redis.run();
  // Backoff tops out at 5 s between attempts.
  await until("health shows redis ok again", async () => (await health(a)).checks.redis === "ok", 12_000);
  expect(await metric(a, "redis_up", "")).toBe(1);
  await query(a.udpPort, "afterkill.example");
  await until("writes resume", () => redis.cli("EXISTS", "t:1|1|0||afterkill.example") === "1");
});

test("a bad Redis URL is a configuration error at its place", async () => {
  await expect(startSluice(config().replace(redis.url, "http://127.0.0.1:1"))).rejects.toThrow(/redis:\/\/ or rediss:\/\//);
});
