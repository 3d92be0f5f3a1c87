// `redirect` seen from a client and from the upstream: the upstream is asked the target, the client
// gets its own question back with `CNAME original → target` first, then the target's records.
import dnsPacket from "dns-packet";
import { afterAll, beforeAll, expect, test } from "vitest";
import { FLAG, QTYPE, RCODE } from "../../src/dns/constants.js";
import type { Message } from "../../src/dns/message.js";
import { rdataName, syntheticSoa } from "../../src/dns/rdata.js";
import { answerIps, query, buildQuery, rcodeOf, udpExchange } from "../helpers/dns.js";
import { answerWith, startResponder, type Responder } from "../helpers/responder.js";
import { serversYaml, startSluice, type RunningSluice } from "../helpers/sluice.js";

function upstreamAnswer(q: Message): Message | null {
  const name = q.questions[0].name.toLowerCase();
  if (name === "silent.test") return null;
  if (name === "refused.test") return answerWith(q, [], 300, RCODE.REFUSED);
  if (name === "nx.test") {
    const reply = answerWith(q, [], 300, RCODE.NXDOMAIN);
    reply.authorities = [{ ...syntheticSoa("test", 900), data: syntheticSoa("test", 45).data }];
    return reply;
  }
  if (name === "target.test") {
    const reply = answerWith(q, ["192.0.2.10", "192.0.2.11"], 120);
    reply.flags |= FLAG.AD;
    return reply;
  }
  if (name === "other.test") return answerWith(q, ["192.0.2.20"], 30);
  return answerWith(q, ["198.51.100.1"], 300);
}

let upstream: Responder;
let s: RunningSluice;
/** Names the upstream was asked since the last call. */
let seenFrom = 0;
const askedUpstream = (): string[] => {
  const names = upstream.seen.slice(seenFrom).map((x) => x.query.questions[0].name);
  seenFrom = upstream.seen.length;
  return names;
};

beforeAll(async () => {
  upstream = await startResponder(upstreamAnswer);
  s = await startSluice(
    `
plugins:
  - tag: up
    type: forward
    args: { upstreams: [{ addr: "127.0.0.1:${upstream.port}", timeout: 300ms }] }
  - tag: rd
    type: redirect
    args:
      rules:
        - "old.test target.test."
        - "domain:wild.test target.test"
        - "full:sub.wild.test other.test"
        - "gone.test nx.test"
        - "deny.test refused.test"
        - "hang.test silent.test"
      files: [redirect.txt]
  - tag: main
    type: sequence
    args:
      - exec: $rd
      - exec: $up
${serversYaml()}
`,
    { "redirect.txt": "# redirects\nfile.test target.test   # from a file\n" },
  );
});
afterAll(async () => {
  await s.stop();
  await upstream.close();
});

test("the upstream is asked the target; the client sees its own question, the CNAME first, then the target's records", async () => {
  askedUpstream();
  const m = await query(s.udpPort, "old.test", "A");
  expect(askedUpstream()).toEqual(["target.test"]);
  expect(rcodeOf(m)).toBe(0);
  expect(m.questions).toEqual([{ name: "old.test", type: QTYPE.A, class: 1 }]);
  expect(m.answers.map((r) => [r.name, r.type])).toEqual([
    ["old.test", QTYPE.CNAME],
    ["target.test", QTYPE.A],
    ["target.test", QTYPE.A],
  ]);
  expect(rdataName(m.answers[0].data)).toBe("target.test");
  expect(answerIps(m)).toEqual(["192.0.2.10", "192.0.2.11"]);
  // The CNAME lives as long as the records it leads to (120 s here), no longer.
  expect(m.answers[0].ttl).toBe(120);
  // The upstream said AD; our CNAME is not validated data, so the client is not told it is.
  expect(m.flags & FLAG.AD).toBe(0);
});

test("rewrites are counted per plugin", async () => {
  const count = async (): Promise<number> => {
    const text = await s.app.services.metrics.registry.metrics();
    return Number(/^redirect_total\{plugin_tag="rd"\} (\d+)$/m.exec(text)?.[1] ?? 0);
  };
  const before = await count();
  await query(s.udpPort, "old.test", "A");
  await query(s.udpPort, "unrelated.test", "A");
  expect((await count()) - before).toBe(1);
});

