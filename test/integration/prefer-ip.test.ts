// `prefer_ipv4` / `prefer_ipv6` seen from a client and from the upstream: the other family is answered
// empty when the preferred one exists, learned by a probe and then served from the cache without
// asking the upstream; names with only the other family are left alone; a slow probe gets 500 ms.
import { afterAll, beforeAll, expect, test } from "vitest";
import { QTYPE, RCODE, typeName } from "../../src/dns/constants.js";
import type { Message } from "../../src/dns/message.js";
import { syntheticSoa } from "../../src/dns/rdata.js";
import { answerIps, query, rcodeOf } from "../helpers/dns.js";
import { answerWith, startResponder, type Responder } from "../helpers/responder.js";
import { serversYaml, startSluice, type RunningSluice } from "../helpers/sluice.js";

const SLOW_A_MS = 900;

/** The first label says which families the name has: dual, v4only, v6only, slowa (A answered late). */
async function upstreamAnswer(q: Message): Promise<Message> {
  const { name, type } = q.questions[0];
  const kind = name.split(".")[0];
  const has4 = kind === "dual" || kind === "v4only" || kind === "slowa";
  const has6 = kind === "dual" || kind === "v6only" || kind === "slowa";
  if (type === QTYPE.A && kind === "slowa") await new Promise((r) => setTimeout(r, SLOW_A_MS));
  if (type === QTYPE.A && has4) return answerWith(q, ["192.0.2.1"]);
  if (type === QTYPE.AAAA && has6) return answerWith(q, ["2001:db8::1"]);
  const nodata = answerWith(q, []);
  nodata.authorities = [syntheticSoa("test", 60)];
  return nodata;
}

let upstream: Responder;
let s: RunningSluice;
/** "<name> <type>" of each query the upstream got since the last call, sorted. */
let seenFrom = 0;
const askedUpstream = (): string[] => {
  const out = upstream.seen.slice(seenFrom).map((x) => `${x.query.questions[0].name} ${typeName(x.query.questions[0].type)}`);
  seenFrom = upstream.seen.length;
  return out.sort();
};

beforeAll(async () => {
  upstream = await startResponder(upstreamAnswer);
  s = await startSluice(`
plugins:
  - tag: p4_nocache
    type: prefer_ipv4
    args: { cache: false }
  - tag: main
    type: sequence
    args:
      - { matches: "qname domain:p4.test", exec: prefer_ipv4 }
      - { matches: "qname domain:p6.test", exec: prefer_ipv6 }
      - { matches: "qname domain:nocache.test", exec: $p4_nocache }
      - exec: forward 127.0.0.1:${upstream.port}
${serversYaml()}
`);
});
afterAll(async () => {
  await s.stop();
  await upstream.close();
});

const isEmptyNoerror = (m: Message): boolean => rcodeOf(m) === RCODE.NOERROR && m.answers.length === 0;

test("prefer_ipv4: AAAA for a dual-stack name is answered empty; the upstream got the AAAA and an A probe", async () => {
  askedUpstream();
  const m = await query(s.udpPort, "dual.p4.test", "AAAA");
  expect(isEmptyNoerror(m)).toBe(true);
  expect(m.questions[0]).toMatchObject({ name: "dual.p4.test", type: QTYPE.AAAA });
  // A placeholder SOA lets the client cache the absence for a while.
  expect(m.authorities.map((r) => [r.type, r.ttl])).toEqual([[QTYPE.SOA, 300]]);
  expect(askedUpstream()).toEqual(["dual.p4.test A", "dual.p4.test AAAA"]);
});

test("prefer_ipv4: the second time the answer comes from the cache, with no upstream query at all", async () => {
  askedUpstream();
  const m = await query(s.tcpPort, "dual.p4.test", "AAAA", { tcp: true });
  expect(isEmptyNoerror(m)).toBe(true);
  expect(askedUpstream()).toEqual([]);
});

