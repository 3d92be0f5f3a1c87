// `has_wanted_ans`, `env`, `random` and `question` seen from a client through the rcode a rule answers.
import { afterEach, expect, test } from "vitest";
import { ConfigError } from "../../src/config/diagnostics.js";
import { QTYPE } from "../../src/dns/constants.js";
import { replyTo, type Message } from "../../src/dns/message.js";
import { addressRecord, nameRdata } from "../../src/dns/rdata.js";
import { PluginInitError } from "../../src/registry/runtime.js";
import { query, rcodeOf } from "../helpers/dns.js";
import { answerWith, startResponder } from "../helpers/responder.js";
import { serversYaml, startSluice, type RunningSluice } from "../helpers/sluice.js";

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function sluice(plugins: string, files: Record<string, string> = {}): Promise<RunningSluice> {
  const s = await startSluice(`plugins:\n${plugins}\n${serversYaml()}`, files);
  cleanups.push(() => s.stop());
  return s;
}

async function refused(plugins: string): Promise<string> {
  const err = await startSluice(`plugins:\n${plugins}\n${serversYaml()}`).catch((e: unknown) => e);
  // Args problems are found by `check` (ConfigError); provider capabilities only at creation.
  expect(err instanceof ConfigError || err instanceof PluginInitError).toBe(true);
  return (err as Error).message;
}

const rcode = async (s: RunningSluice, name: string, type = "A"): Promise<number> => rcodeOf(await query(s.udpPort, name, type));

/** Upstream: a CNAME alone, a CNAME chain ending in an A, a plain A, and NODATA for AAAA. */
function upstreamReply(q: Message): Message {
  const question = q.questions[0];
  const name = question.name.toLowerCase();
  const reply = replyTo(q);
  const cname = { name: question.name, type: QTYPE.CNAME, class: 1, ttl: 60, data: nameRdata("target.elsewhere.test") };
  if (name === "cname-only.example") reply.answers.push(cname);
  else if (name === "chain.example") reply.answers.push(cname, addressRecord("target.elsewhere.test", Uint8Array.of(192, 0, 2, 5), 60));
  else if (question.type === QTYPE.A) return answerWith(q, ["192.0.2.1"]);
  return reply;
}

test("has_wanted_ans: a CNAME-only answer does not count, an A (directly or at the end of a chain) does", async () => {
  const up = await startResponder(upstreamReply);
  cleanups.push(() => up.close());
  const s = await sluice(`  - tag: main
    type: sequence
    args:
      - exec: forward 127.0.0.1:${up.port}
      - { matches: has_wanted_ans, exec: accept }
      - exec: reject 5`);
  expect(await rcode(s, "cname-only.example")).toBe(5);
  expect(await rcode(s, "chain.example")).toBe(0);
  expect(await rcode(s, "plain.example")).toBe(0);
  expect(await rcode(s, "plain.example", "AAAA")).toBe(5);
  expect(await refused("  - tag: main\n    type: sequence\n    args: [{ matches: has_wanted_ans yes, exec: accept }]")).toContain("takes no arguments");
});

test("env: KEY alone tests presence; KEY VALUE, KEY=value and [KEY, VALUE] test equality; read once at start-up", async () => {
  process.env.SLUICE_TEST_PROFILE = "prod";
  process.env.SLUICE_TEST_EMPTY = "";
  delete process.env.SLUICE_TEST_UNSET;
  const checks: [string, string][] = [
    ["set", "env SLUICE_TEST_PROFILE"],
    ["empty", "env SLUICE_TEST_EMPTY"],
    ["unset", "env SLUICE_TEST_UNSET"],
    ["space", "env SLUICE_TEST_PROFILE prod"],
    ["equals", "env SLUICE_TEST_PROFILE=prod"],
    ["other", "env SLUICE_TEST_PROFILE dev"],
    ["otherequals", "env SLUICE_TEST_PROFILE=dev"],
  ];
  const rules = checks.map(([n, expr]) => `      - { matches: ["qname full:${n}.test", "${expr}"], exec: reject 5 }`).join("\n");
  const s = await sluice(`  - tag: listed
    type: env
    args: [SLUICE_TEST_PROFILE, prod]
  - tag: listed_key
    type: env
    args: [SLUICE_TEST_PROFILE]
  - tag: main
    type: sequence
    args:
      - { matches: ["qname full:listed.test", $listed], exec: reject 5 }
      - { matches: ["qname full:listedkey.test", $listed_key], exec: reject 5 }
${rules}
      - exec: reject 3`);
  const hits: Record<string, boolean> = {};
  for (const n of [...checks.map(([name]) => name), "listed", "listedkey"]) hits[n] = (await rcode(s, `${n}.test`)) === 5;
  expect(hits).toEqual({ set: true, empty: true, unset: false, space: true, equals: true, other: false, otherequals: false, listed: true, listedkey: true });
  process.env.SLUICE_TEST_PROFILE = "dev";
  expect(await rcode(s, "space.test")).toBe(5);
  expect(await rcode(s, "other.test")).toBe(3);
  expect(await refused("  - tag: e\n    type: env\n    args: [A, B, C]\n  - tag: main\n    type: sequence\n    args: [{ matches: $e, exec: accept }]")).toContain("[KEY, VALUE]");
  expect(await refused('  - tag: e\n    type: env\n    args: "1BAD"\n  - tag: main\n    type: sequence\n    args: [{ matches: $e, exec: accept }]')).toContain("not an environment variable name");
});

