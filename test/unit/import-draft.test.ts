// The configuration builder the importers share: every kind of setting it takes gives a configuration
// that passes `sluice check`, with the plugins and the `main` sequence in the documented order.

import { mkdirSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { checkConfig } from "../../src/app/app.js";
import { Draft, normaliseBootstrap, normaliseUpstream, sluiceName } from "../../src/import/draft.js";
import { header } from "../../src/import/cli.js";
import { createCatalog } from "../../src/plugins/catalog.js";
import { tempDir } from "../helpers/sluice.js";

type Doc = { api?: { http: string }; plugins: { tag: string; type: string; args?: unknown }[] };

describe("upstream forms", () => {
  it.each([
    ["9.9.9.9", "udp://9.9.9.9"],
    ["9.9.9.9:5353", "udp://9.9.9.9:5353"],
    ["127.0.0.1#5335", "udp://127.0.0.1:5335"],
    ["2620:fe::fe", "udp://[2620:fe::fe]"],
    ["[2620:fe::fe]:53", "udp://[2620:fe::fe]:53"],
    ["dns.example", "udp://dns.example"],
    ["udp://1.1.1.1", "udp://1.1.1.1"],
    ["TCP://1.1.1.1", "tcp://1.1.1.1"],
    ["tls://dns.quad9.net", "tls://dns.quad9.net"],
    ["https://dns.google/dns-query", "https://dns.google/dns-query"],
    ["quic://dns.adguard-dns.com", null],
    ["h3://dns.google/dns-query", null],
    ["sdns://AQcAAAAAAAAA", null],
    ["http://dns.example/dns-query", null],
    ["", null],
  ])("%s → %s", (text, addr) => expect(normaliseUpstream(text)).toBe(addr));

  it("takes only plain addresses as bootstrap servers", () => {
    expect(normaliseBootstrap("9.9.9.10")).toBe("9.9.9.10");
    expect(normaliseBootstrap("[2620:fe::10]:53")).toBe("[2620:fe::10]:53");
    expect(normaliseBootstrap("tls://1.1.1.1")).toBeNull();
    expect(normaliseBootstrap("dns.example")).toBeNull();
  });

  it("makes client names Sluice accepts", () => {
    expect(sluiceName("Anna's iPad")).toBe("anna-s-ipad");
    expect(sluiceName("  --Living Room TV")).toBe("living-room-tv");
    expect(sluiceName("日本")).toBe("client");
  });
});

describe("Draft", () => {
  it("builds a configuration with every part that passes the check", () => {
    const d = new Draft("test");
    d.addUpstreams("upstreams", ["9.9.9.9", "tls://dns.quad9.net", "quic://dns.adguard-dns.com"]);
    d.addBootstrap("bootstrap", ["9.9.9.10", "tls://1.1.1.1"]);
    d.setCache({ size: 5000, minTtl: 600, maxTtl: 60, serveStale: 3600 });
    d.addListen("127.0.0.1:5353");
    d.addListen("[::1]:5353");
    d.addBlockList("https://lists.example/ads.txt", "adblock", "ads");
    d.addBlockList("https://lists.example/domains.txt", "domains", "domains");
    d.addBlockList("/var/lib/lists/local.txt", "hosts", "local");
    d.addAllowList("https://lists.example/allow.txt", "adblock", "allow");
    d.addBlockRules(["||bad.example^", "@@||good.bad.example^"], "adblock");
    d.addBlockRules(["full:exact.example", "regexp:^ads[0-9]+\\."], "domains");
    d.addAllowRules(["full:fine.example"], "domains");
    d.addHost("nas.lan", ["192.168.1.10", "fd00::10"]);
    d.addRedirect("media.lan", "nas.lan");
    d.addConditional("conditional", ["lan", "168.192.in-addr.arpa"], ["192.168.1.1"]);
    d.addClient({ name: "Anna's iPad", addresses: ["192.168.1.37"], ids: ["anna"], groups: ["kids"] });
    d.addClient({ name: "work", macs: ["aa:bb:cc:dd:ee:01"], addresses: ["192.168.1.37"], blocking: false, upstreams: ["udp://10.0.0.53"] });
    d.setBlockAnswer({ mode: "null" }, 10);
    d.setRefresh("0 4 * * SUN");
    d.setApi("127.0.0.1:3000");
    d.setRecorder({ retention_days: 1 });
    const r = d.build();

    expect(r.unsupported).toEqual([expect.stringContaining("quic://dns.adguard-dns.com"), expect.stringContaining("tls://1.1.1.1")]);
    expect(r.notes).toEqual(expect.arrayContaining([expect.stringContaining("minimum TTL 600"), expect.stringContaining("'192.168.1.37' is another client's")]));
    const doc = parse(r.yaml) as Doc;
    const byTag = new Map(doc.plugins.map((p) => [p.tag, p]));
    expect(doc.api).toEqual({ http: "127.0.0.1:3000" });
    expect(byTag.get("main")?.args).toEqual([
      { exec: "$recorder" },
      { exec: "$local_cnames" },
      { exec: "$local_records" },
      { matches: ["!client unfiltered", "!$allowed", "$blocked"], exec: "$block_answer" },
      { matches: "client work", exec: "$forward_client_1" },
      { matches: "qname domain:lan domain:168.192.in-addr.arpa", exec: "$forward_cond_1" },
      { exec: "$cache" },
      { exec: "$upstream" },
    ]);
    expect(byTag.get("upstream")?.args).toEqual({
      upstreams: [{ addr: "udp://9.9.9.9" }, { addr: "tls://dns.quad9.net", bootstrap: ["9.9.9.10"] }],
      concurrent: 2,
    });
    expect(byTag.get("cache")?.args).toEqual({ size: 5000, min_positive_ttl: 60, max_positive_ttl: 60, lazy_cache_ttl: 3600 });
    expect(byTag.get("block_adblock")?.args).toEqual({ files: ["lists/block-1.txt", "/var/lib/lists/local.txt", "rules/block-adblock.txt"] });
    expect(byTag.get("block_domains")?.args).toEqual({ files: ["lists/block-2.txt", "rules/block-domains.txt"] });
    expect(byTag.get("fetch_lists")?.args).toEqual({
      timeout: "60s",
      downloads: [
        { url: "https://lists.example/allow.txt", dir: "lists", filename: "allow-1.txt" },
        { url: "https://lists.example/ads.txt", dir: "lists", filename: "block-1.txt" },
        { url: "https://lists.example/domains.txt", dir: "lists", filename: "block-2.txt" },
      ],
    });
    expect(byTag.get("refresh_lists")?.args).toEqual({
      jobs: [{ name: "lists", schedule: "0 4 * * SUN", executors: ["$fetch_lists", "reload_provider $allow_adblock", "reload_provider $block_adblock", "reload_provider $block_domains"] }],
    });
    expect(byTag.get("block_answer")?.args).toEqual({ mode: "null", ttl: 10, short_circuit: true });
    expect(doc.plugins.filter((p) => p.type.endsWith("_server")).map((p) => p.tag)).toEqual(["udp", "tcp", "udp_2", "tcp_2"]);

    const dir = tempDir();
    for (const [name, content] of Object.entries(r.files)) {
      mkdirSync(dirname(join(dir, name)), { recursive: true });
      writeFileSync(join(dir, name), content);
    }
    writeFileSync(join(dir, "sluice.yaml"), header("test", "/src", r) + r.yaml);
    expect(() => checkConfig(join(dir, "sluice.yaml"), createCatalog())).not.toThrow();
  });

  it("forwards somewhere and listens somewhere when the source names neither", () => {
    const r = new Draft("test").build();
    const doc = parse(r.yaml) as Doc;
    expect(doc.plugins.find((p) => p.tag === "upstream")?.args).toEqual({ upstreams: [{ addr: "udp://9.9.9.9" }] });
    expect(doc.plugins.find((p) => p.tag === "udp")?.args).toEqual({ entry: "main", listen: "127.0.0.1:53" });
    expect(r.notes).toHaveLength(2);
  });

  it("heads the file with what was not imported", () => {
    const text = header("adguardhome", "/etc/AdGuardHome.yaml", { yaml: "", files: {}, unsupported: ['dhcp.enabled: true'], notes: ["a note"] });
    expect(text).toMatch(/^# Imported from adguardhome \(\/etc\/AdGuardHome.yaml\) by sluice import .*\n# Settings with no equivalent in Sluice \(not imported\):\n# {3}- dhcp.enabled: true\n# Notes:\n# {3}- a note\n\n$/);
  });
});
