// `sluice import adguardhome`: an AdGuardHome.yaml written from AdGuard Home's documented format →
// the CLI writes sluice.yaml and its rule files → it passes the check → Sluice started on it blocks
// what the filters block, lets the allow list and the user exceptions through to the (local) upstream,
// answers rewrites and hosts-style user rules locally, and forwards [/domain/] upstreams to their server.

import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse, stringify } from "yaml";
import { checkConfig } from "../../src/app/app.js";
import { importConfig } from "../../src/import/adguardhome.js";
import { createCatalog } from "../../src/plugins/catalog.js";
import { runCli, type CliResult } from "../helpers/cli.js";
import { answerIps, query, rcodeOf } from "../helpers/dns.js";
import { startFileServer, type FileServer } from "../helpers/file-server.js";
import { answerWith, startResponder, type Responder } from "../helpers/responder.js";
import { startSluice, tempDir, type RunningSluice } from "../helpers/sluice.js";

type Doc = { api?: { http: string }; plugins: { tag: string; type: string; args?: unknown }[] };

let upstream: Responder;
let lanDns: Responder;
let lists: FileServer;
let src: string;
let out: string;
let imported: CliResult;
let sluice: RunningSluice;

/** An AdGuardHome.yaml of schema version 28, as AdGuard Home v0.107 writes it (only the keys that matter here). */
function adguardYaml(): string {
  return stringify({
    http: { address: "127.0.0.1:0", session_ttl: "720h" },
    users: [{ name: "admin", password: "$2y$10$abcdefghijklmnopqrstuv" }],
    auth_attempts: 5,
    language: "",
    theme: "auto",
    dns: {
      bind_hosts: ["127.0.0.1"],
      port: 0,
      ratelimit: 20,
      upstream_dns: [
        "# the local upstream",
        `127.0.0.1:${upstream.port}`,
        "quic://dns.adguard-dns.com",
        `[/lan.example/corp.example/]127.0.0.1:${lanDns.port}`,
        "[/skip.example/]#",
      ],
      upstream_dns_file: "",
      bootstrap_dns: ["9.9.9.10", "tls://1.1.1.1"],
      fallback_dns: [`127.0.0.1:${lanDns.port}`],
      upstream_mode: "load_balance",
      upstream_timeout: "10s",
      cache_size: 4194304,
      cache_ttl_min: 60,
      cache_ttl_max: 86400,
      cache_optimistic: true,
      max_goroutines: 300,
      serve_plain_dns: true,
    },
    tls: { enabled: false, port_dns_over_tls: 853, port_https: 443 },
    querylog: { enabled: true, file_enabled: true, interval: "48h", size_memory: 1000, ignored: ["ignored.example"] },
    statistics: { enabled: true, interval: "24h", ignored: [] },
    filters: [
      { enabled: true, url: `${lists.url}/files/filter.txt`, name: "AdGuard DNS filter", id: 1 },
      { enabled: false, url: `${lists.url}/files/off.txt`, name: "Disabled list", id: 2 },
      { enabled: true, url: join(src, "local-list.txt"), name: "Local list", id: 3 },
    ],
    whitelist_filters: [{ enabled: true, url: `${lists.url}/files/allow.txt`, name: "Allow list", id: 4 }],
    user_rules: ["! my rules", "||userblocked.example^", "@@||fine.ads.example^", "192.168.1.20 printer.lan", "||rw.example^$dnsrewrite=1.2.3.4"],
    dhcp: { enabled: true, interface_name: "eth0" },
    filtering: {
      protection_enabled: true,
      filtering_enabled: true,
      blocking_mode: "nxdomain",
      blocked_response_ttl: 10,
      filters_update_interval: 12,
      parental_enabled: true,
      safebrowsing_enabled: false,
      safe_search: { enabled: true, google: true },
      blocked_services: { ids: ["tiktok"], schedule: { time_zone: "Local" } },
      parental_block_host: "family-block.dns.adguard.com",
      cache_time: 30,
      rewrites: [
        { domain: "nas.lan", answer: "192.168.1.10" },
        { domain: "*.lab.lan", answer: "10.0.0.5" },
        { domain: "media.lan", answer: "nas.lan" },
        { domain: "keep.lan", answer: "A" },
        { domain: "old.lan", answer: "10.9.9.9", enabled: false },
      ],
    },
    clients: {
      runtime_sources: { whois: true, arp: true, rdns: true, dhcp: true, hosts: true },
      persistent: [
        { name: "Kid's Tablet", ids: ["192.168.1.50", "aa:bb:cc:dd:ee:ff", "kidtablet"], tags: ["device_tablet"], use_global_settings: true, use_global_blocked_services: true },
        {
          name: "Work Laptop",
          ids: ["192.168.1.60"],
          use_global_settings: false,
          filtering_enabled: false,
          safebrowsing_enabled: true,
          upstreams: [`127.0.0.1:${upstream.port}`],
          use_global_blocked_services: true,
          ignore_querylog: true,
        },
      ],
    },
    log: { file: "", verbose: false },
    os: { group: "", user: "" },
    schema_version: 28,
  });
}

