// `ip_selector` in front of a real upstream whose answers name loopback addresses on one port: 127.0.0.1
// (and ::1) accept, 127.0.0.2 refuses, 127.0.0.3 never answers (test/helpers/probe-targets.ts). Checked
// from a client: the order and trimming of the A/AAAA records, what each selection mode waits for, that a
// remembered result costs no connection until its TTL runs out (the clock is moved, not waited), fail-open,
// the DNSSEC policy, the probe limit, the metrics (linted by promtool), and `sluice check` errors.
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { QTYPE } from "../../src/dns/constants.js";
import { parseIP } from "../../src/dns/ip.js";
import type { Message } from "../../src/dns/message.js";
import { addressRecord, nameRdata } from "../../src/dns/rdata.js";
import { checkErrors } from "../helpers/check.js";
import { startDocExample } from "../helpers/doc-example.js";
import { answerIps, query } from "../helpers/dns.js";
import { metricValue } from "../helpers/proc.js";
import { closedPort, startProbeTargets, type ProbeTargets } from "../helpers/probe-targets.js";
import { answerWith, startResponder, type Responder } from "../helpers/responder.js";
import { startSluice, tempDir, type RunningSluice } from "../helpers/sluice.js";
import { startSocks5, type Socks5Server } from "../helpers/socks5.js";
import { requireTool } from "../helpers/tools.js";
import { spawnSync } from "node:child_process";

const SETS: Record<string, { a: string[]; aaaa: string[] }> = {
  mixed: { a: ["127.0.0.3", "127.0.0.2", "127.0.0.1"], aaaa: ["::ffff:127.0.0.3", "::ffff:127.0.0.2", "::1"] },
  pair: { a: ["127.0.0.3", "127.0.0.1"], aaaa: [] },
  refused: { a: ["127.0.0.2", "127.0.0.4"], aaaa: [] },
  single: { a: ["127.0.0.2"], aaaa: [] },
};

/** `<set>[-<n>].<plugin>.test`: the first label picks the addresses (a suffix makes another name with the same ones). */
function upstreamAnswer(q: Message): Message {
  const { name, type } = q.questions[0];
  const set = SETS[name.split(".")[0].replace(/-\d+$/, "")];
  const ips = set === undefined ? [] : type === QTYPE.A ? set.a : type === QTYPE.AAAA ? set.aaaa : [];
  const reply = answerWith(q, []);
  // A CNAME first: the address records keep their place after it.
  if (ips.length > 0) reply.answers = [{ name, type: QTYPE.CNAME, class: 1, ttl: 300, data: nameRdata(`edge.${name}`) }, ...ips.map((ip) => addressRecord(`edge.${name}`, parseIP(ip) as Uint8Array, 300))];
  return reply;
}

let targets: ProbeTargets;
let upstream: Responder;
let proxy: Socks5Server;
let s: RunningSluice;
const clock = { ms: 0 };
const accepted = (host = "127.0.0.1"): number => targets.accepted.get(host) ?? 0;

async function timed(name: string, type = "A", opts: { dnssecOk?: boolean } = {}): Promise<{ ips: string[]; ms: number; cname: boolean }> {
  const t0 = performance.now();
  const m = await query(s.udpPort, name, type, { ...opts, timeoutMs: 8000 });
  return { ips: answerIps(m), ms: performance.now() - t0, cname: m.answers[0]?.type === QTYPE.CNAME };
}

async function metrics(): Promise<string> {
  return (await s.api("/api/metrics")).text();
}

