// Shared runtime state over Redis pub/sub, with three members of one cluster and a fourth in
// another cluster, all against a real redis-server: a matcher mode (with its end time), a provider
// reload and a cache flush asked through one member's API reach the others through their own
// concern actors; members ignore their own messages, other clusters' messages, and anything on the
// channel that is not a Sluice change (counted); a configuration error in `cluster` is located.
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, expect, test } from "vitest";
import { query, rcodeOf } from "../helpers/dns.js";
import { metricValue } from "../helpers/proc.js";
import { RedisServer } from "../helpers/redis.js";
import type { Responder } from "../helpers/responder.js";
import { serversYaml, startSluice, type RunningSluice } from "../helpers/sluice.js";
import { checkErrors } from "../helpers/check.js";
import { sleep, upstream } from "./cache-helpers.js";

let redis: RedisServer;
let up: Responder;
const members: Record<string, RunningSluice> = {};

const config = (instance: string, cluster = "lab"): string => `
api: { http: "127.0.0.1:0" }
cluster: { name: ${cluster}, redis: "${redis.url}", instance: ${instance} }
plugins:
  - { tag: blocked, type: qname, args: ["domain:ads.test"] }
  - { tag: lists, type: domain_set, args: { files: [list.txt] } }
  - { tag: c, type: cache, args: {} }
  - tag: main
    type: sequence
    args:
      - { matches: $blocked, exec: reject NXDOMAIN }
      - { matches: "qname $lists", exec: reject REFUSED }
      - exec: $c
      - matches: "!has_resp"
        exec: forward 127.0.0.1:${up.port}
${serversYaml()}`;

const post = (s: RunningSluice, path: string, body?: unknown): Promise<Response> =>
  s.api(path, { method: "POST", headers: body === undefined ? {} : { "content-type": "application/json" }, body: body === undefined ? undefined : JSON.stringify(body) });
const json = async (s: RunningSluice, path: string): Promise<Record<string, unknown>> => (await s.api(path)).json() as Promise<Record<string, unknown>>;
const counted = async (s: RunningSluice, result: string): Promise<number> => metricValue(await (await s.api("/api/metrics")).text(), "cluster_messages_total", `result="${result}"`) || 0;

