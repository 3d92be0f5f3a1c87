// The /api/metrics exposition of a real process with every plugin type that has metrics, after
// traffic through each of them, passes `promtool check metrics` with no lint output at all.
// promtool comes with the Debian package `prometheus`; without it this test fails, it never skips.
import { spawn, spawnSync } from "node:child_process";
import { rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, expect, test } from "vitest";
import { startCli, type RunningCli } from "../helpers/cli.js";
import { query, buildQuery, rcodeOf, udpExchange } from "../helpers/dns.js";
import { answerWith, startResponder, type Responder } from "../helpers/responder.js";
import { startFileServer, type FileServer } from "../helpers/file-server.js";
import { countryMmdb, geoipDat, geositeDat } from "../helpers/geodata.js";
import { tempDir } from "../helpers/sluice.js";

const PROMTOOL = process.env.PROMTOOL ?? "promtool";

function promtoolCheck(text: string): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(PROMTOOL, ["check", "metrics"]);
    let output = "";
    child.stdout.on("data", (d: Buffer) => (output += d.toString()));
    child.stderr.on("data", (d: Buffer) => (output += d.toString()));
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, output }));
    child.stdin.end(text);
  });
}

let up: Responder;
let files: FileServer;
let run: RunningCli;
let dir: string;
let apiPort = 0;
let udpPort = 0;
let dohPort = 0;

beforeAll(async () => {
  up = await startResponder((q) => answerWith(q, ["192.0.2.1", "2001:db8::1"].filter((ip) => (q.questions[0]?.type === 28) === ip.includes(":"))));
  files = await startFileServer();
  files.set("list.txt", "full:listed.example\n");
  dir = tempDir("sluice-promtool-");
  writeFileSync(join(dir, "geosite.dat"), geositeDat({ cn: [{ type: "domain", value: "cn.example" }] }));
  writeFileSync(join(dir, "geoip.dat"), geoipDat({ cn: { cidrs: ["1.0.1.0/24"] } }));
  writeFileSync(join(dir, "country.mmdb"), countryMmdb([{ cidr: "192.0.2.0/24", country: "US" }]));
  writeFileSync(join(dir, "filter.txt"), "||ads.example^\n||x.example^$third-party\n");
  writeFileSync(
    join(dir, "sluice.yaml"),
    `api:
  http: "127.0.0.1:0"
plugins:
  - { tag: blocklist, type: domain_set, args: { exps: ["full:bad.example"] } }
  - { tag: ads, type: adguard_rule, args: { files: [filter.txt] } }
  - { tag: site_cn, type: geosite, args: { file: geosite.dat, selectors: [cn] } }
  - { tag: ip_cn, type: geoip, args: { file: geoip.dat, selectors: [cn] } }
  - { tag: ip_us, type: geoip, args: { file: country.mmdb, selectors: [us] } }
  - { tag: lan_hosts, type: hosts, args: { entries: ["nas.home.arpa 192.168.1.10"], short_circuit: true } }
  - { tag: local, type: arbitrary, args: { rules: ["printer.lan. 300 IN A 192.168.1.20"], short_circuit: true } }
  - { tag: sink, type: black_hole, args: { ips: "0.0.0.0 ::", short_circuit: true } }
  - { tag: rewrite, type: redirect, args: { rules: ["old.example new.example"] } }
  - { tag: v4, type: prefer_ipv4 }
  - { tag: rdns, type: reverse_lookup, args: { ttl: 1h, handle_ptr: true } }
  - { tag: reloader, type: reload_provider, args: "$blocklist" }
  - { tag: limiter, type: rate_limiter, args: { qps: 1000, burst: 1000 } }
  - { tag: c, type: cache, args: { size: 64 } }
  - { tag: fwd, type: forward, args: { upstreams: [{ addr: "127.0.0.1:${up.port}", tag: local_up }] } }
  - { tag: fwd2, type: forward, args: { upstreams: [{ addr: "127.0.0.1:${up.port}" }] } }
  - { tag: fb, type: fallback, args: { primary: fwd, secondary: fwd2, threshold: 500 } }
  - { tag: fetch, type: download, args: { startup_if_missing: false, downloads: [{ url: "${files.url}/files/list.txt", dir: dl }] } }
  - { tag: reload_all, type: reload }
  - { tag: jobs, type: cron, args: { jobs: [{ name: fetch, schedule: "0 3 * * *", executors: [$fetch, "sleep 1"] }] } }
  - { tag: rec, type: query_recorder, args: { path: rec.db, flush_interval_ms: 20 } }
  - { tag: hook, type: http_request, args: { method: GET, url: "${files.url}/files/list.txt?q=\${qname}" } }
  - { tag: prog, type: script, args: { command: "true", args: ["\${qname}"] } }
  - tag: main
    type: sequence
    args:
      - exec: $rec
      - exec: metrics_collector all
      - { matches: "!$limiter", exec: reject 5 }
      - exec: $rdns
      - exec: $lan_hosts
      - exec: $local
      - { matches: "qname full:reload.lan", exec: $reloader }
      - { matches: "qname full:hook.lan", exec: $hook }
      - { matches: "qname full:hook.lan", exec: $prog }
      - { matches: "qname $blocklist", exec: $sink }
      - { matches: "question $ads", exec: $sink }
      - { matches: "qname $site_cn", exec: $sink }
      - exec: $rewrite
      - exec: $v4
      - exec: $c
      - exec: $fb
      - { matches: "resp_ip $ip_cn $ip_us", exec: ttl 60 }
  - { tag: udp, type: udp_server, args: { entry: main, listen: "127.0.0.1:0" } }
  - { tag: tcp, type: tcp_server, args: { entry: main, listen: "127.0.0.1:0" } }
  - { tag: doh, type: http_server, args: { listen: "127.0.0.1:0", entries: [{ path: /dns-query, exec: main }] } }
`,
  );
  run = startCli(["-c", "sluice.yaml", "-d", dir]);
  apiPort = Number((await run.waitForLog((l) => l.msg === "management API listening")).port);
  udpPort = Number((await run.waitForLog((l) => l.msg === "udp server listening")).port);
  dohPort = Number((await run.waitForLog((l) => l.msg === "doh server listening")).port);
});