beforeAll(async () => {
  targets = await startProbeTargets();
  upstream = await startResponder(upstreamAnswer);
  proxy = await startSocks5();
  const P = targets.port;
  const closed = await closedPort();
  const slow = "probe_timeout: 5000, max_wait: 5000";
  s = await startSluice(
    `
api: { http: "127.0.0.1:0" }
network: { outbound: { remote: {} } }
plugins:
  - { tag: first, type: ip_selector, args: { probe_methods: ["tcp:${P}"], ${slow} } }
  - { tag: best, type: ip_selector, args: { selection_mode: best_within_budget, probe_methods: "tcp:${P}", probe_timeout: 5s, max_wait: 100ms, top_n: 0 } }
  - { tag: bg, type: ip_selector, args: { selection_mode: background, probe_methods: ["tcp:${P}"], probe_timeout: 300 } }
  - { tag: stagger, type: ip_selector, args: { probe_methods: ["tcp:${closed}", "tcp:${P}"], probe_stagger: 10000, ${slow} } }
  - { tag: limit, type: ip_selector, args: { selection_mode: best_within_budget, probe_methods: ["tcp:${P}"], max_parallel_probes: 1, probe_timeout: 5000, max_wait: 100, top_n: 0 } }
  - { tag: signed, type: ip_selector, args: { selection_mode: best_within_budget, probe_methods: ["tcp:${P}"], probe_timeout: 5000, max_wait: 100 } }
  - { tag: skip, type: ip_selector, args: { selection_mode: best_within_budget, dnssec_policy: skip, probe_methods: ["tcp:${P}"], probe_timeout: 5000, max_wait: 100 } }
  - { tag: nocache, type: ip_selector, args: { probe_methods: ["tcp:${P}"], ${slow}, cache: { enabled: false } } }
  - { tag: ping, type: ip_selector, args: { probe_methods: "ping tcp:${P}", ${slow} } }
  - { tag: proxied, type: ip_selector, args: { outbound: remote, socks5: "${proxy.url}", probe_methods: ["tcp:${P}"], ${slow} } }
  - tag: main
    type: sequence
    args:
${["first", "best", "bg", "stagger", "limit", "signed", "skip", "nocache", "ping", "proxied"].map((t) => `      - { matches: "qname domain:${t}.test", exec: $${t} }`).join("\n")}
      - { matches: "qname domain:quick.test", exec: "ip_selector first_success tcp:${P}" }
      - exec: forward 127.0.0.1:${upstream.port}
  - { tag: udp, type: udp_server, args: { entry: main, listen: "127.0.0.1:0" } }
`,
    {},
    { clockShift: clock },
  );
});
afterAll(async () => {
  await s?.stop();
  await upstream?.close();
  await proxy?.close();
  await targets?.close();
});

describe("selection", () => {
  test("first_success keeps the first address that connects and answers without waiting for the silent one", async () => {
    const r = await timed("mixed.first.test");
    expect(r.ips).toEqual(["127.0.0.1"]);
    expect(r.cname).toBe(true);
    // 127.0.0.3 would hold the answer for max_wait (5 s).
    expect(r.ms).toBeLessThan(2000);
  });

  test("AAAA the same way: ::1 connects, the mapped loopback addresses do not", async () => {
    const before = accepted("::1");
    expect((await timed("mixed.first.test", "AAAA")).ips).toEqual(["::1"]);
    expect(accepted("::1")).toBe(before + 1);
  });

  test("best_within_budget waits max_wait, then orders: connected, not known yet, failed (top_n 0 keeps all)", async () => {
    const r = await timed("mixed.best.test");
    expect(r.ips).toEqual(["127.0.0.1", "127.0.0.3", "127.0.0.2"]);
    expect(r.ms).toBeGreaterThanOrEqual(90);
    expect(r.ms).toBeLessThan(2000);
  });

  test("quick setup: `ip_selector first_success tcp:<port>`", async () => {
    expect((await timed("mixed.quick.test")).ips).toEqual(["127.0.0.1"]);
  });

  test("background answers at once unchanged, and later answers use what the probes found", async () => {
    expect((await timed("mixed.bg.test")).ips).toEqual(["127.0.0.3", "127.0.0.2", "127.0.0.1"]);
    let ips: string[] = [];
    for (let i = 0; i < 100 && ips.length !== 1; i++) {
      await new Promise((r) => setTimeout(r, 20));
      ips = (await timed("mixed.bg.test")).ips;
    }
    expect(ips).toEqual(["127.0.0.1"]);
  });

  test("a refused method gives way to the next at once, without waiting probe_stagger (10 s)", async () => {
    const r = await timed("mixed.stagger.test");
    expect(r.ips).toEqual(["127.0.0.1"]);
    expect(r.ms).toBeLessThan(2000);
  });

  test("ping is not run by Sluice: counted unavailable, the next method decides", async () => {
    expect((await timed("pair.ping.test")).ips).toEqual(["127.0.0.1"]);
    expect(metricValue(await metrics(), "ip_selector_probe_total", 'plugin_tag="ping",method="ping",result="unavailable"')).toBeGreaterThanOrEqual(2);
    expect(s.logs.some((l) => /ping probes are not supported/.test(String(l.msg)))).toBe(true);
  });

  test("socks5: the probes connect through the proxy", async () => {
    expect((await timed("pair.proxied.test")).ips).toEqual(["127.0.0.1"]);
    expect(proxy.targets).toEqual(expect.arrayContaining([`127.0.0.1:${targets.port}`, `127.0.0.3:${targets.port}`]));
  });
});

