// The /api/metrics exposition of a real process with every plugin type that has metrics, after
// traffic through each of them, passes `promtool check metrics` with no lint output at all.
// promtool comes with the Debian package `prometheus`; without it this test fails, it never skips.
import { spawn, spawnSync } from "node:child_process";
import { rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, expect, test } from "vitest";
import { startCli, type RunningCli } from "../helpers/cli.js";
import { ask, buildQuery, rcodeOf, udpExchange } from "../helpers/dns.js";
import { answerWith, startResponder, type Responder } from "../helpers/responder.js";
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
let run: RunningCli;
let dir: string;
let apiPort = 0;
let udpPort = 0;

beforeAll(async () => {
  up = await startResponder((q) => answerWith(q, ["192.0.2.1", "2001:db8::1"].filter((ip) => (q.questions[0]?.type === 28) === ip.includes(":"))));
  dir = tempDir("sluice-promtool-");
  writeFileSync(
    join(dir, "sluice.yaml"),
    `api:
  http: "127.0.0.1:0"
plugins:
  - { tag: blocklist, type: domain_set, args: { exps: ["full:bad.example"] } }
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
  - { tag: rec, type: query_recorder, args: { path: rec.db, flush_interval_ms: 20 } }
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
      - { matches: "qname $blocklist", exec: $sink }
      - exec: $rewrite
      - exec: $v4
      - exec: $c
      - exec: $fb
  - { tag: udp, type: udp_server, args: { entry: main, listen: "127.0.0.1:0" } }
  - { tag: tcp, type: tcp_server, args: { entry: main, listen: "127.0.0.1:0" } }
`,
  );
  run = startCli(["-c", "sluice.yaml", "-d", dir]);
  apiPort = Number((await run.waitForLog((l) => l.msg === "management API listening")).port);
  udpPort = Number((await run.waitForLog((l) => l.msg === "udp server listening")).port);
});

afterAll(async () => {
  run.child.kill("SIGKILL");
  await run.exited;
  await up.close();
  rmSync(dir, { recursive: true, force: true });
});

test("promtool is installed (Debian package `prometheus`; CI installs it with apt-get)", () => {
  const probe = spawnSync(PROMTOOL, ["--version"], { encoding: "utf8" });
  expect(probe.error, `cannot run '${PROMTOOL}': install the Debian package 'prometheus' (apt-get install prometheus) or set PROMTOOL`).toBeUndefined();
  expect(probe.status).toBe(0);
});

test("a scrape after traffic through every metered plugin passes `promtool check metrics` with no output", async () => {
  for (const name of ["a.example", "a.example", "nas.home.arpa", "printer.lan", "bad.example", "old.example", "reload.lan"]) {
    expect(rcodeOf(await ask(udpPort, name, "A")), name).not.toBe(2);
  }
  await ask(udpPort, "dual.example", "AAAA");
  await ask(udpPort, "10.1.168.192.in-addr.arpa", "PTR");
  await udpExchange(udpPort, Buffer.from(buildQuery("x.example").subarray(0, 14)), 500);
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
    "ratelimit_allowed_total",
    "fallback_primary_total",
    "query_recorder_records_written_total",
    "query_recorder_dropped_total",
    "query_recorder_batch_duration_seconds",
    "query_recorder_records",
    "query_recorder_database_bytes",
    "query_recorder_queue_records",
    "process_cpu_seconds_total",
    "nodejs_active_handles",
  ]) {
    expect(text, family).toMatch(new RegExp(`^# TYPE ${family} `, "m"));
  }
  expect(text).toMatch(/^server_request_duration_seconds_count\{plugin_tag="udp",protocol="udp"\} [1-9]/m);
  expect(text).toMatch(/^forward_query_duration_seconds_count\{plugin_tag="fwd"\} [1-9]/m);
  expect(text).toMatch(/^query_recorder_batch_duration_seconds_count\{plugin_tag="rec"\} [1-9]/m);

});