async function until(what: string, fn: () => Promise<boolean>, ms = 5000): Promise<number> {
  const started = Date.now();
  while (!(await fn())) {
    if (Date.now() - started > ms) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
  return Date.now() - started;
}

beforeAll(async () => {
  redis = await RedisServer.start();
  up = await upstream();
  for (const [name, cluster] of [["a", "lab"], ["b", "lab"], ["c", "lab"], ["x", "other"]]) {
    members[name] = await startSluice(config(name, cluster), { "list.txt": "full:one.test\n" });
  }
  // Subscribed: each member's health shows Redis up.
  for (const s of Object.values(members)) await until("redis up", async () => ((await json(s, "/api/health")).checks as Record<string, string>).redis === "ok");
});
afterAll(async () => {
  for (const s of Object.values(members)) await s.stop();
  await up.close();
  await redis.stop();
});

test("a matcher mode set on A changes answers on B and C within a second, with the same end time", async () => {
  const { a, b, c, x } = members;
  expect(rcodeOf(await query(b.udpPort, "ads.test"))).toBe(3);
  const res = await post(a, "/api/plugins/blocked/mode", { mode: "always_false", duration: "10m" });
  expect(res.status).toBe(200);
  const untilMs = ((await res.json()) as { until_ms: number }).until_ms;
  for (const s of [b, c]) {
    const took = await until("the mode on a peer", async () => rcodeOf(await query(s.udpPort, "ads.test")) !== 3, 1000);
    expect(took).toBeLessThan(1000);
    const status = await json(s, "/api/plugins/blocked/status");
    expect(status).toMatchObject({ mode: "always_false", until_ms: untilMs });
  }
  // Another cluster is not touched.
  expect(rcodeOf(await query(x.udpPort, "ads.test"))).toBe(3);
  expect(await json(x, "/api/plugins/blocked/status")).toMatchObject({ mode: "normal" });
  // Back to normal from C this time.
  await post(c, "/api/plugins/blocked/mode", { mode: "normal" });
  for (const s of [a, b]) await until("normal on a peer", async () => rcodeOf(await query(s.udpPort, "ads.test")) === 3, 1000);
  expect(await counted(a, "own")).toBeGreaterThanOrEqual(1);
  expect(await counted(a, "applied")).toBeGreaterThanOrEqual(1);
  expect(await counted(x, "applied")).toBe(0);
});

test("a provider reload asked on A reloads the same provider on B and C", async () => {
  const { a, b, c } = members;
  for (const s of [a, b, c]) writeFileSync(join(s.dir, "list.txt"), "full:one.test\nfull:two.test\n");
  expect(rcodeOf(await query(b.udpPort, "two.test"))).not.toBe(5);
  const res = await post(a, "/api/plugins/lists/reload");
  expect(res.status).toBe(200);
  for (const s of [b, c]) {
    await until("the reload on a peer", async () => (await json(s, "/api/plugins/lists/reload/status")).rules === 2, 2000);
    expect(rcodeOf(await query(s.udpPort, "two.test"))).toBe(5);
    expect((await json(s, "/api/plugins/lists/reload/status")).reloads).toBe(1);
  }
});

test("a cache flush asked on B empties the caches of A and C", async () => {
  const { a, b, c } = members;
  for (const s of [a, b, c]) await query(s.udpPort, "cached.example");
  const size = async (s: RunningSluice): Promise<number> => (await json(s, "/api/plugins/c/entries")).total_entries as number;
  for (const s of [a, b, c]) expect(await size(s)).toBeGreaterThanOrEqual(1);
  expect((await post(b, "/api/plugins/c/flush")).status).toBe(200);
  for (const s of [a, c]) await until("the flush on a peer", async () => (await size(s)) === 0, 1000);
});

test("anything else on the channel is ignored and counted: junk, unknown plugins, bad modes, unshared events", async () => {
  const { a, b } = members;
  const invalidBefore = await counted(b, "invalid");
  const ignoredBefore = await counted(b, "ignored");
  const send = (m: unknown): string => redis.cli("PUBLISH", "sluice:cluster:lab", typeof m === "string" ? m : JSON.stringify(m));
  send("not json");
  send({ v: 1, from: "z", instance: "z", tag: "blocked" });
  send("x".repeat(9000));
  send({ v: 1, from: "z", instance: "z", tag: "nope", type: "qname", event: { type: "MATCHER.SET_MODE", mode: "always_true", duration_ms: null } });
  send({ v: 1, from: "z", instance: "z", tag: "blocked", type: "domain_set", event: { type: "MATCHER.SET_MODE", mode: "always_true", duration_ms: null } });
  send({ v: 1, from: "z", instance: "z", tag: "blocked", type: "qname", event: { type: "MATCHER.SET_MODE", mode: "sideways", duration_ms: null } });
  send({ v: 1, from: "z", instance: "z", tag: "blocked", type: "qname", event: { type: "MATCHER.SET_MODE", mode: "always_true", duration_ms: 1000, at: Date.now() - 5000 } });
  send({ v: 1, from: "z", instance: "z", tag: "c", type: "cache", event: { type: "CACHE.LOAD", data: [] } });
  await until("counted", async () => (await counted(b, "invalid")) >= invalidBefore + 3 && (await counted(b, "ignored")) >= ignoredBefore + 5, 2000);
  expect(await json(b, "/api/plugins/blocked/status")).toMatchObject({ mode: "normal" });
  expect(await json(a, "/api/plugins/blocked/status")).toMatchObject({ mode: "normal" });
});

test("a cluster section with a bad name or Redis URL is refused at its line", () => {
  const file = join(members.a.dir, "bad.yaml");
  writeFileSync(file, `cluster:\n  name: "has space"\n  redis: "http://x"\nplugins: []\n`);
  expect(checkErrors(file)).toMatch(/bad\.yaml:2:\d+: error: .*name/);
  writeFileSync(file, `cluster:\n  name: lab\n  redis: "http://x"\nplugins: []\n`);
  expect(checkErrors(file)).toMatch(/bad\.yaml:3:\d+: error: cluster\.redis: Redis URL must start with redis:\/\//);
});
