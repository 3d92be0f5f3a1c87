// `sluice import mosdns`: a mosdns v5 configuration (written from its documented plugins) becomes a
// Sluice configuration that passes `sluice check` and answers as mosdns did; plugins Sluice lacks are
// listed in the header and on stderr, and the sequence rules that use them are left as comments.

import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { QTYPE } from "../../src/dns/constants.js";
import { runCli, type CliResult } from "../helpers/cli.js";
import { answerIps, query, rcodeOf } from "../helpers/dns.js";
import { answerWith, startResponder, type Responder } from "../helpers/responder.js";
import { startSluice, tempDir, type RunningSluice } from "../helpers/sluice.js";

let upstream: Responder;
let backup: Responder;
let imported: CliResult;
let checked: CliResult;
let yamlText: string;
let sluice: RunningSluice;

const setsYaml = `plugins:
  - tag: ads
    type: domain_set
    args:
      exps: ["domain:ads.example"]
      files: ["lists/ads.txt"]
  - tag: lan_ips
    type: ip_set
    args:
      ips: ["192.168.0.0/16", "127.0.0.0/8"]
`;

function mosdnsConfig(): string {
  return `log:
  level: info
  production: true
api:
  http: "127.0.0.1:0"
include:
  - sets.yaml
plugins:
  - tag: local_hosts
    type: hosts
    args:
      entries: ["nas.home.arpa 192.168.1.10"]
      files: ["hosts.txt"]
  - tag: rewrite
    type: redirect
    args:
      rules: ["old.example new.example"]
  - tag: records
    type: arbitrary
    args:
      rules: ['txt.home.arpa. 300 IN TXT "hello"']
  - tag: lazy
    type: cache
    args: { size: 1024, lazy_cache_ttl: 86400 }
  - tag: remote
    type: forward
    args:
      concurrent: 2
      upstreams:
        - addr: udp://127.0.0.1:${upstream.port}
          so_mark: 255
          enable_http3: false
        - addr: quic://dns.adguard.com
  - tag: doq_only
    type: forward
    args:
      upstreams: [{ addr: "quic://dns.example" }]
  - tag: secondary
    type: forward
    args:
      upstreams: [{ addr: "127.0.0.1:${backup.port}" }]
  - tag: resolve
    type: fallback
    args: { primary: remote, secondary: secondary, threshold: 500, always_standby: false }
  - tag: stats
    type: metrics_collector
    args: { name: main }
  - tag: ecs
    type: ecs_handler
    args: { send: true, mask4: 24 }
  - tag: summary
    type: query_summary
    args: { msg: done }
  - tag: geo
    type: some_future_plugin
    args: { x: 1 }
  - tag: sinkhole
    type: black_hole
    args: "0.0.0.0 ::"
  - tag: clamp
    type: ttl
    args: "60-3600"
  - tag: lan_reply
    type: sequence
    args:
      - exec: $local_hosts
      - matches: has_resp
        exec: accept
      - exec: return
  - tag: refuse
    type: sequence
    args:
      - exec: reject 5
  - tag: main
    type: sequence
    args:
      - exec: $summary
      - exec: $stats
      - matches: qname $ads
        exec: reject 3
      - matches: [qname domain:tracker.example]
        exec: $sinkhole
      - matches: has_resp
        exec: accept
      - exec: jump lan_reply
      - exec: $records
      - matches: has_resp
        exec: accept
      - matches: qname domain:goto.example
        exec: goto refuse
      - matches: qtype 65
        exec: reject 0
      - matches: "!client_ip $lan_ips"
        exec: mark 7
      - matches: qname $geo
        exec: $doq_only
      - exec: $doq_only
      - exec: $ecs
      - exec: $rewrite
      - exec: $lazy
      - exec: $resolve
      - matches: resp_ip 0.0.0.0/8
        exec: reject 2
      - exec: $clamp
  - tag: udp
    type: udp_server
    args: { entry: main, listen: "127.0.0.1:0" }
  - tag: tcp
    type: tcp_server
    args: { entry: main, listen: "127.0.0.1:0", idle_timeout: 10 }
  - tag: doq
    type: quic_server
    args: { entry: main, listen: "127.0.0.1:853", cert: a.pem, key: b.pem }
`;
}