describe("remembered results", () => {
  test("a known address costs no connection until its TTL has run out (the clock is moved)", async () => {
    await timed("pair-1.first.test");
    const before = accepted();
    const cacheHits = metricValue(await metrics(), "ip_selector_selected_total", 'plugin_tag="first",source="cache"');
    const again = await timed("pair-2.first.test");
    expect(again.ips).toEqual(["127.0.0.1"]);
    expect(accepted()).toBe(before);
    expect(metricValue(await metrics(), "ip_selector_selected_total", 'plugin_tag="first",source="cache"')).toBe(cacheHits + 1);
    clock.ms += 3601_000;
    try {
      expect((await timed("pair-3.first.test")).ips).toEqual(["127.0.0.1"]);
      expect(accepted()).toBe(before + 1);
    } finally {
      clock.ms -= 3601_000;
    }
  });

  test("with cache.enabled false every answer probes again", async () => {
    await timed("pair.nocache.test");
    const before = accepted();
    expect((await timed("pair.nocache.test")).ips).toEqual(["127.0.0.1"]);
    expect(accepted()).toBe(before + 1);
  });
});

describe("fail-open and limits", () => {
  test("no address connects: the answer is unchanged (source fallback)", async () => {
    const fallback = metricValue(await metrics(), "ip_selector_selected_total", 'plugin_tag="best",source="fallback"');
    expect((await timed("refused.best.test")).ips).toEqual(["127.0.0.2", "127.0.0.4"]);
    expect(metricValue(await metrics(), "ip_selector_selected_total", 'plugin_tag="best",source="fallback"')).toBe(fallback + 1);
  });

  test("one address: nothing to choose, nothing probed", async () => {
    const before = metricValue(await metrics(), "ip_selector_probe_total", `plugin_tag="first",method="tcp:${targets.port}",result="failure"`);
    expect((await timed("single.first.test")).ips).toEqual(["127.0.0.2"]);
    expect(metricValue(await metrics(), "ip_selector_probe_total", `plugin_tag="first",method="tcp:${targets.port}",result="failure"`)).toBe(before);
  });

  test("max_parallel_probes 1: the silent address holds the only slot, the others are not probed (counted), fail-open", async () => {
    expect((await timed("mixed.limit.test")).ips).toEqual(["127.0.0.3", "127.0.0.2", "127.0.0.1"]);
    expect(metricValue(await metrics(), "ip_selector_dropped_probe_total", 'plugin_tag="limit",reason="parallel_limit"')).toBe(2);
  });

  test("DNSSEC: with the DO bit, top_n is ignored (reorder only); dnssec_policy skip leaves the answer alone", async () => {
    expect((await timed("pair.signed.test", "A", { dnssecOk: true })).ips).toEqual(["127.0.0.1", "127.0.0.3"]);
    expect((await timed("pair-1.signed.test")).ips).toEqual(["127.0.0.1"]);
    expect((await timed("pair.skip.test", "A", { dnssecOk: true })).ips).toEqual(["127.0.0.3", "127.0.0.1"]);
  });
});

