// `adguard_rule` seen from a client over real sockets: each precedence case and modifier decides
// an answer; `question $ads` honours $dnstype while `qname $ads` leaves such rules out; a list
// edited on disk and reloaded through the API changes answers while 1 000 queries in flight are
// all answered; a malformed rule is an error naming file and line, at start and at reload.
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, expect, test } from "vitest";
import { decodeMessage } from "../../src/dns/message.js";
import { PluginInitError } from "../../src/registry/runtime.js";
import { query, buildQuery, rcodeOf, udpBurst } from "../helpers/dns.js";
import { startSluice, type RunningSluice } from "../helpers/sluice.js";

// Written from AdGuard's DNS filtering syntax documentation: one case per line, plus lines a
// browser list would bring (skipped and counted).
const FILTER = `! Title: Sluice test filter
! Expires: 1 day
[Adblock Plus 2.0]
||blocked.test^
@@||allowed.blocked.test^
||important.test^$important
@@||important.test^
||imp-exc.test^$important
@@||imp-exc.test^$important
||badfiltered.test^
||badfiltered.test^$badfilter
||deny.test^$denyallow=ok.deny.test
||v6only.test^$dnstype=AAAA
0.0.0.0 hosts-style.test hosts-alias.test # a hosts line
||*.wild.test^
/^re[0-9]+\\.regex\\.test$/
plain-exact.test
||browser.test/path/ad.js
example.com##.banner
||client.test^$client=10.0.0.1
`;

const FILLER = 100_000;
/** A big list so a reload takes long enough for queries to arrive while it runs; `extra` lines appended. */
const bigList = (extra: string[]): string => Array.from({ length: FILLER }, (_, i) => `||filler${i}.test^`).concat(extra).join("\n") + "\n";

/** 2 inline + 13 from the filter (the hosts line is two; the rule $badfilter disables and the $badfilter itself count none) + the big list. */
const RULES = 2 + 13 + FILLER + 1;

let s: RunningSluice;
/** Over UDP through `question $ads` (with $dnstype) by default, or over TCP through `qname $ads` (by name only). */
const rcode = async (name: string, type = "A", via: "question" | "qname" = "question"): Promise<number> =>
  rcodeOf(await query(via === "question" ? s.udpPort : s.tcpPort, name, type, { tcp: via === "qname" }));

beforeAll(async () => {
  s = await startSluice(
    `api: { http: "127.0.0.1:0" }
plugins:
  - tag: ads
    type: adguard_rule
    args: { rules: ["||inline.test^", "@@||ok.inline.test^"], files: [filter.txt, big.txt] }
  - tag: by_question
    type: sequence
    args:
      - { matches: "question $ads", exec: reject 3 }
      - exec: black_hole 192.0.2.1
  - tag: by_name
    type: sequence
    args:
      - { matches: "qname $ads", exec: reject 3 }
      - exec: black_hole 192.0.2.1 2001:db8::1
  - { tag: question, type: udp_server, args: { entry: by_question, listen: "127.0.0.1:0" } }
  - { tag: qname, type: tcp_server, args: { entry: by_name, listen: "127.0.0.1:0" } }
`,
    { "filter.txt": FILTER, "big.txt": bigList(["||old.test^"]) },
  );
});
afterAll(() => s.stop());

test("blocks, and an exception beats a block", async () => {
  expect(await rcode("blocked.test")).toBe(3);
  expect(await rcode("www.blocked.test")).toBe(3);
  expect(await rcode("allowed.blocked.test")).toBe(0);
  expect(await rcode("x.allowed.blocked.test")).toBe(0);
  expect(await rcode("inline.test")).toBe(3);
  expect(await rcode("ok.inline.test")).toBe(0);
  expect(await rcode("unlisted.test")).toBe(0);
});

test("$important beats an exception; an important exception beats an important block", async () => {
  expect(await rcode("important.test")).toBe(3);
  expect(await rcode("imp-exc.test")).toBe(0);
});

test("$badfilter disables the rule it names", async () => {
  expect(await rcode("badfiltered.test")).toBe(0);
});

test("$denyallow exempts a domain and its subdomains", async () => {
  expect(await rcode("deny.test")).toBe(3);
  expect(await rcode("ads.deny.test")).toBe(3);
  expect(await rcode("ok.deny.test")).toBe(0);
  expect(await rcode("a.ok.deny.test")).toBe(0);
});

test("$dnstype: `question $ads` honours it, `qname $ads` leaves the rule out", async () => {
  expect(await rcode("v6only.test", "AAAA")).toBe(3);
  expect(await rcode("v6only.test", "A")).toBe(0);
  expect(await rcode("v6only.test", "AAAA", "qname")).toBe(0);
  // Rules without $dnstype answer the same both ways.
  expect(await rcode("blocked.test", "AAAA", "qname")).toBe(3);
});

