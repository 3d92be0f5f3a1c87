// Step semantics of the sequence engine, observed as rcodes and answers by a real client.
// `main` routes each scenario by a private query type (TYPE65280 + i); A queries go to the
// black_hole scenario. `report` turns the marks set so far into an rcode: exactly {1,2} → NXDOMAIN.
import { afterAll, beforeAll, expect, test } from "vitest";
import { answerIps, query, rcodeOf } from "../helpers/dns.js";
import { serversYaml, startSluice, type RunningSluice } from "../helpers/sluice.js";

const scenarios = [
  "jump_return", "goto_return", "ref_return", "ref_plain", "jump_accept", "jump_reject",
  "reject_servfail", "reject_name", "matchers", "marks", "has_resp", "any", "true_false", "goto_plain",
] as const;
const typeOf = (n: (typeof scenarios)[number]): number => 65280 + scenarios.indexOf(n);

const yaml = `
plugins:
  - tag: report
    type: sequence
    args:
      - { matches: ["mark 1", "mark 2", "!mark 3"], exec: reject 3 }
      - exec: reject 4

  - tag: child_return
    type: sequence
    args: [{ exec: mark 2 }, { exec: return }, { exec: mark 3 }]
  - tag: child_accept
    type: sequence
    args: [{ exec: mark 2 }, { exec: accept }]
  - tag: child_reject
    type: sequence
    args: [{ exec: reject }]
  - tag: child_blackhole
    type: sequence
    args: [{ exec: black_hole 192.0.2.7 short_circuit=true }]
  - tag: child_plain
    type: sequence
    args: [{ exec: mark 2 }]

  - tag: s_jump_return
    type: sequence
    args: [{ exec: mark 1 }, { exec: jump child_return }, { exec: goto report }]
  - tag: s_goto_return
    type: sequence
    args: [{ exec: mark 1 }, { exec: goto child_return }, { exec: reject 3 }]
  - tag: s_goto_plain
    type: sequence
    args: [{ exec: mark 1 }, { exec: goto child_plain }, { exec: reject 3 }]
  - tag: s_ref_return
    type: sequence
    args: [{ exec: mark 1 }, { exec: $child_return }, { exec: reject 3 }]
  - tag: s_ref_plain
    type: sequence
    args: [{ exec: mark 1 }, { exec: $child_plain }, { exec: goto report }]
  - tag: s_jump_accept
    type: sequence
    args: [{ exec: mark 1 }, { exec: jump child_accept }, { exec: reject 3 }]
  - tag: s_jump_reject
    type: sequence
    args: [{ exec: jump child_reject }, { exec: reject 3 }]
  - tag: s_jump_blackhole
    type: sequence
    args: [{ exec: jump child_blackhole }, { exec: reject 3 }]
  - tag: s_reject_servfail
    type: sequence
    args: [{ exec: reject 2 }, { exec: reject 3 }]
  - tag: s_reject_name
    type: sequence
    args: [{ exec: reject NXDOMAIN }]
  - tag: s_matchers
    type: sequence
    args:
      - { matches: ["qtype ${typeOf("matchers")}", "qclass IN"], exec: mark 1 }
      - { matches: "!qtype A,AAAA", exec: mark 2 }
      - { matches: "qclass CH", exec: mark 3 }
      - exec: goto report
  - tag: s_rcode
    type: sequence
    args:
      - exec: black_hole ::1
      - { matches: "rcode NOERROR,3", exec: reject SERVFAIL }
  - tag: s_marks
    type: sequence
    args:
      - exec: mark 100 200,300
      - { matches: ["mark 200", "mark 300", "!mark 5"], exec: reject 3 }
      - exec: reject 5
  - tag: s_has_resp
    type: sequence
    args:
      - { matches: has_resp, exec: reject 4 }
      - exec: reject 3
  - tag: s_any
    type: sequence
    args:
      - { matches: "$either", exec: reject 3 }
      - exec: reject 5
  - tag: either
    type: any_match
    args: |
      qtype MX
      !qclass IN
  - tag: s_true_false
    type: sequence
    args:
      - { matches: [_true, _false], exec: reject 4 }
      - { matches: [_true, "!_false"], exec: reject 3 }

  - tag: main
    type: sequence
    args:
${scenarios.map((n) => `      - { matches: "qtype ${typeOf(n)}", exec: goto s_${n} }`).join("\n")}
      - { matches: "qtype A", exec: goto s_jump_blackhole }
      - { matches: "qtype AAAA", exec: goto s_rcode }
      - exec: reject 5
${serversYaml()}
`;

let s: RunningSluice;
beforeAll(async () => {
  s = await startSluice(yaml);
});
afterAll(() => s.stop());

const rcode = async (n: (typeof scenarios)[number]): Promise<number> => rcodeOf(await query(s.udpPort, "x.test", typeOf(n)));

test("jump resumes the caller after the child's return (marks 1 and 2, not 3)", async () => {
  expect(await rcode("jump_return")).toBe(3);
});

test("goto does not resume: the child's return ends the caller", async () => {
  const m = await query(s.udpPort, "x.test", typeOf("goto_return"));
  expect(rcodeOf(m)).toBe(0);
  expect(m.answers).toHaveLength(0);
});

test("goto ends the caller with the target's result even when the target simply runs out of rules", async () => {
  const m = await query(s.udpPort, "x.test", typeOf("goto_plain"));
  expect(rcodeOf(m)).toBe(0);
  expect(m.answers).toHaveLength(0);
});

test("$child with return propagates Return: the caller ends too", async () => {
  const m = await query(s.udpPort, "x.test", typeOf("ref_return"));
  expect(rcodeOf(m)).toBe(0);
  expect(m.answers).toHaveLength(0);
});

test("$child that runs to its end lets the caller continue", async () => {
  expect(await rcode("ref_plain")).toBe(3);
});

test("accept inside a jumped child stops the caller", async () => {
  const m = await query(s.udpPort, "x.test", typeOf("jump_accept"));
  expect(rcodeOf(m)).toBe(0);
  expect(m.answers).toHaveLength(0);
});

test("reject inside a jumped child stops the caller; the default rcode is REFUSED", async () => {
  expect(await rcode("jump_reject")).toBe(5);
});

test("a short_circuit executor in a jumped child stops the caller", async () => {
  const m = await query(s.udpPort, "x.test", "A");
  expect(rcodeOf(m)).toBe(0);
  expect(answerIps(m)).toEqual(["192.0.2.7"]);
});

test("reject takes a number or a name", async () => {
  expect(await rcode("reject_servfail")).toBe(2);
  expect(await rcode("reject_name")).toBe(3);
});

test("qtype/qclass quick setups with names, numbers and negation", async () => {
  expect(await rcode("matchers")).toBe(3);
});

test("rcode matcher reads the response an earlier rule set", async () => {
  expect(rcodeOf(await query(s.udpPort, "x.test", "AAAA"))).toBe(2);
});

test("marks are ANDed and negated in matches", async () => {
  expect(await rcode("marks")).toBe(3);
});

test("has_resp is false before any response", async () => {
  expect(await rcode("has_resp")).toBe(3);
});

test("any_match is an OR of its expressions", async () => {
  expect(await rcode("any")).toBe(5);
  expect(rcodeOf(await query(s.udpPort, "x.test", "MX"))).toBe(5);
});

test("_true and _false", async () => {
  expect(await rcode("true_false")).toBe(3);
});

test("a query no rule claims reaches the last rule", async () => {
  expect(rcodeOf(await query(s.udpPort, "x.test", "TXT"))).toBe(5);
});