test("metrics: probe results, selections, remembered entries, connect-time histogram; promtool finds nothing to say", async () => {
  requireTool("promtool");
  const text = await metrics();
  const m = `plugin_tag="first",method="tcp:${targets.port}"`;
  expect(metricValue(text, "ip_selector_probe_total", `${m},result="success"`)).toBeGreaterThanOrEqual(1);
  expect(metricValue(text, "ip_selector_probe_total", `${m},result="failure"`)).toBeGreaterThanOrEqual(1);
  expect(metricValue(text, "ip_selector_probe_duration_seconds_count", m)).toBeGreaterThanOrEqual(1);
  expect(metricValue(text, "ip_selector_selected_total", 'plugin_tag="first",source="probe"')).toBeGreaterThanOrEqual(1);
  expect(metricValue(text, "ip_selector_cache_entries", 'plugin_tag="first"')).toBeGreaterThanOrEqual(2);
  expect(metricValue(text, "ip_selector_dropped_probe_total", 'plugin_tag="first",reason="inflight"')).toBeGreaterThanOrEqual(1);
  const lint = spawnSync("promtool", ["check", "metrics"], { input: text, encoding: "utf8" });
  expect(lint.stdout + lint.stderr).toBe("");
  expect(lint.status).toBe(0);
});

test("sluice check locates bad args at their line and column", () => {
  const dir = tempDir();
  const cases: [string, RegExp][] = [
    ['{ probe_methods: ["tcp:443", "udp:53"] }', /sluice\.yaml:\d+:\d+: error: .*'udp:53' is not a probe method/],
    ["{ probe_methods: [none, tcp:80] }", /'none' cannot be listed with other probe methods/],
    ["{ selection_mode: fastest }", /sluice\.yaml:\d+:\d+: error: .*selection_mode/],
    ["{ top_n: -1 }", /sluice\.yaml:\d+:\d+: error: .*top_n/],
    ["{ max_wait: 2m }", /max_wait must be between 1ms and 60s/],
    ["{ outbound: proxy }", /no outbound profile 'proxy' in network.outbound/],
    ['{ socks5: "http://127.0.0.1:1080" }', /socks5 must be a socks5:\/\/ URL/],
    ["{ cache: { ttl: soon } }", /'soon' is not a duration/],
  ];
  for (const [args, message] of cases) {
    writeFileSync(join(dir, "sluice.yaml"), `plugins:\n  - tag: sel\n    type: ip_selector\n    args: ${args}\n  - { tag: main, type: sequence, args: [{ exec: $sel }, { exec: "ip_selector background tcp:443" }] }\n`);
    const errors = checkErrors(join(dir, "sluice.yaml"));
    expect(errors, args).toMatch(/sluice\.yaml:4:\d+: error: /);
    expect(errors, args).toMatch(message);
  }
  writeFileSync(join(dir, "sluice.yaml"), `plugins:\n  - { tag: main, type: sequence, args: [{ exec: "ip_selector fastest" }] }\n`);
  expect(checkErrors(join(dir, "sluice.yaml"))).toMatch(/sluice\.yaml:2:\d+: error: .*'fastest' is not a probe method/);
});

test("docs/plugins.md, Example: the address that takes connections, runs as printed", async () => {
  requireTool("dig");
  const ex = await startDocExample("the address that takes connections", { replace: [["tcp:8080", `tcp:${targets.port}`]] });
  try {
    for (const r of await ex.runAll()) expect(r.output, r.command).toBe(r.printed);
  } finally {
    await ex.stop();
  }
});
