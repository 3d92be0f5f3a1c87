// `reverse_lookup` seen from a client: answer TTLs capped, PTR answered from memory, lookup() for the API.
import { afterEach, expect, test } from "vitest";
import { QTYPE } from "../../src/dns/constants.js";
import { rdataName } from "../../src/dns/rdata.js";
import { replyTo } from "../../src/dns/message.js";
import type { ReverseLookupPlugin } from "../../src/plugins/executors/reverse-lookup.js";
import { answerIps, query, rcodeOf } from "../helpers/dns.js";
import { answerWith, startResponder, type Responder } from "../helpers/responder.js";
import { serversYaml, startSluice, type RunningSluice } from "../helpers/sluice.js";

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** Upstream: A/AAAA answers from `zone` with `ttl`; NXDOMAIN for everything else (PTR included). */
async function upstream(zone: Record<string, string[]>, ttl: number): Promise<Responder> {
  const r = await startResponder((q) => {
    const ips = zone[q.questions[0].name.toLowerCase()];
    if (q.questions[0].type === QTYPE.PTR || ips === undefined) return replyTo(q, 3);
    return answerWith(q, ips, ttl);
  });
  cleanups.push(() => r.close());
  return r;
}

async function sluice(port: number, args: string): Promise<RunningSluice> {
  const s = await startSluice(`plugins:
  - tag: rl
    type: reverse_lookup
    args: ${args}
  - tag: main
    type: sequence
    args:
      - exec: $rl
      - exec: forward 127.0.0.1:${port}
${serversYaml()}`);
  cleanups.push(() => s.stop());
  return s;
}

const instance = (s: RunningSluice): ReverseLookupPlugin => s.app.runtime.live("rl")?.instance as ReverseLookupPlugin;
const v6Reverse = (hex32: string): string => `${[...hex32].reverse().join(".")}.ip6.arpa`;
const metric = async (s: RunningSluice, name: string): Promise<number> => {
  const text = await s.app.services.metrics.text();
  return Number(new RegExp(`^${name}\\{plugin_tag="rl"\\} (\\d+)`, "m").exec(text)?.[1] ?? NaN);
};

test("answer TTLs above the limit are capped in what the client receives; lower ones are kept", async () => {
  const up = await upstream({ "long.example": ["192.0.2.10", "2001:db8::10"], "short.example": ["192.0.2.11"] }, 86400);
  const s = await sluice(up.port, "{ ttl: 60 }");
  const long = await query(s.udpPort, "long.example");
  expect(answerIps(long)).toEqual(["192.0.2.10", "2001:db8::10"]);
  expect(long.answers.map((a) => a.ttl)).toEqual([60, 60]);
  const up2 = await upstream({ "short.example": ["192.0.2.11"] }, 30);
  const s2 = await sluice(up2.port, "{ ttl: 60 }");
  expect((await query(s2.udpPort, "short.example")).answers.map((a) => a.ttl)).toEqual([30]);
});

test("with handle_ptr, a PTR for a remembered address is answered locally (TTL 5) without asking upstream", async () => {
  const up = await upstream({ "www.example": ["192.0.2.10", "2001:db8::10"] }, 300);
  const s = await sluice(up.port, "{ handle_ptr: true }");
  await query(s.udpPort, "WWW.Example");
  const ptr = await query(s.udpPort, "10.2.0.192.in-addr.arpa", "PTR");
  expect(rcodeOf(ptr)).toBe(0);
  expect(ptr.answers).toHaveLength(1);
  expect(ptr.answers[0].type).toBe(QTYPE.PTR);
  expect(ptr.answers[0].ttl).toBe(5);
  expect(rdataName(ptr.answers[0].data)).toBe("www.example");
  const ptr6 = await query(s.udpPort, v6Reverse("20010db8000000000000000000000010"), "PTR");
  expect(rdataName(ptr6.answers[0].data)).toBe("www.example");
  // Only the A query reached the upstream.
  expect(up.seen.map((x) => x.query.questions[0].type)).toEqual([QTYPE.A]);
  // An address never seen goes upstream as usual.
  expect(rcodeOf(await query(s.udpPort, "99.2.0.192.in-addr.arpa", "PTR"))).toBe(3);
  expect(await metric(s, "reverse_lookup_ptr_hit_total")).toBe(2);
  expect(await metric(s, "reverse_lookup_ptr_miss_total")).toBe(1);
  expect(await metric(s, "reverse_lookup_cache_insert_total")).toBe(2);
  expect(await metric(s, "reverse_lookup_cache_entries")).toBe(2);
});

test("without handle_ptr, PTR queries still go upstream", async () => {
  const up = await upstream({ "www.example": ["192.0.2.10"] }, 300);
  const s = await sluice(up.port, "{}");
  await query(s.udpPort, "www.example");
  expect(rcodeOf(await query(s.udpPort, "10.2.0.192.in-addr.arpa", "PTR"))).toBe(3);
  expect(up.seen).toHaveLength(2);
});

test("lookup() gives the FQDN for an address (IPv4-mapped folded), null when unknown", async () => {
  const up = await upstream({ "api.example": ["192.0.2.20", "2001:db8::20"] }, 300);
  const s = await sluice(up.port, "null");
  await query(s.udpPort, "api.example");
  const rl = instance(s);
  expect(rl.lookup("192.0.2.20")).toBe("api.example.");
  expect(rl.lookup("::ffff:192.0.2.20")).toBe("api.example.");
  expect(rl.lookup("2001:db8::20")).toBe("api.example.");
  expect(rl.lookup("192.0.2.21")).toBeNull();
  expect(() => rl.lookup("not-an-ip")).toThrow(/not an IP address/);
});

test("remembered names expire with the (capped) TTL", async () => {
  const up = await upstream({ "brief.example": ["192.0.2.30"] }, 300);
  const s = await sluice(up.port, "{ ttl: 1, handle_ptr: true }");
  await query(s.udpPort, "brief.example");
  expect(instance(s).lookup("192.0.2.30")).toBe("brief.example.");
  await new Promise((r) => setTimeout(r, 1100));
  expect(instance(s).lookup("192.0.2.30")).toBeNull();
  expect(rcodeOf(await query(s.udpPort, "30.2.0.192.in-addr.arpa", "PTR"))).toBe(3);
});

test("the memory is bounded by size: the least recently used address goes first", async () => {
  const up = await upstream({ "a.example": ["192.0.2.1"], "b.example": ["192.0.2.2"], "c.example": ["192.0.2.3"] }, 300);
  const s = await sluice(up.port, "{ size: 2 }");
  await query(s.udpPort, "a.example");
  await query(s.udpPort, "b.example");
  expect(instance(s).lookup("192.0.2.1")).toBe("a.example."); // a is now the most recent
  await query(s.udpPort, "c.example");
  expect(instance(s).lookup("192.0.2.2")).toBeNull();
  expect(instance(s).lookup("192.0.2.1")).toBe("a.example.");
  expect(instance(s).lookup("192.0.2.3")).toBe("c.example.");
  expect(await metric(s, "reverse_lookup_cache_entries")).toBe(2);
});
