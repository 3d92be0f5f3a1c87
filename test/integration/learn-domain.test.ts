// learn_domain over real sockets: a query whose answer matched learns its name into a
// dynamic_domain_set, which the very next query sees; a scan of random names cannot grow the set past
// max_entries (the rest are dropped and counted); learned rules expire by the injected clock; and
// `sluice check` locates bad arguments of both plugins by line and column.
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, test } from "vitest";
import { checkErrors } from "../helpers/check.js";
import { query, rcodeOf } from "../helpers/dns.js";
import { startSluice, tempDir, type RunningSluice } from "../helpers/sluice.js";

const REFUSED = 5;

/** Learned names answer REFUSED from then on; `learn` is the learn_domain's args (or a quick setup after `exec:`). */
function config(learn: string, setArgs = "path: learned.txt, max_entries: 3, flush_interval_ms: 20"): string {
  return `api:
  http: 127.0.0.1:0
plugins:
  - tag: learned
    type: dynamic_domain_set
    args: { ${setArgs} }
  - tag: learn
    type: learn_domain
    args: ${learn}
  - tag: main
    type: sequence
    args:
      - { matches: "qname $learned", exec: reject REFUSED }
      - { matches: "qname nx.test", exec: reject NXDOMAIN }
      - exec: black_hole 192.0.2.1
      - { matches: "resp_ip 192.0.2.0/24", exec: $learn }
  - { tag: udp, type: udp_server, args: { entry: main, listen: "127.0.0.1:0" } }
`;
}

let running: RunningSluice | null = null;
afterEach(async () => {
  await running?.stop();
  running = null;
});

type Json = Record<string, unknown>;
const rules = async (s: RunningSluice): Promise<Json[]> => ((await (await s.api("/api/plugins/learned/rules")).json()) as { rules: Json[] }).rules;
const rcode = async (s: RunningSluice, name: string, type = "A"): Promise<number> => rcodeOf(await query(s.udpPort, name, type));
async function metric(s: RunningSluice, name: string): Promise<number> {
  const text = await (await s.api("/api/metrics")).text();
  const line = text.split("\n").find((l) => l.startsWith(`${name}{plugin_tag="learn"}`));
  return line === undefined ? 0 : Number(line.split(" ").pop());
}