test("random: 0 never matches, 1 always does (string or YAML number), 0.5 matches about half", async () => {
  const s = await sluice(`  - tag: never
    type: random
    args: 0
  - tag: always
    type: random
    args: 1
  - tag: half
    type: random
    args: 0.5
  - tag: main
    type: sequence
    args:
      - { matches: ["qname full:never.test", $never], exec: reject 5 }
      - { matches: ["qname full:always.test", $always], exec: reject 5 }
      - { matches: ["qname full:quick0.test", "random 0"], exec: reject 5 }
      - { matches: ["qname full:quick1.test", "random 1.0"], exec: reject 5 }
      - { matches: ["qname full:half.test", $half], exec: reject 5 }
      - exec: reject 3`);
  for (let i = 0; i < 20; i++) {
    expect(await rcode(s, "never.test")).toBe(3);
    expect(await rcode(s, "always.test")).toBe(5);
    expect(await rcode(s, "quick0.test")).toBe(3);
    expect(await rcode(s, "quick1.test")).toBe(5);
  }
  let hits = 0;
  for (let i = 0; i < 200; i++) if ((await rcode(s, "half.test")) === 5) hits++;
  expect(hits).toBeGreaterThan(50);
  expect(hits).toBeLessThan(150);
  const bad = (args: string): Promise<string> => refused(`  - tag: r\n    type: random\n    args: ${args}\n  - tag: main\n    type: sequence\n    args: [{ matches: $r, exec: accept }]`);
  expect(await bad("1.5")).toContain("probability");
  expect(await bad('"often"')).toContain("'often' is not a probability");
  expect(await bad("[0.1, 0.2]")).toContain("exactly one probability");
});

test("question: true when the question is in a domain_set (its own rules, files, or a referenced set)", async () => {
  const up = await startResponder((q) => answerWith(q, ["192.0.2.1"]));
  cleanups.push(() => up.close());
  const s = await sluice(
    `  - tag: inner
    type: domain_set
    args: { exps: [full:inner.example] }
  - tag: blocked
    type: domain_set
    args: { exps: [full:ads.example, domain:track.test], files: [more.txt], sets: [inner] }
  - tag: main
    type: sequence
    args:
      - { matches: "question $blocked", exec: reject 3 }
      - exec: forward 127.0.0.1:${up.port}`,
    { "more.txt": "full:file.example\n" },
  );
  expect(await rcode(s, "ADS.example.")).toBe(3);
  expect(await rcode(s, "x.track.test", "AAAA")).toBe(3);
  expect(await rcode(s, "file.example")).toBe(3);
  expect(await rcode(s, "inner.example")).toBe(3);
  expect(await rcode(s, "sub.ads.example")).toBe(0);
  expect(await rcode(s, "fine.example")).toBe(0);
});

test("question: only $provider references, and only providers that can match names", async () => {
  expect(await refused('  - tag: main\n    type: sequence\n    args: [{ matches: "question full:a.example", exec: accept }]')).toContain("only $provider references are accepted");
  expect(
    await refused(`  - tag: nets
    type: ip_set
    args: { ips: [10.0.0.0/8] }
  - tag: main
    type: sequence
    args: [{ matches: "question $nets", exec: accept }]`),
  ).toContain("cannot match questions or domain names");
});