beforeAll(async () => {
  upstream = await startResponder((q) => answerWith(q, ["192.0.2.99"]));
  lanDns = await startResponder((q) => answerWith(q, ["10.1.1.1"]));
  lists = await startFileServer();
  lists.set("filter.txt", "! Title: test filter\n||ads.example^\n||tracker.example^\n");
  lists.set("allow.txt", "||allowed.ads.example^\n");
  src = tempDir("agh-src-");
  out = join(tempDir("agh-out-"), "imported");
  writeFileSync(join(src, "local-list.txt"), "0.0.0.0 localblocked.example\n");
  writeFileSync(join(src, "AdGuardHome.yaml"), adguardYaml());
  imported = await runCli(["import", "adguardhome", src, "-o", out]);
  expect(imported.stderr + imported.stdout).toContain("setting(s) not imported");
  sluice = await startSluice(readFileSync(join(out, "sluice.yaml"), "utf8"), {}, { dir: out });
}, 60_000);

afterAll(async () => {
  await sluice?.stop();
  await Promise.all([upstream?.close(), lanDns?.close(), lists?.close()]);
});

describe("sluice import adguardhome", () => {
  it("writes a configuration that passes the check, headed by what was not imported", () => {
    expect(imported.code, imported.stderr).toBe(0);
    expect(() => checkConfig(join(out, "sluice.yaml"), createCatalog())).not.toThrow();
    const text = readFileSync(join(out, "sluice.yaml"), "utf8");
    const head = text.slice(0, text.indexOf("# Notes:"));
    const expected = [
      "dns.upstream_dns: \"quic://dns.adguard-dns.com\"",
      "dns.upstream_dns: \"[/skip.example/]#\"",
      "dns.bootstrap_dns: \"tls://1.1.1.1\"",
      "dns.ratelimit: 20",
      "filtering.parental_enabled: true",
      "filtering.safe_search: true",
      "filtering.blocked_services.ids: [\"tiktok\"]",
      "filtering.rewrites: {\"domain\":\"keep.lan\",\"answer\":\"A\"}",
      "user_rules: \"||rw.example^$dnsrewrite=1.2.3.4\"",
      "clients.persistent[Work Laptop].safebrowsing_enabled: true",
      "clients.persistent[Work Laptop].ignore_querylog: true",
      "querylog.ignored: [\"ignored.example\"]",
      "dhcp.enabled: true",
      "users: [\"admin\"]",
    ];
    for (const e of expected) {
      expect(head, e).toContain(`#   - ${e}`);
      expect(imported.stderr, e).toContain(`unsupported: ${e}`);
    }
    // Settings that were mapped, or that are not about DNS, are not listed.
    for (const absent of ["dns.cache_size", "dns.max_goroutines", "language", "log", "os", "schema_version", "filtering.cache_time", "dns.upstream_dns: \"127.0.0.1"]) {
      expect(head).not.toContain(`#   - ${absent}`);
    }
    expect(imported.stderr).toContain("note: filters: 'Disabled list'");
  });

  it("maps each setting to its plugin", () => {
    const doc = parse(readFileSync(join(out, "sluice.yaml"), "utf8")) as Doc;
    const args = (tag: string): unknown => doc.plugins.find((p) => p.tag === tag)?.args;
    expect(doc.api).toEqual({ http: "127.0.0.1:0" });
    expect(args("upstream")).toEqual({ upstreams: [{ addr: `udp://127.0.0.1:${upstream.port}`, timeout: "10s" }] });
    expect(args("upstream_fallback")).toEqual({ upstreams: [{ addr: `udp://127.0.0.1:${lanDns.port}`, timeout: "10s" }] });
    expect(args("resolve")).toEqual({ primary: "upstream", secondary: "upstream_fallback", threshold: 10000 });
    expect(args("cache")).toEqual({ size: 8192, min_positive_ttl: 60, max_positive_ttl: 86400, lazy_cache_ttl: 43200 });
    expect(args("block_answer")).toEqual({ mode: "nxdomain", ttl: 10, short_circuit: true });
    expect(args("refresh_lists")).toMatchObject({ jobs: [{ schedule: "0 */12 * * *" }] });
    expect(args("recorder")).toEqual({ path: "data/queries.db", retention_days: 2 });
    expect(args("clients")).toEqual({
      clients: [
        { name: "kid-s-tablet", addresses: ["192.168.1.50"], macs: ["aa:bb:cc:dd:ee:ff"], ids: ["kidtablet"], groups: ["device_tablet"] },
        { name: "work-laptop", addresses: ["192.168.1.60"], macs: [], ids: [], groups: ["unfiltered"] },
      ],
      groups: [{ name: "device_tablet" }, { name: "unfiltered" }],
      pause: ["blocked"],
    });
    expect(args("main")).toContainEqual({ matches: "client work-laptop", exec: "$forward_client_1" });
    expect(readFileSync(join(out, "rules/hosts.txt"), "utf8")).toBe("printer.lan 192.168.1.20\nnas.lan 192.168.1.10\nregexp:^.+\\.lab\\.lan$ 10.0.0.5\n");
  });

  it("blocks what the filters block and lets the rest through to the upstream", async () => {
    const port = sluice.port("udp");
    for (const name of ["ads.example", "sub.ads.example", "tracker.example", "userblocked.example", "localblocked.example"]) {
      expect(rcodeOf(await query(port, name)), name).toBe(3);
    }
    for (const name of ["allowed.ads.example", "fine.ads.example", "example.org"]) {
      const m = await query(port, name);
      expect([rcodeOf(m), answerIps(m)], name).toEqual([0, ["192.0.2.99"]]);
    }
  });

  it("answers rewrites and hosts-style user rules locally, and conditional domains from their server", async () => {
    const port = sluice.port("udp");
    expect(answerIps(await query(port, "nas.lan"))).toEqual(["192.168.1.10"]);
    expect(answerIps(await query(port, "a.lab.lan"))).toEqual(["10.0.0.5"]);
    expect(answerIps(await query(port, "printer.lan"))).toEqual(["192.168.1.20"]);
    const media = await query(port, "media.lan");
    expect(media.answers[0]?.name.toLowerCase()).toBe("media.lan");
    expect(answerIps(media)).toEqual(["192.168.1.10"]);
    expect(answerIps(await query(port, "host.lan.example"))).toEqual(["10.1.1.1"]);
    expect(answerIps(await query(sluice.port("tcp"), "intranet.corp.example", "A", { tcp: true }))).toEqual(["10.1.1.1"]);
  });
});

