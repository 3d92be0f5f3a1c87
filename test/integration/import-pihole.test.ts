// `sluice import pihole`: a Pi-hole v6 directory (pihole.toml and gravity.db, both written here from
// Pi-hole's documented format and schema) → the CLI writes sluice.yaml → it passes the check → Sluice
// started on it blocks what gravity's lists and the denied domains block, lets allowed names through to
// the (local) upstream, answers dns.hosts and dns.cnameRecords locally, sends revServers' domain and
// reverse zone to their server, and keeps Pi-hole's domainNeeded / bogusPriv refusals.

import Database from "better-sqlite3";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse } from "yaml";
import { checkConfig } from "../../src/app/app.js";
import { createCatalog } from "../../src/plugins/catalog.js";
import { runCli, type CliResult } from "../helpers/cli.js";
import { answerIps, query, rcodeOf } from "../helpers/dns.js";
import { startFileServer, type FileServer } from "../helpers/file-server.js";
import { answerWith, startResponder, type Responder } from "../helpers/responder.js";
import { startSluice, tempDir, type RunningSluice } from "../helpers/sluice.js";

type Doc = { plugins: { tag: string; type: string; args?: unknown }[] };

let upstream: Responder;
let lanDns: Responder;
let lists: FileServer;
let src: string;
let out: string;
let imported: CliResult;
let sluice: RunningSluice;

/** pihole.toml as Pi-hole FTL v6 writes it (the settings that matter here, with its comments). */
function piholeToml(): string {
  return `# Pi-hole configuration file (v6.0.4)
# Encoding: UTF-8

[dns]
  # Array of upstream DNS servers used by Pi-hole
  upstreams = [
    "127.0.0.1#${upstream.port}"
  ] ### CHANGED, default = []
  CNAMEdeepInspect = true
  blockESNI = true
  EDNS0ECS = true
  ignoreLocalhost = false
  showDNSSEC = true
  analyzeOnlyAandAAAA = false
  piholePTR = "PI.HOLE"
  replyWhenBusy = "ALLOW"
  blockTTL = 2
  hosts = [
    "192.168.1.10 nas.lan nas",
    "fd00::10 nas.lan"
  ] ### CHANGED, default = []
  domainNeeded = true ### CHANGED, default = false
  expandHosts = false
  domain = "lan"
  bogusPriv = true
  dnssec = true ### CHANGED, default = false
  interface = ""
  hostRecord = ""
  listeningMode = "LOCAL"
  queryLogging = true
  cnameRecords = [ "media.lan,nas.lan" ] ### CHANGED, default = []
  port = 53
  revServers = [
    "true,192.168.1.0/24,127.0.0.1#${lanDns.port},lan.example"
  ] ### CHANGED, default = []

  [dns.cache]
    size = 10000
    optimizer = 3600
    upstreamBlockedTTL = 86400

  [dns.blocking]
    active = true
    mode = "NX" ### CHANGED, default = "NULL"
    edns = "TEXT"

  [dns.specialDomains]
    mozillaCanary = true
    iCloudPrivateRelay = true
    designatedResolver = true

  [dns.reply.host]
    force4 = false
    IPv4 = ""
    force6 = false
    IPv6 = ""

  [dns.rateLimit]
    count = 1000
    interval = 60

[dhcp]
  active = true ### CHANGED, default = false
  start = "192.168.1.100"
  end = "192.168.1.200"

[database]
  DBimport = true
  maxDBdays = 30 ### CHANGED, default = 91

[webserver]
  domain = "pi.hole"
  port = "80o,443os,[::]:80o,[::]:443os"

[files]
  gravity = "/etc/pihole/gravity.db"

[misc]
  privacylevel = 0
  etc_dnsmasq_d = false
  dnsmasq_lines = [ "address=/x.example/1.2.3.4" ] ### CHANGED, default = []
`;
}

