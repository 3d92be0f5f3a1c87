// `ttl` and `drop_resp` seen from a client: upstream TTLs fixed or clamped in every section (OPT
// untouched), the RFC 2181 top-bit rule, no response left alone; drop_resp lets a later rule answer.
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { QTYPE } from "../../src/dns/constants.js";
import type { Message, ResourceRecord } from "../../src/dns/message.js";
import { addressRecord, syntheticSoa } from "../../src/dns/rdata.js";
import { answerIps, query, rcodeOf } from "../helpers/dns.js";
import { answerWith, startResponder, type Responder } from "../helpers/responder.js";
import { serversYaml, startSluice, type RunningSluice } from "../helpers/sluice.js";

const ip = (a: number): Uint8Array => Uint8Array.from([192, 0, 2, a]);

/** Answer TTLs 5, 300, 100000 and 0x90000000; authority SOA 7; additional A 50. */
function upstreamAnswer(query: Message): Message {
  const name = query.questions[0].name;
  const reply = answerWith(query, []);
  reply.answers = [5, 300, 100_000, 0x9000_0000].map((t, i): ResourceRecord => addressRecord(name, ip(i + 1), t));
  reply.authorities = [syntheticSoa("test", 7)];
  reply.additionals = [addressRecord("ns.test", ip(53), 50)];
  return reply;
}

const ttls = (m: Message): number[][] => [m.answers.map((r) => r.ttl), m.authorities.map((r) => r.ttl), m.additionals.map((r) => r.ttl)];

let upstream: Responder;
let s: RunningSluice;
beforeAll(async () => {
  upstream = await startResponder((q) => upstreamAnswer(q));
  s = await startSluice(`
plugins:
  - tag: ttl_min
    type: ttl
    args: { min: 100 }
  - tag: ttl_max
    type: ttl
    args: { max: 60 }
  - tag: ttl_fix_wins
    type: ttl
    args: { fix: 10, min: 100, max: 200 }
  - tag: lan
    type: hosts
    args: { entries: ["drop.test 198.51.100.7", "local.test 198.51.100.8"] }
  - tag: main
    type: sequence
    args:
      - { matches: "qname full:early.test", exec: ttl 42 }
      - { matches: "!qname full:early.test", exec: forward 127.0.0.1:${upstream.port} }
      - { matches: "qname full:fix.test", exec: ttl 42 }
      - { matches: "qname full:range.test", exec: ttl 60-600 }
      - { matches: "qname full:nomax.test", exec: ttl 60-0 }
      - { matches: "qname full:min.test", exec: $ttl_min }
      - { matches: "qname full:max.test", exec: $ttl_max }
      - { matches: "qname full:wins.test", exec: $ttl_fix_wins }
      - { matches: "qname full:drop.test", exec: drop_resp }
      - { matches: "qname full:local.test", exec: drop_resp }
      - { matches: "!has_resp", exec: $lan }
      - { matches: "qname full:local.test", exec: ttl 3600 }
${serversYaml()}
`);
});
afterAll(async () => {
  await s.stop();
  await upstream.close();
});

describe("ttl", () => {
  test("without ttl the upstream TTLs come through as sent", async () => {
    expect(ttls(await query(s.udpPort, "plain.test", "A"))).toEqual([[5, 300, 100_000, 0x9000_0000], [7], [50]]);
  });

  test("`ttl 42` sets every record in all three sections, and leaves OPT alone", async () => {
    const m = await query(s.udpPort, "fix.test", "A", { dnssecOk: true });
    expect(ttls(m)).toEqual([[42, 42, 42, 42], [42], [42]]);
    expect(answerIps(m)).toEqual(["192.0.2.1", "192.0.2.2", "192.0.2.3", "192.0.2.4"]);
    // The OPT pseudo-record's TTL field holds the DO bit and version; it is not a TTL.
    expect(m.edns?.flags).toBe(0x8000);
    expect(m.edns?.version).toBe(0);
  });

  test("`ttl 60-600` clamps both ways; a TTL with the top bit set counts as 0 (RFC 2181)", async () => {
    expect(ttls(await query(s.tcpPort, "range.test", "A", { tcp: true }))).toEqual([[60, 300, 600, 60], [60], [60]]);
  });

  test("`ttl 60-0` has no upper bound", async () => {
    expect(ttls(await query(s.udpPort, "nomax.test", "A"))).toEqual([[60, 300, 100_000, 60], [60], [60]]);
  });

  test("object forms: min only, max only, and fix winning over min/max", async () => {
    expect(ttls(await query(s.udpPort, "min.test", "A"))).toEqual([[100, 300, 100_000, 100], [100], [100]]);
    expect(ttls(await query(s.udpPort, "max.test", "A"))).toEqual([[5, 60, 60, 0], [7], [50]]);
    expect(ttls(await query(s.udpPort, "wins.test", "A"))).toEqual([[10, 10, 10, 10], [10], [10]]);
  });

  test("a locally built answer (hosts, TTL 10) is rewritten too", async () => {
    const m = await query(s.udpPort, "local.test", "A");
    expect(answerIps(m)).toEqual(["198.51.100.8"]);
    expect(ttls(m)).toEqual([[3600], [], []]);
  });

  test("with no response yet, ttl does nothing and the client gets the empty NOERROR", async () => {
    const m = await query(s.udpPort, "early.test", "A");
    expect(rcodeOf(m)).toBe(0);
    expect(m.answers).toEqual([]);
  });
});

describe("drop_resp", () => {
  test("the upstream answer is dropped and the next rule answers instead", async () => {
    const m = await query(s.udpPort, "drop.test", "A");
    expect(answerIps(m)).toEqual(["198.51.100.7"]);
    expect(m.answers[0].type).toBe(QTYPE.A);
    // The upstream was asked (drop_resp came after forward), but its answer did not reach the client.
    expect(upstream.seen.some((x) => x.query.questions[0].name === "drop.test")).toBe(true);
  });

  test("other names keep the upstream answer (has_resp stays true)", async () => {
    expect(answerIps(await query(s.udpPort, "plain.test", "A"))).toEqual(["192.0.2.1", "192.0.2.2", "192.0.2.3", "192.0.2.4"]);
  });
});
