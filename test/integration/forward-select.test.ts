// forward's response_selection over real UDP upstreams on 127.0.0.1 with controlled answers and
// delays: balanced (round robin among the idle, least in flight first, a failing upstream set aside
// for a while that the test moves with services.clockShift), prefer_positive (a later positive
// answer beats an early NXDOMAIN/NODATA; the first negative when nothing is positive) and consensus
// (a majority of the wave decides; no majority is SERVFAIL and counted).
import { afterEach, expect, test } from "vitest";
import { answerIps, query, rcodeOf } from "../helpers/dns.js";
import { metricValue } from "../helpers/proc.js";
import { answerBytes, startRawUpstream, type RawHandlers, type RawUpstream } from "../helpers/raw-upstream.js";
import { deadUdpPort } from "../helpers/responder.js";
import { serversYaml, startSluice, type RunningSluice } from "../helpers/sluice.js";

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function raw(handlers: RawHandlers): Promise<RawUpstream> {
  const r = await startRawUpstream(handlers);
  cleanups.push(() => r.close());
  return r;
}

/** An upstream answering every query with `ips` (rcode, after `delayMs`). */
const fixed = (ips: string[], opts: { rcode?: number; delayMs?: number; ttl?: number } = {}): Promise<RawUpstream> =>
  raw({ udp: (msg, reply) => void setTimeout(() => reply(answerBytes(msg, { ips, rcode: opts.rcode ?? 0, ttl: opts.ttl })), opts.delayMs ?? 0) });

async function sluice(args: string, opts: { clockShift?: { ms: number }; api?: boolean } = {}): Promise<RunningSluice> {
  const api = opts.api ? `api: { http: "127.0.0.1:0" }\n` : "";
  const s = await startSluice(`${api}plugins:\n  - tag: fwd\n    type: forward\n    args:\n${args}\n  - tag: main\n    type: sequence\n    args: [{ exec: $fwd }]\n${serversYaml()}`, {}, opts);
  cleanups.push(() => s.stop());
  return s;
}

const upstreams = (...ups: { port: number; tag: string }[]): string => `      upstreams:\n${ups.map((u) => `        - { addr: "127.0.0.1:${u.port}", tag: ${u.tag} }`).join("\n")}`;

