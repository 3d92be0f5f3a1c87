// The cache seen by a DNS client: hits, TTL countdown, 0x20 echo, key separation, negative caching,
// what is never cached, TTL caps and short_circuit.

import { afterEach, expect, test } from "vitest";
import { QTYPE, RCODE } from "../../src/dns/constants.js";
import { encodeEcs, subnetFor } from "../../src/dns/ecs.js";
import { parseIP } from "../../src/dns/ip.js";
import { decodeMessage, encodeMessage, replyTo, type Message } from "../../src/dns/message.js";
import { ConfigError } from "../../src/config/diagnostics.js";
import { answerIps, query, buildQuery, rcodeOf, udpExchange } from "../helpers/dns.js";
import { answerWith, type Responder } from "../helpers/responder.js";
import { serversYaml, startSluice, type RunningSluice } from "../helpers/sluice.js";
import { asked, cacheSluice, negative, upstream } from "./cache-helpers.js";

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** The cache ages by `clock`: a test moves it instead of waiting out TTLs. */
async function setup(cacheArgs: string, handler?: Parameters<typeof upstream>[0], after = ""): Promise<{ up: Responder; s: RunningSluice; clock: { ms: number } }> {
  const up = await upstream(handler);
  cleanups.push(() => up.close());
  const clock = { ms: 0 };
  const s = await cacheSluice(cacheArgs, up.port, after, clock);
  cleanups.push(() => s.stop());
  return { up, s, clock };
}

test("a repeated question is answered from the cache with the asker's ID and TTLs that count down", async () => {
  const { up, s, clock } = await setup("{}");
  const first = await query(s.udpPort, "hit.example", "A", { id: 0x1111 });
  expect(first.answers[0].ttl).toBe(300);
  expect(asked(up, "hit.example")).toBe(1);
  clock.ms += 1100;
  const second = await query(s.udpPort, "hit.example", "A", { id: 0x2222 });
  expect(asked(up, "hit.example")).toBe(1);
  expect(second.id).toBe(0x2222);
  expect(answerIps(second)).toEqual(["192.0.2.1"]);
  expect(second.answers[0].ttl).toBeLessThanOrEqual(299);
  expect(second.answers[0].ttl).toBeGreaterThanOrEqual(295);
  // Over TCP the same entry answers too.
  const overTcp = await query(s.tcpPort, "hit.example", "A", { tcp: true });
  expect(answerIps(overTcp)).toEqual(["192.0.2.1"]);
  expect(asked(up, "hit.example")).toBe(1);
});

test("a hit echoes the asker's letter case (0x20) in the question and in compressed owner names", async () => {
  const { up, s } = await setup("{}");
  await query(s.udpPort, "MiXeD.Case.example");
  const hit = await query(s.udpPort, "mIxEd.cASE.EXAMPLE");
  expect(asked(up, "mixed.case.example")).toBe(1);
  expect(hit.questions[0].name).toBe("mIxEd.cASE.EXAMPLE");
  expect(hit.answers[0].name).toBe("mIxEd.cASE.EXAMPLE");
});

test("DO, CD and EDNS presence keep separate entries; ECS does only with ecs_in_key", async () => {
  const { up, s } = await setup("{ ecs_in_key: true }");
  const cd = (packet: Buffer): Buffer => {
    packet[3] |= 0x10;
    return packet;
  };
  const ecs = (ip: string, prefix: number) => ({ edns: { options: [{ code: 8, data: encodeEcs(subnetFor(parseIP(ip) as Uint8Array, prefix)) }] } });
  const variants = (): Buffer[] => [
    buildQuery("keys.example", "A"),
    buildQuery("keys.example", "A", { edns: 1232 }),
    buildQuery("keys.example", "A", { dnssecOk: true }),
    cd(buildQuery("keys.example", "A")),
    buildQuery("keys.example", "A", ecs("198.51.100.1", 24)),
    buildQuery("keys.example", "A", ecs("203.0.113.1", 24)),
    buildQuery("keys.example", "AAAA"),
  ];
  for (const p of variants()) expect(await udpExchange(s.udpPort, p)).not.toBeNull();
  expect(asked(up, "keys.example")).toBe(7);
  for (const p of variants()) expect(await udpExchange(s.udpPort, p)).not.toBeNull();
  expect(asked(up, "keys.example")).toBe(7);
  // Same /24, other host bits: the same entry.
  expect(await udpExchange(s.udpPort, buildQuery("keys.example", "A", ecs("198.51.100.77", 24)))).not.toBeNull();
  expect(asked(up, "keys.example")).toBe(7);
  // An answer to a query without EDNS carries no OPT record, even after EDNS queries were cached.
  const plain = decodeMessage((await udpExchange(s.udpPort, buildQuery("keys.example", "A"))) as Buffer);
  expect(plain.edns).toBeNull();
});