beforeAll(async () => {
  upstream = await startResponder((q) => answerWith(q, ["192.0.2.10"], 5));
  backup = await startResponder((q) => answerWith(q, ["192.0.2.20"]));
  const src = tempDir("mosdns-src-");
  mkdirSync(join(src, "lists"));
  writeFileSync(join(src, "config.yaml"), mosdnsConfig());
  writeFileSync(join(src, "sets.yaml"), setsYaml);
  writeFileSync(join(src, "lists", "ads.txt"), "domain:listed.example\n");
  writeFileSync(join(src, "hosts.txt"), "file-host.home.arpa 192.168.1.11\n");
  const out = tempDir("mosdns-out-");
  imported = await runCli(["import", "mosdns", src, "-o", out, "--force"]);
  checked = await runCli(["check", "-c", join(out, "sluice.yaml"), "-d", out]);
  yamlText = readFileSync(join(out, "sluice.yaml"), "utf8");
  sluice = await startSluice(yamlText, {}, { dir: out });
}, 60_000);

afterAll(async () => {
  await sluice?.stop();
  await Promise.all([upstream?.close(), backup?.close()]);
});

describe("sluice import mosdns", () => {
  it("writes a configuration that passes sluice check", () => {
    expect(imported.code, imported.stderr).toBe(0);
    expect(checked.code, checked.stderr + checked.stdout).toBe(0);
  });

  it("lists plugins and arguments Sluice lacks in the header and on stderr, and comments out the rules that use them", () => {
    for (const line of [
      "plugins[doq] (quic_server):",
      "plugins[geo] (some_future_plugin):",
      "plugins[doq_only] (forward):",
      'remote.args.upstreams[1]: "quic://dns.adguard.com"',
      "remote.args.upstreams[0].so_mark: 255",
      "log.production: true",
      "plugins[main].args[11]:",
      "plugins[main].args[12]:",
    ]) {
      expect(yamlText).toContain(`#   - ${line}`);
      expect(imported.stderr).toContain(`unsupported: ${line}`);
    }
    expect(yamlText).toMatch(/# not imported \('geo' is not carried over\): matches: "qname \$geo", exec: "\$doq_only"\n\s+# not imported \('doq_only' is not carried over\): exec: "\$doq_only"\n\s+- exec: \$ecs/);
    expect(yamlText).not.toContain("enable_http3");
  });

  it("answers names of a domain set (inline and from an included file's list) as the rule says", async () => {
    expect(rcodeOf(await query(sluice.udpPort, "www.ads.example"))).toBe(3);
    expect(rcodeOf(await query(sluice.udpPort, "listed.example"))).toBe(3);
    expect(answerIps(await query(sluice.udpPort, "tracker.example"))).toEqual(["0.0.0.0"]);
  });

  it("answers local records from hosts (inline and file) and arbitrary", async () => {
    expect(answerIps(await query(sluice.udpPort, "nas.home.arpa"))).toEqual(["192.168.1.10"]);
    expect(answerIps(await query(sluice.udpPort, "file-host.home.arpa"))).toEqual(["192.168.1.11"]);
    const txt = await query(sluice.udpPort, "txt.home.arpa", "TXT");
    expect(txt.answers.map((r) => r.type)).toEqual([QTYPE.TXT]);
  });

  it("forwards other names through the fallback, with redirect and ttl applied", async () => {
    const a = await query(sluice.udpPort, "allowed.example");
    expect(answerIps(a)).toEqual(["192.0.2.10"]);
    expect(a.answers[0].ttl).toBe(60);
    const r = await query(sluice.udpPort, "old.example");
    expect(r.answers[0].type).toBe(QTYPE.CNAME);
    expect(answerIps(r)).toEqual(["192.0.2.10"]);
    expect(upstream.seen.some((s) => s.query.questions[0].name === "new.example")).toBe(true);
  });

  it("keeps goto and reject", async () => {
    expect(rcodeOf(await query(sluice.udpPort, "goto.example"))).toBe(5);
    const https = await query(sluice.udpPort, "allowed.example", QTYPE.HTTPS);
    expect([rcodeOf(https), https.answers.length]).toEqual([0, 0]);
  });
});