describe("sluice import adguardhome: the other forms", () => {
  it("refuses to overwrite without --force, and exits 2 on usage and 1 on a source it cannot read", async () => {
    const again = await runCli(["import", "adguardhome", join(src, "AdGuardHome.yaml"), "-o", out]);
    expect([again.code, again.stderr]).toEqual([1, expect.stringContaining("already exist")]);
    const [forced, unknown, short, missing] = await Promise.all([
      runCli(["import", "adguardhome", join(src, "AdGuardHome.yaml"), "-o", out, "--force"]),
      runCli(["import", "nosuchtool", src]),
      runCli(["import", "adguardhome"]),
      runCli(["import", "adguardhome", join(src, "nope.yaml"), "-o", join(out, "x")]),
    ]);
    expect(forced.code, forced.stderr).toBe(0);
    expect([unknown.code, unknown.stderr]).toEqual([2, expect.stringContaining("unknown source 'nosuchtool'")]);
    expect(short.code).toBe(2);
    expect([missing.code, missing.stderr]).toEqual([1, expect.stringContaining("nope.yaml")]);
  });

  it("reads the older layout (filtering under dns), serves DoT and DoH with the given certificate, and keeps the API on loopback", async () => {
    const dir = tempDir("agh-old-");
    mkdirSync(join(dir, "conf"));
    writeFileSync(
      join(dir, "conf", "AdGuardHome.yaml"),
      stringify({
        bind_host: "0.0.0.0",
        bind_port: 3000,
        dns: {
          bind_hosts: ["192.168.1.2", "::1"],
          port: 53,
          upstream_dns: ["tls://dns.quad9.net", "https://dns.google/dns-query", "h3://dns.google/dns-query"],
          bootstrap_dns: ["9.9.9.10"],
          upstream_mode: "parallel",
          blocking_mode: "custom_ip",
          blocking_ipv4: "192.168.1.2",
          blocking_ipv6: "",
          protection_enabled: true,
          filtering_enabled: true,
          filters_update_interval: 0,
          rewrites: [{ domain: "router.lan", answer: "192.168.1.1" }],
          cache_enabled: false,
        },
        tls: {
          enabled: true,
          server_name: "dns.example.net",
          port_https: 443,
          port_dns_over_tls: 853,
          port_dns_over_quic: 853,
          certificate_chain: "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n",
          private_key: "-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n",
          strict_sni_check: true,
        },
        filters: [{ enabled: true, url: "https://lists.example/filter.txt", name: "f", id: 1 }],
        user_rules: [],
        schema_version: 12,
      }),
    );
    const r = await importConfig(join(dir, "conf", "AdGuardHome.yaml"));
    const doc = parse(r.yaml) as Doc;
    const args = (tag: string): unknown => doc.plugins.find((p) => p.tag === tag)?.args;
    expect(doc.api).toEqual({ http: "127.0.0.1:3000" });
    expect(args("upstream")).toEqual({
      upstreams: [{ addr: "tls://dns.quad9.net", bootstrap: ["9.9.9.10"] }, { addr: "https://dns.google/dns-query", bootstrap: ["9.9.9.10"] }],
      concurrent: 2,
    });
    expect(args("block_answer")).toEqual({ mode: "custom", ips: ["192.168.1.2"], short_circuit: true });
    expect(doc.plugins.find((p) => p.type === "cache")).toBeUndefined();
    expect(doc.plugins.find((p) => p.type === "cron")).toBeUndefined();
    expect(doc.plugins.filter((p) => p.type.endsWith("server")).map((p) => [p.tag, (p.args as { listen: string }).listen])).toEqual([
      ["udp", "192.168.1.2:53"],
      ["tcp", "192.168.1.2:53"],
      ["udp_2", "[::1]:53"],
      ["tcp_2", "[::1]:53"],
      ["dot", "192.168.1.2:853"],
      ["doh", "192.168.1.2:443"],
      ["dot_2", "[::1]:853"],
      ["doh_2", "[::1]:443"],
    ]);
    expect(args("dot")).toMatchObject({ cert: "tls/cert.pem", key: "tls/key.pem" });
    expect(r.files["tls/cert.pem"]).toContain("BEGIN CERTIFICATE");
    expect(r.files["rules/hosts.txt"]).toBe("router.lan 192.168.1.1\n");
    expect(r.unsupported).toEqual(
      expect.arrayContaining([
        expect.stringContaining("h3://dns.google/dns-query"),
        expect.stringMatching(/^tls\.port_dns_over_quic: 853/),
        expect.stringMatching(/^tls\.strict_sni_check: true/),
      ]),
    );
    expect(r.notes).toEqual(expect.arrayContaining([expect.stringContaining("never refreshed"), expect.stringContaining("http.address 0.0.0.0:3000")]));
    const outDir = tempDir("agh-old-out-");
    for (const [name, content] of Object.entries(r.files)) {
      mkdirSync(join(outDir, name, ".."), { recursive: true });
      writeFileSync(join(outDir, name), content);
    }
    writeFileSync(join(outDir, "sluice.yaml"), r.yaml);
    expect(() => checkConfig(join(outDir, "sluice.yaml"), createCatalog())).not.toThrow();
  });
});
