// `resp_ip` seen from a client: answer addresses (A, AAAA, IPv4-mapped AAAA, after a CNAME)
// checked against inline CIDRs, a rule file and an ip_set; no response means no match.
import { afterAll, beforeAll, expect, test } from "vitest";
import { QTYPE } from "../../src/dns/constants.js";
import { replyTo, type Message } from "../../src/dns/message.js";
import { nameRdata } from "../../src/dns/rdata.js";
import { answerIps, query, rcodeOf } from "../helpers/dns.js";
import { answerWith, startResponder, type Responder } from "../helpers/responder.js";
import { serversYaml, startSluice, type RunningSluice } from "../helpers/sluice.js";

const ADDRESSES: Record<string, string[]> = {
  "a.test": ["203.0.113.1", "192.0.2.1"],
  "b.test": ["203.0.113.9"],
  "c.test": ["2001:db8::5"],
  "m.test": ["::ffff:192.0.2.44"],
  "n.test": ["198.51.100.1"],
};

function upstreamAnswer(q: Message): Message {
  const name = q.questions[0].name.toLowerCase();
  if (name === "cn.test") {
    const reply = answerWith(q, []);
    reply.answers.push({ name: "cn.test", type: QTYPE.CNAME, class: 1, ttl: 60, data: nameRdata("n.test") });
    reply.answers.push(...answerWith({ ...q, questions: [{ ...q.questions[0], name: "n.test" }] }, ADDRESSES["n.test"]).answers);
    return reply;
  }
  const ips = ADDRESSES[name];
  return ips ? answerWith(q, ips) : replyTo(q, 0);
}

let upstream: Responder;
let s: RunningSluice;
beforeAll(async () => {
  upstream = await startResponder((q) => upstreamAnswer(q));
  s = await startSluice(
    `
plugins:
  - tag: nets
    type: ip_set
    args: { ips: ["198.51.100.0/24"] }
  - tag: main
    type: sequence
    args:
      - { matches: "resp_ip 0.0.0.0/0 ::/0", exec: reject 2 }
      - exec: forward 127.0.0.1:${upstream.port}
      - { matches: "resp_ip 192.0.2.0/24 &v6.txt", exec: reject 3 }
      - { matches: "resp_ip $nets", exec: reject 4 }
      - { matches: has_resp, exec: accept }
${serversYaml()}
`,
    { "v6.txt": "2001:db8::/32\n" },
  );
});
afterAll(async () => {
  await s.stop();
  await upstream.close();
});

test("any matching answer address decides (IPv4, IPv6 from a file, IPv4-mapped)", async () => {
  expect(rcodeOf(await query(s.udpPort, "a.test", "A"))).toBe(3);
  expect(rcodeOf(await query(s.udpPort, "c.test", "AAAA"))).toBe(3);
  expect(rcodeOf(await query(s.udpPort, "m.test", "AAAA"))).toBe(3);
});

test("addresses after a CNAME are checked, here through an ip_set", async () => {
  expect(rcodeOf(await query(s.udpPort, "cn.test", "A"))).toBe(4);
});

test("non-matching and empty answers pass; before forwarding there is no response to match", async () => {
  const b = await query(s.udpPort, "b.test", "A");
  expect(rcodeOf(b)).toBe(0);
  expect(answerIps(b)).toEqual(["203.0.113.9"]);
  const empty = await query(s.udpPort, "empty.test", "A");
  expect(rcodeOf(empty)).toBe(0);
  expect(empty.answers).toEqual([]);
});