test("without ecs_in_key clients in different subnets share one entry; per-client EDNS options are not replayed", async () => {
  const echoOptions = (q: Message): Message => {
    const reply = answerWith(q, ["192.0.2.1"], 300);
    // Echo the client's ECS (scope 24) and answer its cookie, as a real upstream would.
    const ecsOpt = q.edns?.options.find((o) => o.code === 8);
    const ecsReply = ecsOpt ? Buffer.from(ecsOpt.data) : null;
    if (ecsReply) ecsReply[3] = 24;
    if (reply.edns) reply.edns.options = [{ code: 10, data: Buffer.from("0123456789abcdefSERVERCK") }, ...(ecsReply ? [{ code: 8, data: ecsReply }] : []), { code: 3, data: Buffer.from("ns1") }];
    return reply;
  };
  const query = (ip: string): Buffer =>
    buildQuery("shared.example", "A", { edns: { options: [{ code: 10, data: Buffer.from("clientck") }, { code: 8, data: encodeEcs(subnetFor(parseIP(ip) as Uint8Array, 24)) }] } });
  const { up, s } = await setup("{}", echoOptions);
  const first = decodeMessage((await udpExchange(s.udpPort, query("198.51.100.1"))) as Buffer);
  expect(first.edns?.options.map((o) => o.code)).toEqual([10, 8, 3]);
  const second = decodeMessage((await udpExchange(s.udpPort, query("203.0.113.1"))) as Buffer);
  expect(asked(up, "shared.example")).toBe(1);
  // Neither the first client's cookie nor its subnet reaches the second; NSID stays.
  expect(second.edns?.options.map((o) => o.code)).toEqual([3]);
  expect(answerIps(second)).toEqual(["192.0.2.1"]);
  // With ecs_in_key the subnet belongs to the entry, so the ECS option is kept (the cookie is not).
  const keyed = await setup("{ ecs_in_key: true }", echoOptions);
  await udpExchange(keyed.s.udpPort, query("198.51.100.1"));
  const again = decodeMessage((await udpExchange(keyed.s.udpPort, query("198.51.100.200"))) as Buffer);
  expect(asked(keyed.up, "shared.example")).toBe(1);
  expect(again.edns?.options.map((o) => o.code)).toEqual([8, 3]);
});

test("NXDOMAIN is cached for min(SOA TTL, MINIMUM) and the cap max_negative_ttl applies", async () => {
  const { up, s, clock } = await setup("{ max_negative_ttl: 5 }", (q) => {
    const name = q.questions[0].name;
    if (name === "short.neg.example") return negative(q, RCODE.NXDOMAIN, 3600, 2);
    return negative(q, RCODE.NXDOMAIN, 3600, 3600);
  });
  const a = await query(s.udpPort, "short.neg.example");
  expect(rcodeOf(a)).toBe(RCODE.NXDOMAIN);
  const b = await query(s.udpPort, "short.neg.example");
  expect(rcodeOf(b)).toBe(RCODE.NXDOMAIN);
  expect(asked(up, "short.neg.example")).toBe(1);
  expect(b.authorities[0].type).toBe(QTYPE.SOA);
  expect(b.authorities[0].ttl).toBeLessThanOrEqual(2);
  await query(s.udpPort, "capped.neg.example");
  const capped = await query(s.udpPort, "capped.neg.example");
  expect(asked(up, "capped.neg.example")).toBe(1);
  expect(capped.authorities[0].ttl).toBeLessThanOrEqual(5);
  expect(capped.authorities[0].ttl).toBeGreaterThanOrEqual(4);
  clock.ms += 2100;
  await query(s.udpPort, "short.neg.example");
  expect(asked(up, "short.neg.example")).toBe(2);
  await query(s.udpPort, "capped.neg.example");
  expect(asked(up, "capped.neg.example")).toBe(1);
});

test("NODATA (NOERROR without answers) is cached as a negative answer", async () => {
  const { up, s } = await setup("{}", (q) => negative(q, RCODE.NOERROR, 60, 30));
  await query(s.udpPort, "nodata.example", "AAAA");
  const hit = await query(s.udpPort, "nodata.example", "AAAA");
  expect(asked(up, "nodata.example")).toBe(1);
  expect(rcodeOf(hit)).toBe(RCODE.NOERROR);
  expect(hit.answers).toHaveLength(0);
  expect(hit.authorities[0].ttl).toBeLessThanOrEqual(30);
});

test("a negative answer without SOA is kept for negative_ttl_without_soa seconds", async () => {
  const { up, s, clock } = await setup("{ negative_ttl_without_soa: 1 }", (q) => negative(q, RCODE.NXDOMAIN, null));
  await query(s.udpPort, "nosoa.example");
  await query(s.udpPort, "nosoa.example");
  expect(asked(up, "nosoa.example")).toBe(1);
  clock.ms += 1100;
  await query(s.udpPort, "nosoa.example");
  expect(asked(up, "nosoa.example")).toBe(2);
});