afterAll(async () => {
  run.child.kill("SIGKILL");
  await run.exited;
  await up.close();
  await files.close();
  rmSync(dir, { recursive: true, force: true });
});

test("promtool is installed (Debian package `prometheus`; CI installs it with apt-get)", () => {
  const probe = spawnSync(PROMTOOL, ["--version"], { encoding: "utf8" });
  expect(probe.error, `cannot run '${PROMTOOL}': install the Debian package 'prometheus' (apt-get install prometheus) or set PROMTOOL`).toBeUndefined();
  expect(probe.status).toBe(0);
});

test("a scrape after traffic through every metered plugin passes `promtool check metrics` with no output", async () => {
  for (const name of ["a.example", "a.example", "nas.home.arpa", "printer.lan", "bad.example", "old.example", "reload.lan", "hook.lan"]) {
    expect(rcodeOf(await query(udpPort, name, "A")), name).not.toBe(2);
  }
  await query(udpPort, "dual.example", "AAAA");
  await query(udpPort, "10.1.168.192.in-addr.arpa", "PTR");
  await udpExchange(udpPort, Buffer.from(buildQuery("x.example").subarray(0, 14)), 500);
  expect((await fetch(`http://127.0.0.1:${apiPort}/api/plugins/jobs/jobs/fetch/run`, { method: "POST" })).status).toBe(202);
  await run.waitForLog((l) => l.msg === "cron run finished");
  const doh = await fetch(`http://127.0.0.1:${dohPort}/dns-query?dns=${buildQuery("nas.home.arpa").toString("base64url")}`);
  expect(doh.status).toBe(200);
  // The recorder's writer commits within a flush interval; its batch histogram needs one commit.
  for (let i = 0; i < 100 && !/^query_recorder_records_written_total\{plugin_tag="rec"\} [1-9]/m.test(await (await fetch(`http://127.0.0.1:${apiPort}/api/metrics`)).text()); i++) await new Promise((r) => setTimeout(r, 50));

  const res = await fetch(`http://127.0.0.1:${apiPort}/api/metrics`);
  expect(res.status).toBe(200);
  const text = await res.text();
  let checked: { code: number | null; output: string };
  try {
    checked = await promtoolCheck(text);
  } catch (err) {
    throw new Error(`cannot run '${PROMTOOL}' (${(err as Error).message}): install the Debian package 'prometheus' or set PROMTOOL`, { cause: err });
  }
  expect(checked.output, "promtool lint output").toBe("");
  expect(checked.code).toBe(0);
  // Every family a plugin declares is in this scrape, histograms with samples in them.
  for (const family of [
    "server_request_duration_seconds",
    "forward_query_duration_seconds",
    "forward_upstream_query_duration_seconds",
    "query_duration_seconds",
    "cache_entries",
    "hosts_hit_total",
    "arbitrary_answer_total",
    "blackhole_block_total",
    "redirect_total",
    "prefer_ip_suppressed_total",
    "reverse_lookup_cache_entries",
    "reload_provider_reload_total",
    "provider_rules",
    "provider_rules_skipped",
    "provider_build_duration_seconds",
    "provider_reload_total",
    "ratelimit_allowed_total",
    "fallback_primary_total",
    "cron_job_run_total",
    "cron_job_skipped_total",
    "cron_executor_error_total",
    "download_success_total",
    "download_failure_total",
    "download_timeout_total",
    "reload_trigger_total",
    "reload_error_total",
    "server_http_connections",
    "server_http_conn_closed_total",
    "forward_upstream_connections_total",
    "forward_upstream_tls_resumed_total",
    "query_recorder_records_written_total",
    "query_recorder_dropped_total",
    "query_recorder_batch_duration_seconds",
    "query_recorder_records",
    "query_recorder_database_bytes",
    "query_recorder_queue_records",
    "http_request_dispatch_total",
    "http_request_error_total",
    "http_request_dropped_total",
    "http_request_queued",
    "script_run_total",
    "script_stop_total",
    "script_error_total",
    "script_dropped_total",
    "script_queued",
    "process_cpu_seconds_total",
    "nodejs_active_handles",
  ]) {
    expect(text, family).toMatch(new RegExp(`^# TYPE ${family} `, "m"));
  }
  expect(text).toMatch(/^server_request_duration_seconds_count\{plugin_tag="udp",protocol="udp"\} [1-9]/m);
  expect(text).toMatch(/^server_request_total\{plugin_tag="doh",protocol="doh"\} 1$/m);
  expect(text).toMatch(/^forward_query_duration_seconds_count\{plugin_tag="fwd"\} [1-9]/m);
  expect(text).toMatch(/^cron_job_run_total\{plugin_tag="jobs"\} 1$/m);
  expect(text).toMatch(/^download_success_total\{plugin_tag="fetch"\} 1$/m);
  expect(text).toMatch(/^provider_rules\{plugin_tag="ads"\} 1$/m);
  expect(text).toMatch(/^provider_rules_skipped\{plugin_tag="ads"\} 1$/m);
  expect(text).toMatch(/^provider_rules\{plugin_tag="site_cn"\} 1$/m);
  expect(text).toMatch(/^provider_rules\{plugin_tag="ip_us"\} 1$/m);
  expect(text).toMatch(/^provider_reload_total\{plugin_tag="blocklist",result="ok"\} 1$/m);
  expect(text).toMatch(/^query_recorder_batch_duration_seconds_count\{plugin_tag="rec"\} [1-9]/m);
  expect(text).toMatch(/^http_request_dispatch_total\{plugin_tag="hook"\} 1$/m);
  expect(text).toMatch(/^script_run_total\{plugin_tag="prog"\} 1$/m);

});