test("prefer_ipv4: A queries pass through, and an A answer teaches the cache", async () => {
  askedUpstream();
  expect(answerIps(await query(s.udpPort, "dual.learn.p4.test", "A"))).toEqual(["192.0.2.1"]);
  expect(askedUpstream()).toEqual(["dual.learn.p4.test A"]);
  expect(isEmptyNoerror(await query(s.udpPort, "dual.learn.p4.test", "AAAA"))).toBe(true);
  expect(askedUpstream()).toEqual([]);
});

test("prefer_ipv4: a name with no IPv4 keeps its AAAA answer, and later AAAA queries are not probed again", async () => {
  askedUpstream();
  expect(answerIps(await query(s.udpPort, "v6only.p4.test", "AAAA"))).toEqual(["2001:db8::1"]);
  expect(askedUpstream()).toEqual(["v6only.p4.test A", "v6only.p4.test AAAA"]);
  expect(answerIps(await query(s.udpPort, "v6only.p4.test", "AAAA"))).toEqual(["2001:db8::1"]);
  expect(askedUpstream()).toEqual(["v6only.p4.test AAAA"]);
});

test("prefer_ipv6 is the mirror: A for a dual-stack name is empty, A for an IPv4-only name is answered", async () => {
  askedUpstream();
  expect(isEmptyNoerror(await query(s.udpPort, "dual.p6.test", "A"))).toBe(true);
  expect(askedUpstream()).toEqual(["dual.p6.test A", "dual.p6.test AAAA"]);
  expect(isEmptyNoerror(await query(s.udpPort, "dual.p6.test", "A"))).toBe(true);
  expect(askedUpstream()).toEqual([]);
  expect(answerIps(await query(s.udpPort, "v4only.p6.test", "A"))).toEqual(["192.0.2.1"]);
  expect(answerIps(await query(s.udpPort, "dual.p6.test", "AAAA"))).toEqual(["2001:db8::1"]);
});

test("other query types go upstream once, without a probe", async () => {
  askedUpstream();
  const m = await query(s.udpPort, "dual.p4.test", "MX");
  expect(rcodeOf(m)).toBe(0);
  expect(m.answers).toEqual([]);
  expect(askedUpstream()).toEqual(["dual.p4.test MX"]);
});

test("a probe slower than 500 ms does not hold the answer; once it lands, the cache has it", async () => {
  askedUpstream();
  const started = performance.now();
  const m = await query(s.udpPort, "slowa.p4.test", "AAAA");
  const took = performance.now() - started;
  expect(answerIps(m)).toEqual(["2001:db8::1"]);
  expect(took).toBeGreaterThanOrEqual(450);
  expect(took).toBeLessThan(SLOW_A_MS);
  await new Promise((r) => setTimeout(r, SLOW_A_MS - took + 200));
  askedUpstream();
  expect(isEmptyNoerror(await query(s.udpPort, "slowa.p4.test", "AAAA"))).toBe(true);
  expect(askedUpstream()).toEqual([]);
});

test("with cache: false every AAAA query probes again", async () => {
  askedUpstream();
  expect(isEmptyNoerror(await query(s.udpPort, "dual.nocache.test", "AAAA"))).toBe(true);
  expect(isEmptyNoerror(await query(s.udpPort, "dual.nocache.test", "AAAA"))).toBe(true);
  expect(askedUpstream()).toEqual(["dual.nocache.test A", "dual.nocache.test A", "dual.nocache.test AAAA", "dual.nocache.test AAAA"]);
});

test("suppressed answers and probes are counted per plugin", async () => {
  const text = await s.app.services.metrics.registry.metrics();
  const value = (name: string): number => Number(new RegExp(`^${name}\\{plugin_tag="p4_nocache"\\} (\\d+)$`, "m").exec(text)?.[1] ?? -1);
  // The cache: false test above: two AAAA queries, each probed and suppressed.
  expect(value("prefer_ip_suppressed_total")).toBe(2);
  expect(value("prefer_ip_probe_total")).toBe(2);
});