describe("learn_domain", () => {
  test("an answered name is learned at once (full: by default), with the ttl, and shown as learned", async () => {
    const s = (running = await startSluice(config("{ provider: $learned, ttl: 1h }")));
    expect(await rcode(s, "www.cdn.test")).toBe(0);
    expect(await rcode(s, "www.cdn.test")).toBe(REFUSED);
    expect(await rcode(s, "other.www.cdn.test")).toBe(0);
    const [r] = await rules(s);
    expect(r).toMatchObject({ rule: "full:www.cdn.test", source: "learned" });
    expect(r.ttl_left_ms).toBeGreaterThan(3_590_000);
    expect(await metric(s, "learn_domain_learned_total")).toBe(2);
    // Names whose answer did not match are not learned (NXDOMAIN never reaches it here).
    expect(await rcode(s, "nx.test")).toBe(3);
    expect(await rcode(s, "nx.test")).toBe(3);
  });

  test("bounded by max_entries: a scan of random names leaves the set full and counts what it dropped", async () => {
    const s = (running = await startSluice(config("{ provider: learned }")));
    const names = Array.from({ length: 20 }, (_, i) => `r${i}-${Math.random().toString(36).slice(2, 8)}.scan.test`);
    for (const n of names) await rcode(s, n);
    expect((await rules(s)).map((r) => r.rule)).toEqual(names.slice(0, 3).map((n) => `full:${n}`));
    expect(await metric(s, "learn_domain_learned_total")).toBe(3);
    expect(await metric(s, "learn_domain_dropped_total")).toBe(17);
    // The API is bounded by the same number.
    const full = await s.api("/api/plugins/learned/rules", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ rules: ["one.more.test"] }) });
    expect(full.status).toBe(507);
    // Removing one makes room for the next name learned.
    await s.api("/api/plugins/learned/rules", { method: "DELETE", headers: { "content-type": "application/json" }, body: JSON.stringify({ rules: [`full:${names[0]}`] }) });
    expect(await rcode(s, "late.scan.test")).toBe(0);
    expect(await rcode(s, "late.scan.test")).toBe(REFUSED);
  });

  test("learned rules expire by the set's clock and can be learned again", async () => {
    const clockShift = { ms: 0 };
    const s = (running = await startSluice(config("{ provider: $learned, ttl: 10m, rule_kind: domain }", "path: learned.txt, flush_interval_ms: 20, cleanup_interval_seconds: 0.05"), {}, { clockShift }));
    expect(await rcode(s, "video.test")).toBe(0);
    expect(await rcode(s, "edge.video.test")).toBe(REFUSED); // rule_kind: domain covers subdomains
    clockShift.ms = 11 * 60_000;
    expect(await rcode(s, "edge.video.test")).toBe(0); // expired: absent at once, and learned again by this answer
    expect(await rcode(s, "edge.video.test")).toBe(REFUSED);
    expect((await rules(s)).map((r) => r.rule)).toEqual(["domain:edge.video.test"]);
  });

  test("entry_ttl_seconds of the set applies when learn_domain sets no ttl; a popular name is refreshed past half its time", async () => {
    const clockShift = { ms: 0 };
    const yaml = `api:
  http: 127.0.0.1:0
plugins:
  - { tag: learned, type: dynamic_domain_set, args: { path: learned.txt, entry_ttl_seconds: 600 } }
  - { tag: learn, type: learn_domain, args: { provider: learned } }
  - tag: main
    type: sequence
    args: [{ exec: $learn }, { exec: black_hole 192.0.2.1 }]
  - { tag: udp, type: udp_server, args: { entry: main, listen: "127.0.0.1:0" } }
`;
    const s = (running = await startSluice(yaml, {}, { clockShift }));
    await rcode(s, "pop.test");
    const first = (await rules(s))[0];
    expect(first.expires_at_ms).toBe((first.added_at_ms as number) + 600_000);
    // More than half its time left: the query changes nothing (no file write for it).
    clockShift.ms = 100_000;
    await rcode(s, "pop.test");
    expect((await rules(s))[0].expires_at_ms).toBe(first.expires_at_ms);
    // Less than half left: its expiry moves on from now.
    clockShift.ms = 400_000;
    await rcode(s, "pop.test");
    const refreshed = (await rules(s))[0];
    expect(refreshed.expires_at_ms).toBeGreaterThanOrEqual((first.added_at_ms as number) + 400_000 + 600_000);
    expect(refreshed.added_at_ms).toBe(first.added_at_ms);
    expect(await metric(s, "learn_domain_learned_total")).toBe(1);
  });

  test("phase after, qtypes, success_only and answer_required choose what is learned", async () => {
    const yaml = `api:
  http: 127.0.0.1:0
plugins:
  - { tag: learned, type: dynamic_domain_set, args: { path: learned.txt } }
  - tag: main
    type: sequence
    args:
      - exec: learn_domain $learned domain ttl=1h
      - { matches: "qname nx.test", exec: reject NXDOMAIN }
      - exec: black_hole 192.0.2.1
  - tag: picky
    type: sequence
    args:
      - { exec: $strict }
      - { matches: "qname nx2.test", exec: reject NXDOMAIN }
      - exec: black_hole 192.0.2.1
  - { tag: strict, type: learn_domain, args: { provider: learned, phase: after, qtypes: [A], success_only: true, answer_required: true, async: true } }
  - { tag: udp, type: udp_server, args: { entry: main, listen: "127.0.0.1:0" } }
  - { tag: tcp2, type: tcp_server, args: { entry: picky, listen: "127.0.0.1:0" } }
`;
    const s = (running = await startSluice(yaml));
    // Quick setup, phase before: learned whatever the answer.
    await rcode(s, "nx.test");
    expect((await rules(s)).map((r) => r.rule)).toEqual(["domain:nx.test"]);
    const picky = s.port("tcp2");
    await query(picky, "nx2.test", "A", { tcp: true }); // NXDOMAIN: not a success
    await query(picky, "v6.test", "AAAA", { tcp: true }); // not a listed type
    await query(picky, "mx.test", "MX", { tcp: true }).catch(() => undefined); // no answer (black_hole answers A and AAAA only)
    await query(picky, "yes.test", "A", { tcp: true }); // learned after the answer was made
    expect((await rules(s)).map((r) => r.rule)).toEqual(["domain:nx.test", "full:yes.test"]);
  });
});

test("sluice check locates bad arguments of dynamic_domain_set and learn_domain", () => {
  const dir = tempDir();
  const file = join(dir, "bad.yaml");
  writeFileSync(
    file,
    `plugins:
  - tag: plain
    type: domain_set
    args: { exps: [a.test] }
  - tag: dyn
    type: dynamic_domain_set
    args:
      path: dyn.txt
      bootstrap_rules: ["ok.test", "regexp:("]
      max_entries: 10
      max_rules: 10
  - tag: learn1
    type: learn_domain
    args: { provider: $plain }
  - tag: learn2
    type: learn_domain
    args: { provider: dyn, ttl: soon, qtypes: [A, NOPE] }
  - tag: main
    type: sequence
    args:
      - { matches: ["qname $dyn", "qname $plain"], exec: $learn1 }
      - exec: $learn2
`,
  );
  const out = checkErrors(file);
  expect(out).toMatch(/bad\.yaml:9:\d+: error: .*bootstrap_rules\[1\].*regexp:\(/);
  expect(out).toMatch(/bad\.yaml:11:\d+: error: .*max_rules is another name for max_entries/);
  expect(out).toMatch(/bad\.yaml:14:\d+: error: .*provider.*expects plugin type 'dynamic_domain_set', but 'plain' has type 'domain_set'/);
  expect(out).toMatch(/bad\.yaml:17:\d+: error: .*ttl.*soon/);
  expect(out).toMatch(/bad\.yaml:17:\d+: error: .*qtypes\[1\].*'NOPE' is not a query type/);
});
