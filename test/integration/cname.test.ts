// `cname` seen from a client: CNAME targets in a forwarded answer matched by rules and providers.
import { afterAll, beforeAll, expect, test } from "vitest";
import { QTYPE } from "../../src/dns/constants.js";
import { parseIP } from "../../src/dns/ip.js";
import type { Message, ResourceRecord } from "../../src/dns/message.js";
import { addressRecord, nameRdata } from "../../src/dns/rdata.js";
import { answerIps, query, rcodeOf } from "../helpers/dns.js";
import { answerWith, startResponder, type Responder } from "../helpers/responder.js";
import { serversYaml, startSluice, type RunningSluice } from "../helpers/sluice.js";

const cname = (from: string, to: string): ResourceRecord => ({ name: from, type: QTYPE.CNAME, class: 1, ttl: 60, data: nameRdata(to) });
const a = (name: string, ip: string): ResourceRecord => addressRecord(name, parseIP(ip) as Uint8Array, 60);

/** CNAME chains per name; the last link gets an A record. */
const CHAINS: Record<string, string[]> = {
  "alias.test": ["alias.test", "edge.cdn.test"],
  "chain.test": ["chain.test", "mid.test", "Final.Tracker.example"],
  "plain.test": ["plain.test"],
};

function upstreamAnswer(q: Message): Message {
  const chain = CHAINS[q.questions[0].name.toLowerCase()] ?? [q.questions[0].name];
  const reply = answerWith(q, []);
  for (let i = 0; i + 1 < chain.length; i++) reply.answers.push(cname(chain[i], chain[i + 1]));
  reply.answers.push(a(chain[chain.length - 1], "192.0.2.1"));
  return reply;
}

let upstream: Responder;
let s: RunningSluice;
beforeAll(async () => {
  upstream = await startResponder((q) => upstreamAnswer(q));
  s = await startSluice(`
plugins:
  - tag: trackers
    type: domain_set
    args: { exps: ["keyword:tracker"] }
  - tag: main
    type: sequence
    args:
      - { matches: "cname keyword:edge", exec: reject 2 }
      - exec: forward 127.0.0.1:${upstream.port}
      - { matches: "cname domain:cdn.test", exec: reject 3 }
      - { matches: "cname $trackers", exec: reject 4 }
      - { matches: has_resp, exec: accept }
${serversYaml()}
`);
});
afterAll(async () => {
  await s.stop();
  await upstream.close();
});

test("a CNAME target matching a rule decides (no response before forwarding: no match)", async () => {
  expect(rcodeOf(await query(s.udpPort, "alias.test", "A"))).toBe(3);
});

test("every link of a chain is checked, case-insensitively, including through a provider", async () => {
  expect(rcodeOf(await query(s.udpPort, "chain.test", "A"))).toBe(4);
});

test("answers without a matching CNAME pass through", async () => {
  const m = await query(s.udpPort, "plain.test", "A");
  expect(rcodeOf(m)).toBe(0);
  expect(answerIps(m)).toEqual(["192.0.2.1"]);
});