test("an independent decoder reads the same ordered chain (over TCP too)", async () => {
  const raw = await udpExchange(s.udpPort, buildQuery("file.test", "A"));
  const p = dnsPacket.decode(raw as Buffer);
  expect(p.questions?.[0].name).toBe("file.test");
  expect(p.answers?.map((a) => `${a.name} ${a.type} ${"data" in a && typeof a.data === "string" ? a.data : "-"}`)).toEqual([
    "file.test CNAME target.test",
    "target.test A 192.0.2.10",
    "target.test A 192.0.2.11",
  ]);
  const t = await query(s.tcpPort, "file.test", "A", { tcp: true });
  expect(t.answers[0].type).toBe(QTYPE.CNAME);
});

test("the client's spelling of the name is kept in the question and the CNAME owner", async () => {
  const m = await query(s.udpPort, "OLD.Test", "A");
  expect(m.questions[0].name).toBe("OLD.Test");
  expect(m.answers[0].name).toBe("OLD.Test");
});

test("the most specific rule wins: full: over domain:", async () => {
  askedUpstream();
  const sub = await query(s.udpPort, "sub.wild.test", "A");
  const deep = await query(s.udpPort, "a.b.wild.test", "A");
  expect(askedUpstream()).toEqual(["other.test", "target.test"]);
  expect(rdataName(sub.answers[0].data)).toBe("other.test");
  expect(sub.answers[0].ttl).toBe(30);
  expect(rdataName(deep.answers[0].data)).toBe("target.test");
  expect(deep.questions[0].name).toBe("a.b.wild.test");
});

test("NXDOMAIN for the target keeps the CNAME (RFC 6604), with the negative-caching TTL", async () => {
  const m = await query(s.udpPort, "gone.test", "A");
  expect(rcodeOf(m)).toBe(RCODE.NXDOMAIN);
  expect(m.questions[0].name).toBe("gone.test");
  expect(m.answers.map((r) => r.type)).toEqual([QTYPE.CNAME]);
  // SOA TTL 900, MINIMUM 45: RFC 2308 takes the smaller.
  expect(m.answers[0].ttl).toBe(45);
});

test("a failure answer gets its question back but no CNAME", async () => {
  const refused = await query(s.udpPort, "deny.test", "A");
  expect(rcodeOf(refused)).toBe(RCODE.REFUSED);
  expect(refused.questions[0].name).toBe("deny.test");
  expect(refused.answers).toEqual([]);
  // The upstream never answers: the SERVFAIL the server builds names the client's question.
  const failed = await query(s.udpPort, "hang.test", "A");
  expect(rcodeOf(failed)).toBe(RCODE.SERVFAIL);
  expect(failed.questions[0].name).toBe("hang.test");
});

test("names without a rule, and other classes, go upstream unchanged", async () => {
  askedUpstream();
  const m = await query(s.udpPort, "elsewhere.test", "A");
  expect(askedUpstream()).toEqual(["elsewhere.test"]);
  expect(m.answers.map((r) => r.type)).toEqual([QTYPE.A]);
  await query(s.udpPort, "old.test", "TXT", { qclass: 3 });
  expect(askedUpstream()).toEqual(["old.test"]);
  // Only exactly `full:old.test`: a subdomain is not redirected.
  await query(s.udpPort, "www.old.test", "A");
  expect(askedUpstream()).toEqual(["www.old.test"]);
});

test("a bad line in a redirect file stops start-up with the file and line", async () => {
  const bad = startSluice(
    `
plugins:
  - tag: rd
    type: redirect
    args: { files: [bad.txt] }
  - tag: main
    type: sequence
    args: [{ exec: $rd }]
${serversYaml()}
`,
    { "bad.txt": "ok.test target.test\n\nthree.test a.test b.test\n" },
  );
  await expect(bad).rejects.toThrow(/args\.files\[0\]: bad\.txt:3: 'three\.test a\.test b\.test' must be exactly two fields/);
});