/** gravity.db with the tables of Pi-hole's schema that the importer reads. */
function writeGravity(path: string): void {
  const db = new Database(path);
  db.exec(`
    CREATE TABLE "group" (id INTEGER PRIMARY KEY AUTOINCREMENT, enabled BOOLEAN NOT NULL DEFAULT 1, name TEXT UNIQUE NOT NULL,
      date_added INTEGER, date_modified INTEGER, description TEXT);
    INSERT INTO "group" (id, enabled, name, description) VALUES (0, 1, 'Default', 'The default group'), (1, 1, 'Kids', NULL), (2, 0, 'Guests', NULL);
    CREATE TABLE adlist (id INTEGER PRIMARY KEY AUTOINCREMENT, address TEXT UNIQUE NOT NULL, enabled BOOLEAN NOT NULL DEFAULT 1,
      date_added INTEGER, date_modified INTEGER, comment TEXT, date_updated INTEGER, number INTEGER NOT NULL DEFAULT 0,
      invalid_domains INTEGER NOT NULL DEFAULT 0, status INTEGER NOT NULL DEFAULT 0, abp_entries INTEGER NOT NULL DEFAULT 0,
      type INTEGER NOT NULL DEFAULT 0);
    CREATE TABLE adlist_by_group (adlist_id INTEGER NOT NULL, group_id INTEGER NOT NULL, PRIMARY KEY (adlist_id, group_id));
    CREATE TABLE domainlist (id INTEGER PRIMARY KEY AUTOINCREMENT, type INTEGER NOT NULL DEFAULT 0, domain TEXT NOT NULL,
      enabled BOOLEAN NOT NULL DEFAULT 1, date_added INTEGER, date_modified INTEGER, comment TEXT, UNIQUE(domain, type));
    CREATE TABLE domainlist_by_group (domainlist_id INTEGER NOT NULL, group_id INTEGER NOT NULL, PRIMARY KEY (domainlist_id, group_id));
    CREATE TABLE client (id INTEGER PRIMARY KEY AUTOINCREMENT, ip TEXT NOT NULL UNIQUE, date_added INTEGER, date_modified INTEGER, comment TEXT);
    CREATE TABLE client_by_group (client_id INTEGER NOT NULL, group_id INTEGER NOT NULL, PRIMARY KEY (client_id, group_id));
    CREATE TABLE gravity (domain TEXT NOT NULL, adlist_id INTEGER NOT NULL);
  `);
  const adlist = db.prepare("INSERT INTO adlist (id, address, enabled, comment, type) VALUES (?, ?, ?, ?, ?)");
  adlist.run(1, `${lists.url}/files/block.txt`, 1, "StevenBlack", 0);
  adlist.run(2, `${lists.url}/files/allow.txt`, 1, "Allow list", 1);
  adlist.run(3, `${lists.url}/files/off.txt`, 0, "Disabled", 0);
  adlist.run(4, `file://${join(src, "local.txt")}`, 1, null, 0);
  const domain = db.prepare("INSERT INTO domainlist (id, type, domain, enabled) VALUES (?, ?, ?, ?)");
  domain.run(1, 1, "denied.example", 1);
  domain.run(2, 3, "^ad[0-9]+\\.", 1);
  domain.run(3, 0, "good.tracker.example", 1);
  domain.run(4, 3, "^video\\.;querytype=AAAA", 1);
  domain.run(5, 1, "kidsonly.example", 1);
  domain.run(6, 1, "off.example", 0);
  const byGroup = (table: string, pairs: [number, number][]): void => {
    const s = db.prepare(`INSERT INTO ${table} VALUES (?, ?)`);
    for (const [a, g] of pairs) s.run(a, g);
  };
  byGroup("adlist_by_group", [[1, 0], [2, 0], [3, 0], [4, 0], [4, 1]]);
  byGroup("domainlist_by_group", [[1, 0], [2, 0], [3, 0], [4, 0], [5, 1]]);
  const client = db.prepare("INSERT INTO client (id, ip, comment) VALUES (?, ?, ?)");
  client.run(1, "192.168.1.50", "Kids tablet");
  client.run(2, "aa:bb:cc:dd:ee:ff", "TV");
  client.run(3, ":eth1", "guest wifi");
  client.run(4, "192.168.1.60", "Guest laptop");
  byGroup("client_by_group", [[1, 0], [1, 1], [2, 1], [3, 0], [4, 2]]);
  db.close();
}

beforeAll(async () => {
  upstream = await startResponder((q) => answerWith(q, ["192.0.2.99"]));
  lanDns = await startResponder((q) => answerWith(q, ["10.1.1.1"]));
  lists = await startFileServer();
  lists.set("block.txt", "# hosts and plain names\n0.0.0.0 ads.example\n||tracker.example^\nplain.example\n");
  lists.set("allow.txt", "allowed.tracker.example\n");
  src = tempDir("pihole-src-");
  out = join(tempDir("pihole-out-"), "imported");
  writeFileSync(join(src, "local.txt"), "localblocked.example\n");
  writeFileSync(join(src, "pihole.toml"), piholeToml());
  writeGravity(join(src, "gravity.db"));
  imported = await runCli(["import", "pihole", src, "-o", out]);
  // The written configuration listens on 0.0.0.0:53 and 127.0.0.1:9080, as on a Pi-hole host; here on free ports.
  const yaml = readFileSync(join(out, "sluice.yaml"), "utf8").replaceAll("0.0.0.0:53", "127.0.0.1:0").replace("127.0.0.1:9080", "127.0.0.1:0");
  sluice = await startSluice(yaml, {}, { dir: out });
}, 60_000);

afterAll(async () => {
  await sluice?.stop();
  await Promise.all([upstream?.close(), lanDns?.close(), lists?.close()]);
});