test("negative_ttl_without_soa: 0 and cache_negative: false disable negative caching", async () => {
  const { up, s } = await setup("{ negative_ttl_without_soa: 0 }", (q) => negative(q, RCODE.NXDOMAIN, null));
  await query(s.udpPort, "nosoa.example");
  await query(s.udpPort, "nosoa.example");
  expect(asked(up, "nosoa.example")).toBe(2);
  const off = await setup("{ cache_negative: false }", (q) => negative(q, RCODE.NXDOMAIN, 3600, 3600));
  await query(off.s.udpPort, "soa.example");
  await query(off.s.udpPort, "soa.example");
  expect(asked(off.up, "soa.example")).toBe(2);
});

test("SERVFAIL, REFUSED and truncated answers are never cached", async () => {
  const { up, s } = await setup("{}", (q) => {
    const name = q.questions[0].name;
    if (name === "servfail.example") return replyTo(q, RCODE.SERVFAIL);
    if (name === "refused.example") return replyTo(q, RCODE.REFUSED);
    // Truncated over UDP and (oddly) over TCP too, so the client really receives TC.
    const wire = encodeMessage(answerWith(q, ["192.0.2.9"], 300));
    wire[2] |= 0x02;
    return wire;
  });
  for (const name of ["servfail.example", "refused.example"]) {
    await query(s.udpPort, name);
    await query(s.udpPort, name);
    expect(asked(up, name)).toBe(2);
  }
  const tc = await query(s.udpPort, "tc.example");
  expect(tc.flags & 0x0200).toBe(0x0200);
  const before = asked(up, "tc.example");
  await query(s.udpPort, "tc.example");
  expect(asked(up, "tc.example")).toBeGreaterThan(before);
});

test("an answer with TTL 0 is passed through but not cached", async () => {
  const { up, s } = await setup("{}", (q) => answerWith(q, ["192.0.2.3"], 0));
  await query(s.udpPort, "zero.example");
  await query(s.udpPort, "zero.example");
  expect(asked(up, "zero.example")).toBe(2);
});

test("max_positive_ttl caps the lifetime and the TTLs a hit reports", async () => {
  const { up, s } = await setup("{ max_positive_ttl: 60 }", (q) => answerWith(q, ["192.0.2.4", "192.0.2.5"], 3600));
  await query(s.udpPort, "capped.example");
  const hit = await query(s.udpPort, "capped.example");
  expect(asked(up, "capped.example")).toBe(1);
  for (const rr of hit.answers) {
    expect(rr.ttl).toBeLessThanOrEqual(60);
    expect(rr.ttl).toBeGreaterThanOrEqual(59);
  }
});

test("short_circuit ends the sequence on a hit; without it the following rules still run", async () => {
  const slow = "      - exec: sleep 1000";
  const plain = await setup("{}", undefined, slow);
  const sc = await setup("{ short_circuit: true }", undefined, slow);
  for (const { s } of [plain, sc]) await query(s.udpPort, "sc.example", "A", { timeoutMs: 4000 });
  let started = performance.now();
  await query(plain.s.udpPort, "sc.example", "A", { timeoutMs: 4000 });
  expect(performance.now() - started).toBeGreaterThanOrEqual(950);
  started = performance.now();
  await query(sc.s.udpPort, "sc.example", "A", { timeoutMs: 4000 });
  expect(performance.now() - started).toBeLessThan(800);
  expect(asked(plain.up, "sc.example")).toBe(1);
  expect(asked(sc.up, "sc.example")).toBe(1);
});

test("quick setup `cache short_circuit` works; other parameters and bad args are config errors", async () => {
  const up = await upstream();
  cleanups.push(() => up.close());
  const s = await startSluice(`plugins:
  - tag: main
    type: sequence
    args:
      - exec: cache short_circuit
      - exec: forward 127.0.0.1:${up.port}
${serversYaml()}`);
  cleanups.push(() => s.stop());
  await query(s.udpPort, "quick.example");
  await query(s.udpPort, "quick.example");
  expect(asked(up, "quick.example")).toBe(1);
  const bad = async (yaml: string): Promise<string> => {
    const err: unknown = await startSluice(`plugins:\n${yaml}\n${serversYaml()}`).then(
      async (x) => {
        await x.stop();
        return null;
      },
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(ConfigError);
    return (err as Error).message;
  };
  const seq = (exec: string) => `  - tag: main\n    type: sequence\n    args: [{ exec: "${exec}" }]`;
  expect(await bad(seq("cache size=10"))).toMatch(/short_circuit/);
  expect(await bad(seq("cache short_circuit=maybe"))).toMatch(/short_circuit/);
  expect(await bad(`  - tag: c\n    type: cache\n    args: { size: 0 }\n${seq("$c")}`)).toMatch(/size/);
  expect(await bad(`  - tag: c\n    type: cache\n    args: { dump_file: c.dump, dump_interval: 0 }\n${seq("$c")}`)).toMatch(/dump_interval/);
});
