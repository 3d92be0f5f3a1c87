// An OxiDNS 1.4 configuration, written from OxiDNS's own plugin docs (argument names, quoting and
// defaults as its users write them), using what issue 25 brought over: dynamic_domain_set and
// learn_domain, black_hole modes, `reject 0 soa`, ip_selector, forward's min_conns / socks5 without a
// scheme / concurrent, the cache's OxiDNS options, and http_server's json_api. It passes `sluice check`
// unchanged, starts as the real program, and answers as OxiDNS documents.
import { execFile } from "node:child_process";
import net from "node:net";
import { join } from "node:path";
import { promisify } from "node:util";
import { writeFileSync } from "node:fs";
import { afterAll, beforeAll, expect, test } from "vitest";
import type { Message } from "../../src/dns/message.js";
import { runCli, startCli, type RunningCli } from "../helpers/cli.js";
import { answerIps, query, rcodeOf } from "../helpers/dns.js";
import { answerWith, startResponder, type Responder } from "../helpers/responder.js";
import { tempDir } from "../helpers/sluice.js";
import { startSocks5, type Socks5Server } from "../helpers/socks5.js";

const run = promisify(execFile);

/** What the upstreams know: geo.example is in 10/8 (learned), multi.example has two addresses. */
function upstreamAnswer(q: Message): Message {
  const name = q.questions[0].name.toLowerCase().replace(/\.$/, "");
  if (name === "geo.example") return answerWith(q, ["10.1.2.3"], 300);
  if (name === "multi.example") return answerWith(q, ["127.0.0.2", "127.0.0.1"], 300);
  return answerWith(q, ["192.0.2.80"], 300);
}

const dir = tempDir();
let udp: Responder;
let tcp: Responder;
let proxy: Socks5Server;
let probeTarget: net.Server;
let cli: RunningCli;
let dnsPort = 0;
let dohPort = 0;

function oxidnsConfig(probePort: number): string {
  return `api:
  http: "127.0.0.1:0"

plugins:
  - tag: learned_block
    type: dynamic_domain_set
    args:
      path: "./learned-block.txt"
      bootstrap_rules:
        - "domain:ads.example"
      queue_size: 1024
      batch_size: 256
      flush_interval_ms: 200
      max_entries: 10000
      entry_ttl_seconds: 86400
      cleanup_interval_seconds: 600
      metadata_path: "./learned-block.meta.json"

  - tag: learn_geo
    type: learn_domain
    args:
      provider: "learned_block"
      rule_kind: "full"
      qtypes: ["A", "AAAA"]
      success_only: true
      answer_required: true

  - tag: block_nxdomain
    type: black_hole
    args:
      mode: nxdomain
      short_circuit: true

  - tag: cache_main
    type: cache
    args:
      size: 8192
      lazy_cache_ttl: 120
      cache_negative: true
      max_negative_ttl: 300
      negative_ttl_without_soa: 60
      max_positive_ttl: 600
      ecs_in_key: false
      dump_file: "./dns_cache.dump"
      dump_interval: 600

  - tag: forward_main
    type: forward
    args:
      concurrent: 2
      upstreams:
        - tag: "local_udp"
          addr: "udp://127.0.0.1:${String(udp.port)}"
          timeout: 3s
        - tag: "local_tcp"
          addr: "tcp://127.0.0.1:${String(tcp.port)}"
          socks5: "${proxy.url.replace("socks5://", "")}"
          idle_timeout: 60
          min_conns: 1
          max_conns: 16
          timeout: 4s
          enable_pipeline: true

  - tag: ip_select
    type: ip_selector
    args:
      selection_mode: first_success
      probe_methods: ["tcp:${String(probePort)}"]
      probe_stagger: 200
      probe_timeout: 600
      max_wait: 1000
      top_n: 1
      dnssec_policy: reorder_only
      max_parallel_probes: 256
      cache:
        enabled: true
        size: 4096
        ttl: 3600
        failure_ttl: 60

  - tag: seq_main
    type: sequence
    args:
      - matches: "qname $learned_block"
        exec: "$block_nxdomain"
      - matches: "qname full:nodata.example"
        exec: "reject 0 soa"
      - exec: "$ip_select"
      - exec: "$cache_main"
      - matches: "has_resp"
        exec: "accept"
      - exec: "$forward_main"
      - matches: "resp_ip 10.0.0.0/8"
        exec: "$learn_geo"

  - tag: udp_in
    type: udp_server
    args:
      entry: "seq_main"
      listen: "127.0.0.1:0"

  - tag: doh_in
    type: http_server
    args:
      listen: "127.0.0.1:0"
      idle_timeout: 30
      entries:
        - path: "/dns-query"
          exec: "seq_main"
          json_api: true
`;
}