test("hosts lines, wildcard masks, regexps and plain domains", async () => {
  expect(await rcode("hosts-style.test")).toBe(3);
  expect(await rcode("hosts-alias.test")).toBe(3);
  expect(await rcode("www.hosts-style.test")).toBe(0);
  expect(await rcode("a.wild.test")).toBe(3);
  expect(await rcode("wild.test")).toBe(0);
  expect(await rcode("re12.regex.test")).toBe(3);
  expect(await rcode("rex.regex.test")).toBe(0);
  expect(await rcode("plain-exact.test")).toBe(3);
  expect(await rcode("sub.plain-exact.test")).toBe(0);
});

test("unsupported lines are skipped with one warning for the file, and counted in metrics", async () => {
  expect(await rcode("client.test")).toBe(0);
  expect(await rcode("browser.test")).toBe(0);
  const warnings = s.logs.filter((l) => typeof l.msg === "string" && l.msg.startsWith("adguard_rule: skipped"));
  expect(warnings).toHaveLength(1);
  expect(warnings[0]).toMatchObject({ source: "filter.txt", skipped: 3, first_line: 18, first_rule: "||browser.test/path/ad.js" });
  const metrics = await (await s.api("/api/metrics")).text();
  expect(metrics).toMatch(/^provider_rules_skipped\{plugin_tag="ads"\} 3$/m);
  expect(metrics).toMatch(new RegExp(`^provider_rules\\{plugin_tag="ads"\\} ${RULES}$`, "m"));
});

test("editing a list and reloading through the API changes answers; 1 000 queries during the reload are all answered", async () => {
  expect(await rcode("old.test")).toBe(3);
  expect(await rcode("new.test")).toBe(0);
  writeFileSync(join(s.dir, "big.txt"), bigList(["||new.test^"]));

  const packets = Array.from({ length: 1000 }, (_, i) => buildQuery(i % 2 === 0 ? "stable.test" : `filler${i}.test`, "A", { id: i + 1 }));
  const answers = new Map<number, Buffer>();
  let answeredDuringReload = -1;
  const [, res] = await Promise.all([
    udpBurst(s.udpPort, packets, { perTick: 5, timeoutMs: 10_000, sink: answers }),
    s.api("/api/plugins/ads/reload", { method: "POST" }).then((r) => ((answeredDuringReload = answers.size), r)),
  ]);
  expect(res.status).toBe(200);
  expect(await res.json()).toMatchObject({ ok: true, provider: "ads", rules: RULES });
  // The rebuild yields to the event loop: queries were answered while it ran.
  expect(answeredDuringReload).toBeGreaterThan(0);
  expect(answers.size).toBe(1000);
  for (const [id, raw] of answers) expect(rcodeOf(decodeMessage(raw)), `query ${id}`).toBe(id % 2 === 1 ? 0 : 3);

  expect(await rcode("new.test")).toBe(3);
  expect(await rcode("old.test")).toBe(0);
});

test("a malformed rule at reload is a 400 naming file and line; the old rules keep serving", async () => {
  writeFileSync(join(s.dir, "filter.txt"), FILTER.replace("||blocked.test^", "||nothing.test^") + "||broken.test^$dnstype=NOPE\n");
  const res = await s.api("/api/plugins/ads/reload", { method: "POST" });
  expect(res.status).toBe(400);
  const body = (await res.json()) as { ok: boolean; code: string; message: string };
  expect(body).toMatchObject({ ok: false, code: "provider_reload_failed" });
  expect(body.message).toContain("filter.txt:21:");
  expect(body.message).toContain("'NOPE' is not a DNS type name");
  expect(await rcode("blocked.test")).toBe(3);
  expect(await rcode("nothing.test")).toBe(0);
  const metrics = await (await s.api("/api/metrics")).text();
  expect(metrics).toMatch(/^provider_reload_total\{plugin_tag="ads",result="error"\} 1$/m);
});

test("a malformed rule at start stops start-up naming file and line", async () => {
  const err = await startSluice(
    `plugins:
  - { tag: ads, type: adguard_rule, args: { files: [bad.txt] } }
  - tag: main
    type: sequence
    args: [{ matches: "qname $ads", exec: reject 3 }]
  - { tag: udp, type: udp_server, args: { entry: main, listen: "127.0.0.1:0" } }
`,
    { "bad.txt": "||fine.test^\n||bad.test^b^\n" },
  ).catch((e: unknown) => e);
  expect(err).toBeInstanceOf(PluginInitError);
  expect((err as Error).message).toContain("bad.txt:2:");
  expect((err as Error).message).toContain("may only end the pattern");
});