describe("sluice import pihole", () => {
  it("writes a configuration that passes the check, headed by what was not imported", () => {
    expect(imported.code, imported.stderr).toBe(0);
    expect(() => checkConfig(join(out, "sluice.yaml"), createCatalog())).not.toThrow();
    const text = readFileSync(join(out, "sluice.yaml"), "utf8");
    const head = text.slice(0, text.indexOf("# Notes:"));
    for (const e of [
      "dns.dnssec: true",
      "dns.rateLimit: {\"count\":1000,\"interval\":60}",
      "dhcp.active: true",
      "misc.dnsmasq_lines: [\"address=/x.example/1.2.3.4\"]",
      "domainlist (regex deny) '^video\\.;querytype=AAAA'",
      "domainlist (exact deny) 'kidsonly.example': \"groups Kids\"",
      "client: \":eth1\"",
    ]) {
      expect(head, e).toContain(`#   - ${e}`);
      expect(imported.stderr, e).toContain(`unsupported: ${e}`);
    }
    for (const absent of ["dns.CNAMEdeepInspect", "dns.piholePTR", "dns.blockTTL", "dns.hosts", "webserver", "adlist 'file://"]) expect(head).not.toContain(`#   - ${absent}`);
    expect(imported.stderr).toContain("is disabled in Pi-hole: not imported");
  });

  it("maps each setting to its plugin", () => {
    const doc = parse(readFileSync(join(out, "sluice.yaml"), "utf8")) as Doc;
    const args = (tag: string): unknown => doc.plugins.find((p) => p.tag === tag)?.args;
    expect(args("upstream")).toEqual({ upstreams: [{ addr: `udp://127.0.0.1:${upstream.port}` }] });
    expect(args("cache")).toEqual({ size: 10000, lazy_cache_ttl: 3600 });
    expect(args("block_answer")).toEqual({ mode: "nxdomain", ttl: 2, short_circuit: true });
    expect(args("recorder")).toEqual({ path: "data/queries.db", retention_days: 30 });
    expect(args("forward_cond_1")).toEqual({ upstreams: [{ addr: `udp://127.0.0.1:${lanDns.port}` }], short_circuit: true });
    expect(args("block_adblock")).toEqual({ files: ["lists/block-1.txt", join(src, "local.txt")] });
    expect(args("clients")).toEqual({
      clients: [
        { name: "kids-tablet", addresses: ["192.168.1.50"], macs: [], ids: [], groups: ["kids"] },
        { name: "tv", addresses: [], macs: ["aa:bb:cc:dd:ee:ff"], ids: [], groups: ["kids"] },
        { name: "guest-laptop", addresses: ["192.168.1.60"], macs: [], ids: [], groups: ["unfiltered"] },
      ],
      groups: [{ name: "kids" }, { name: "unfiltered" }],
      pause: ["blocked"],
    });
    expect(readFileSync(join(out, "rules/block-domains.txt"), "utf8")).toBe("full:denied.example\nregexp:^ad[0-9]+\\.\nfull:kidsonly.example\n");
    expect(readFileSync(join(out, "rules/allow-domains.txt"), "utf8")).toBe("full:good.tracker.example\n");
  });

  it("blocks what the lists and denied domains block and lets allowed names through to the upstream", async () => {
    const port = sluice.port("udp");
    for (const name of ["ads.example", "tracker.example", "sub.tracker.example", "plain.example", "denied.example", "ad12.example.org", "localblocked.example"]) {
      expect(rcodeOf(await query(port, name)), name).toBe(3);
    }
    for (const name of ["good.tracker.example", "allowed.tracker.example", "sub.plain.example", "example.org"]) {
      const m = await query(port, name);
      expect([rcodeOf(m), answerIps(m)], name).toEqual([0, ["192.0.2.99"]]);
    }
  });

  it("answers local records and CNAMEs, sends revServers' names to their server and keeps Pi-hole's refusals", async () => {
    const port = sluice.port("udp");
    expect(answerIps(await query(port, "nas.lan"))).toEqual(["192.168.1.10"]);
    expect(answerIps(await query(port, "nas.lan", "AAAA"))).toEqual(["fd00::10"]);
    expect(answerIps(await query(port, "nas"))).toEqual(["192.168.1.10"]);
    expect(answerIps(await query(port, "media.lan"))).toEqual(["192.168.1.10"]);
    expect(answerIps(await query(port, "printer.lan.example"))).toEqual(["10.1.1.1"]);
    await query(port, "5.1.168.192.in-addr.arpa", "PTR");
    expect(lanDns.seen.map((s) => s.query.questions[0]?.name)).toContain("5.1.168.192.in-addr.arpa");
    const before = upstream.seen.length;
    for (const [name, type] of [["printer", "A"], ["1.0.0.10.in-addr.arpa", "PTR"], ["use-application-dns.net", "A"]] as const) {
      expect(rcodeOf(await query(port, name, type)), name).toBe(3);
    }
    expect(upstream.seen.length).toBe(before);
  });

  it("refuses a file that is not a pihole.toml, naming the line", async () => {
    const bad = join(tempDir("pihole-bad-"), "pihole.toml");
    writeFileSync(bad, "[dns]\n  upstreams = [ \"1.1.1.1\"\n  port = 53\n");
    const r = await runCli(["import", "pihole", bad, "-o", join(out, "never")]);
    expect([r.code, r.stderr]).toEqual([1, expect.stringMatching(/pihole\.toml: line 3: /)]);
  });
});
