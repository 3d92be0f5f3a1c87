// `string_exp` seen from a client: every source and op decides whether a rule answers REFUSED.
import { afterAll, beforeAll, expect, test } from "vitest";
import { ConfigError } from "../../src/config/diagnostics.js";
import { replyTo } from "../../src/dns/message.js";
import { query, rcodeOf } from "../helpers/dns.js";
import { answerWith, startResponder, type Responder } from "../helpers/responder.js";
import { serversYaml, startSluice, type RunningSluice } from "../helpers/sluice.js";

interface Case {
  expr: string;
  /** Each name carries a unique `kNz` label that routes it to its own rule. */
  name: string;
  type?: string;
  hit: boolean;
}

const cases: Case[] = [
  { expr: "qname eq k0z.example.test", name: "K0Z.Example.Test", hit: true },
  { expr: "qname eq other.example.test", name: "k1z.example.test", hit: false },
  { expr: "qname prefix k2z.ex", name: "k2z.example.test", hit: true },
  { expr: "qname suffix .example.test", name: "k3z.example.test", hit: true },
  { expr: "qname suffix .other.test .else.test", name: "k4z.example.test", hit: false },
  { expr: "qname contains ampl", name: "k5z.example.test", hit: true },
  { expr: "qname regexp ^nomatch$ ^k6z[.](foo|example)[.]test$", name: "k6z.example.test", hit: true },
  { expr: "qname zl", name: "k7z.example.test", hit: false },
  { expr: "qtype eq AAAA", name: "k8z.example.test", type: "AAAA", hit: true },
  { expr: "qtype eq 28", name: "k9z.example.test", type: "AAAA", hit: true },
  { expr: "qtype eq A MX", name: "k10z.example.test", type: "AAAA", hit: false },
  { expr: "qtype prefix 2", name: "k11z.example.test", type: "AAAA", hit: true },
  { expr: "qclass eq IN", name: "k12z.example.test", hit: true },
  { expr: "qclass eq CH", name: "k13z.example.test", hit: false },
  { expr: "rcode eq NXDOMAIN", name: "k14z.nx.test", hit: true },
  { expr: "rcode eq 0", name: "k15z.example.test", hit: true },
  { expr: "rcode eq 0", name: "k16z.nx.test", hit: false },
  { expr: "resp_ip eq 192.0.2.1", name: "k17z.example.test", hit: true },
  { expr: "resp_ip contains 2.1", name: "k18z.example.test", hit: true },
  { expr: "resp_ip zl", name: "k19z.nx.test", hit: true },
  { expr: "resp_ip zl", name: "k20z.example.test", hit: false },
  { expr: "mark eq 2,9", name: "k21z.marked.test", hit: true },
  { expr: "mark eq 9", name: "k22z.marked.test", hit: false },
  { expr: "mark zl", name: "k23z.example.test", hit: false },
  { expr: "client_ip eq 127.0.0.1", name: "k24z.example.test", hit: true },
  { expr: "client_ip prefix 10.", name: "k25z.example.test", hit: false },
  { expr: "$SLUICE_STRING_EXP eq blue", name: "k26z.example.test", hit: true },
  { expr: "$SLUICE_STRING_EXP eq red", name: "k27z.example.test", hit: false },
  { expr: "$SLUICE_STRING_EXP_UNSET zl", name: "k28z.example.test", hit: true },
  { expr: "$SLUICE_STRING_EXP suffix lue", name: "k29z.example.test", hit: true },
];

let up: Responder;
let s: RunningSluice;
beforeAll(async () => {
  process.env.SLUICE_STRING_EXP = "blue";
  up = await startResponder((q) => (q.questions[0].name.includes(".nx.") ? replyTo(q, 3) : answerWith(q, ["192.0.2.1"])));
  const rules = cases.map((c, i) => `      - { matches: ["qname keyword:k${i}z", "string_exp ${c.expr}"], exec: reject 5 }`).join("\n");
  s = await startSluice(`plugins:
  - tag: listed
    type: string_exp
    args: [qname, suffix, .listed.test]
  - tag: main
    type: sequence
    args:
      - exec: mark 9
      - { matches: "qname domain:marked.test", exec: mark 2 }
      - exec: forward 127.0.0.1:${up.port}
      - { matches: $listed, exec: reject 4 }
${rules}
      - exec: accept
${serversYaml()}`);
});
afterAll(async () => {
  await s.stop();
  await up.close();
});

test.each(cases.map((c, i) => ({ ...c, i })))("string_exp $expr on $name → $hit", async (c) => {
  const m = await query(s.udpPort, c.name, c.type ?? "A");
  expect(rcodeOf(m) === 5).toBe(c.hit);
});

test("the list form joins its items into one expression", async () => {
  expect(rcodeOf(await query(s.udpPort, "a.listed.test"))).toBe(4);
  expect(rcodeOf(await query(s.udpPort, "a.unlisted.test"))).toBe(0);
});

test("the environment is read once, at start-up", async () => {
  process.env.SLUICE_STRING_EXP = "red";
  expect(rcodeOf(await query(s.udpPort, "k26z.example.test"))).toBe(5);
  expect(rcodeOf(await query(s.udpPort, "k27z.example.test"))).toBe(0);
  process.env.SLUICE_STRING_EXP = "blue";
});

test("bad expressions are refused at start-up with the reason", async () => {
  const attempt = async (expr: string): Promise<string> => {
    const err = await startSluice(`plugins:
  - tag: main
    type: sequence
    args: [{ matches: "string_exp ${expr}", exec: accept }]
${serversYaml()}`).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConfigError);
    return (err as Error).message;
  };
  expect(await attempt("qname like x")).toContain("unknown op 'like'");
  expect(await attempt("server_name eq x")).toContain("unknown source 'server_name'");
  expect(await attempt("qname regexp ([a-z")).toContain("not a valid regular expression");
  expect(await attempt("qname eq")).toContain("needs at least one argument");
  expect(await attempt("qname zl x")).toContain("takes no arguments");
  expect(await attempt("qtype eq BOGUS")).toContain("'BOGUS' is not a query type");
  expect(await attempt("qname")).toContain("expects '<source> <op>");
});