const waitFor = async (what: string, cond: () => boolean): Promise<void> => {
  const deadline = performance.now() + 3000;
  while (!cond()) {
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
};

test("concurrent goes up to 32: with five upstreams, every query asks all five at once", async () => {
  const ups = await Promise.all([1, 2, 3, 4, 5].map((n) => fixed([`192.0.2.${n}`], { delayMs: n === 5 ? 0 : 200 })));
  const s = await sluice(`      concurrent: 32\n${upstreams(...ups.map((u, i) => ({ port: u.port, tag: `u${i}` })))}`);
  for (let i = 0; i < 3; i++) expect(answerIps(await query(s.udpPort, `wide${i}.example`))).toEqual(["192.0.2.5"]);
  expect(ups.map((u) => u.udpReceived.length)).toEqual([3, 3, 3, 3, 3]);
});

test("balanced, one at a time: queries are spread round robin over idle upstreams", async () => {
  const ups = await Promise.all(["192.0.2.1", "192.0.2.2", "192.0.2.3"].map((ip) => fixed([ip])));
  const s = await sluice(`      response_selection: balanced\n${upstreams(...ups.map((u, i) => ({ port: u.port, tag: `u${i}` })))}`);
  for (let i = 0; i < 30; i++) expect(answerIps(await query(s.udpPort, `rr${i}.example`))).toHaveLength(1);
  expect(ups.map((u) => u.udpReceived.length)).toEqual([10, 10, 10]);
});

test("balanced: a busy upstream is passed over for one with nothing in flight", async () => {
  const held: (() => void)[] = [];
  const busy = await raw({ udp: (msg, reply) => void held.push(() => reply(answerBytes(msg, { ips: ["192.0.2.10"] }))) });
  const idle = await fixed(["192.0.2.20"]);
  const s = await sluice(`      response_selection: balanced\n${upstreams({ port: busy.port, tag: "busy" }, { port: idle.port, tag: "idle" })}`);
  const waiting: Promise<unknown>[] = [];
  for (let k = 1; k <= 6; k++) {
    const before = busy.udpReceived.length;
    const answer = query(s.udpPort, `lo${k}.example`, "A", { timeoutMs: 4000 });
    await waitFor(`query ${k} to reach an upstream`, () => busy.udpReceived.length + idle.udpReceived.length === k);
    if (busy.udpReceived.length > before) waiting.push(answer);
    else expect(answerIps(await answer)).toEqual(["192.0.2.20"]);
  }
  // Round robin alone would have sent three of six there; least-in-flight sends one.
  expect(busy.udpReceived).toHaveLength(1);
  for (const release of held) release();
  await Promise.all(waiting);
});

test("balanced: a failing upstream is set aside (the query fails over within its time) and tried again once its time out is over", async () => {
  const clock = { ms: 0 };
  const dead = await deadUdpPort();
  const good = await Promise.all(["192.0.2.1", "192.0.2.2"].map((ip) => fixed([ip])));
  const s = await sluice(`      response_selection: balanced\n${upstreams({ port: dead, tag: "dead" }, { port: good[0].port, tag: "a" }, { port: good[1].port, tag: "b" })}`, { clockShift: clock, api: true });
  const deadAsked = async (): Promise<number> => metricValue(await (await s.api("/api/metrics")).text(), "forward_upstream_query_total", `plugin_tag="fwd",upstream="dead"`);
  for (let i = 0; i < 12; i++) expect(rcodeOf(await query(s.udpPort, `skip${i}.example`))).toBe(0);
  // Asked once (refused at once, the query went on to the next), then passed over.
  expect(await deadAsked()).toBe(1);
  expect(good[0].udpReceived.length + good[1].udpReceived.length).toBe(12);
  clock.ms += 1_500;
  for (let i = 0; i < 6; i++) expect(rcodeOf(await query(s.udpPort, `again${i}.example`))).toBe(0);
  // After its second failure it waits 2 s, not 1 s.
  expect(await deadAsked()).toBe(2);
  clock.ms += 1_500;
  for (let i = 0; i < 6; i++) expect(rcodeOf(await query(s.udpPort, `still${i}.example`))).toBe(0);
  expect(await deadAsked()).toBe(2);
});

test("prefer_positive: a later answer with records beats an early NXDOMAIN or NODATA; fastest serves the early one", async () => {
  for (const negative of [{ ips: [], rcode: 3 }, { ips: [], rcode: 0 }]) {
    const early = await fixed(negative.ips, { rcode: negative.rcode });
    const late = await fixed(["192.0.2.99"], { delayMs: 150 });
    const both = upstreams({ port: early.port, tag: "early" }, { port: late.port, tag: "late" });
    const positive = await sluice(`      response_selection: prefer_positive\n      concurrent: 2\n${both}`);
    const started = performance.now();
    const m = await query(positive.udpPort, "maybe.example");
    expect(answerIps(m)).toEqual(["192.0.2.99"]);
    expect(performance.now() - started).toBeGreaterThanOrEqual(140);
    const fastest = await sluice(`      concurrent: 2\n${both}`);
    const f = await query(fastest.udpPort, "maybe.example");
    expect([rcodeOf(f), answerIps(f)]).toEqual([negative.rcode, []]);
  }
});

test("prefer_positive: with no positive answer the first negative one is served, after every upstream asked has answered", async () => {
  const nx = await fixed([], { rcode: 3 });
  const nodata = await fixed([], { delayMs: 100 });
  const s = await sluice(`      response_selection: prefer_positive\n      concurrent: 2\n${upstreams({ port: nx.port, tag: "nx" }, { port: nodata.port, tag: "nodata" })}`);
  const started = performance.now();
  expect(rcodeOf(await query(s.udpPort, "gone.example"))).toBe(3);
  expect(performance.now() - started).toBeGreaterThanOrEqual(90);
  expect(nodata.udpReceived).toHaveLength(1);
});

test("consensus: the answer two of three upstreams agree on wins over a faster odd one out; order and TTLs do not matter", async () => {
  const poisoned = await fixed(["203.0.113.66"]);
  const honest = await fixed(["192.0.2.1", "192.0.2.2"], { delayMs: 40, ttl: 60 });
  const honestToo = await fixed(["192.0.2.2", "192.0.2.1"], { delayMs: 80, ttl: 3600 });
  const s = await sluice(`      response_selection: consensus\n      concurrent: 3\n${upstreams({ port: poisoned.port, tag: "p" }, { port: honest.port, tag: "h1" }, { port: honestToo.port, tag: "h2" })}`);
  for (let i = 0; i < 3; i++) expect(answerIps(await query(s.udpPort, `vote${i}.example`)).sort()).toEqual(["192.0.2.1", "192.0.2.2"]);
});

test("consensus: no majority is SERVFAIL, counted in forward_no_consensus_total; NXDOMAIN votes like any verdict", async () => {
  const a = await fixed(["192.0.2.1"]);
  const b = await fixed(["192.0.2.2"]);
  const nx = await raw({ udp: (msg, reply) => reply(answerBytes(msg, { ips: [], rcode: 3 })) });
  const nxToo = await raw({ udp: (msg, reply) => void setTimeout(() => reply(answerBytes(msg, { ips: [], rcode: 3 })), 30) });
  const split = await sluice(`      response_selection: consensus\n      concurrent: 3\n${upstreams({ port: a.port, tag: "a" }, { port: b.port, tag: "b" }, { port: nx.port, tag: "nx" })}`, { api: true });
  expect(rcodeOf(await query(split.udpPort, "split.example"))).toBe(2);
  expect(metricValue(await (await split.api("/api/metrics")).text(), "forward_no_consensus_total", `plugin_tag="fwd"`)).toBe(1);
  const gone = await sluice(`      response_selection: consensus\n      concurrent: 3\n${upstreams({ port: a.port, tag: "a" }, { port: nx.port, tag: "nx" }, { port: nxToo.port, tag: "nx2" })}`);
  expect(rcodeOf(await query(gone.udpPort, "gone.example"))).toBe(3);
});

test("consensus: an upstream that fails is replaced by one not asked yet, so two can still agree", async () => {
  const dead = await deadUdpPort();
  const ups = await Promise.all([fixed(["192.0.2.7"]), fixed(["192.0.2.7"], { delayMs: 20 })]);
  const s = await sluice(`      response_selection: consensus\n      concurrent: 2\n${upstreams({ port: dead, tag: "dead" }, { port: ups[0].port, tag: "a" }, { port: ups[1].port, tag: "b" })}`);
  for (let i = 0; i < 6; i++) expect(answerIps(await query(s.udpPort, `fo${i}.example`))).toEqual(["192.0.2.7"]);
});