beforeAll(async () => {
  udp = await startResponder((q) => upstreamAnswer(q));
  tcp = await startResponder((q) => upstreamAnswer(q));
  proxy = await startSocks5();
  probeTarget = net.createServer((s) => s.destroy());
  await new Promise<void>((r) => probeTarget.listen(0, "127.0.0.1", () => r()));
  writeFileSync(join(dir, "sluice.yaml"), oxidnsConfig((probeTarget.address() as net.AddressInfo).port));
  cli = startCli(["-c", "sluice.yaml", "-d", dir]);
  dnsPort = Number((await cli.waitForLog((l) => l.msg === "udp server listening", 20_000)).port);
  dohPort = Number((await cli.waitForLog((l) => l.msg === "doh server listening")).port);
  await cli.waitForLog((l) => l.msg === "sluice started");
}, 40_000);

afterAll(async () => {
  cli.child.kill("SIGTERM");
  await cli.exited;
  await new Promise<void>((r) => probeTarget.close(() => r()));
  await Promise.all([udp.close(), tcp.close(), proxy.close()]);
});

test("the OxiDNS configuration passes sluice check unchanged", async () => {
  const out = await runCli(["check", "-c", join(dir, "sluice.yaml")]);
  expect(out.stderr).toBe("");
  expect(out.code).toBe(0);
});

test("forward keeps min_conns open through the scheme-less socks5 proxy before any query", () => {
  expect(proxy.targets).toContain(`127.0.0.1:${String(tcp.port)}`);
});

test("a bootstrap rule of the dynamic set is blocked by black_hole nxdomain, with an SOA for negative caching", async () => {
  const m = await query(dnsPort, "tracker.ads.example", "AAAA");
  expect(rcodeOf(m)).toBe(3);
  expect(m.answers).toEqual([]);
  expect(m.authorities.map((r) => r.type)).toEqual([6]);
});

test("reject 0 soa answers NODATA with a synthetic SOA", async () => {
  const m = await query(dnsPort, "nodata.example", "A");
  expect(rcodeOf(m)).toBe(0);
  expect(m.answers).toEqual([]);
  expect(m.authorities.map((r) => r.type)).toEqual([6]);
  expect(m.authorities[0].ttl).toBe(300);
});

test("the cache answers a repeated question without asking an upstream", async () => {
  const first = await query(dnsPort, "www.example", "A");
  expect(answerIps(first)).toEqual(["192.0.2.80"]);
  const asked = udp.seen.length + tcp.seen.length;
  const again = await query(dnsPort, "www.example", "A");
  expect(answerIps(again)).toEqual(["192.0.2.80"]);
  expect(udp.seen.length + tcp.seen.length).toBe(asked);
});

test("ip_selector keeps the one address that connects (top_n: 1)", async () => {
  const m = await query(dnsPort, "multi.example", "A");
  expect(answerIps(m)).toEqual(["127.0.0.1"]);
});

test("learn_domain adds a name answered from 10/8 to the set, and the next query is blocked", async () => {
  const first = await query(dnsPort, "geo.example", "A");
  expect(answerIps(first)).toEqual(["10.1.2.3"]);
  const base = `http://127.0.0.1:${String((cli.logs.find((l) => l.msg === "management API listening") ?? {}).port)}`;
  const listed = (await (await fetch(`${base}/api/plugins/learned_block/rules?q=geo`)).json()) as { rules: { rule: string; source: string }[] };
  expect(listed.rules.map((r) => [r.rule, r.source])).toEqual([["full:geo.example", "learned"]]);
  expect(rcodeOf(await query(dnsPort, "geo.example", "A"))).toBe(3);
});

test("the DoH path answers the JSON API (json_api: true)", async () => {
  const { stdout } = await run("curl", ["-s", "--http1.1", `http://127.0.0.1:${String(dohPort)}/dns-query?name=json.example&type=A`]);
  const body = JSON.parse(stdout) as { Status: number; Answer: { name: string; type: number; data: string }[] };
  expect(body.Status).toBe(0);
  expect(body.Answer.map((a) => [a.type, a.data])).toEqual([[1, "192.0.2.80"]]);
});
