// `sluice import blocky`: a blocky config.yml (written from blocky's documented format) becomes a Sluice
// configuration that passes `sluice check` and, started, blocks, forwards and answers local records as
// blocky did; what has no equivalent is in the file's header and on stderr.

import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { QTYPE } from "../../src/dns/constants.js";
import { replyTo } from "../../src/dns/message.js";
import { runCli, type CliResult } from "../helpers/cli.js";
import { rcodeFrom } from "../helpers/client-source.js";
import { answerIps, query, rcodeOf } from "../helpers/dns.js";
import { startFileServer, type FileServer } from "../helpers/file-server.js";
import { answerWith, startResponder, type Responder } from "../helpers/responder.js";
import { startSluice, tempDir, type RunningSluice } from "../helpers/sluice.js";

let upstream: Responder;
let lan: Responder;
let lists: FileServer;
let imported: CliResult;
let checked: CliResult;
let yamlText: string;
let sluice: RunningSluice;

function blockyConfig(): string {
  return `upstreams:
  groups:
    default:
      - tcp+udp:127.0.0.1:${upstream.port}
    127.0.0.2:
      - udp:127.0.0.1:${lan.port}
    laptop*:
      - 9.9.9.9
  strategy: parallel_best
  timeout: 2s
  init:
    strategy: fast
bootstrapDns:
  - tcp+udp:192.0.2.53
  - https://1.1.1.1/dns-query
blocking:
  denylists:
    ads:
      - ${lists.url}/files/ads.txt
      - |
        # inline list
        blocked.example
        *.wild.example
        /^banner[0-9]+\\./
      - local-deny.txt
    kids:
      - |
        games.example
    unused:
      - |
        nothing.example
  allowlists:
    ads:
      - |
        ok.blocked.example
  clientGroupsBlock:
    default:
      - ads
    127.0.0.2:
      - ads
      - kids
    laptop*:
      - ads
  blockType: nxDomain
  blockTTL: 1m
  loading:
    refreshPeriod: 4h
    downloads:
      timeout: 30s
      attempts: 5
customDNS:
  customTTL: 1h
  filterUnmappedTypes: true
  mapping:
    printer.lan: 192.168.178.3,2001:db8::3
conditional:
  fallbackUpstream: false
  mapping:
    fritz.box: 127.0.0.1:${lan.port}
caching:
  minTime: 5m
  maxTime: 30m
  maxItemsCount: 5000
  prefetching: true
  prefetchThreshold: 5
  prefetchExpires: 2h
  cacheTimeNegative: 30m
clientLookup:
  clients:
    laptop:
      - 192.168.178.29
  singleNameOrder: [2, 1]
ports:
  dns: 127.0.0.1:0
  http: 127.0.0.1:0
queryLog:
  type: csv
  target: /logs
  logRetentionDays: 7
  fields: [clientIP, duration]
prometheus:
  enable: true
  path: /metrics
filtering:
  queryTypes:
    - MX
fqdnOnly:
  enable: true
ede:
  enable: true
ecs:
  ipv4Mask: 24
  ipv6Mask: 56
specialUseDomains:
  rfc6762-appendixG: true
redis:
  address: redis:6379
log:
  level: info
  privacy: true
minTlsServeVersion: "1.3"
`;
}

beforeAll(async () => {
  upstream = await startResponder((q) => (q.questions[0].name.startsWith("split") ? replyTo(q, 3) : answerWith(q, ["192.0.2.10"])));
  lan = await startResponder((q) => answerWith(q, ["192.0.2.77"]));
  lists = await startFileServer();
  lists.set("ads.txt", "# hosts format\n0.0.0.0 tracker.example\n0.0.0.0 pixel.example\n");
  const src = tempDir("blocky-src-");
  writeFileSync(join(src, "config.yml"), blockyConfig());
  writeFileSync(join(src, "local-deny.txt"), "evil.example\n");
  const out = tempDir("blocky-out-");
  imported = await runCli(["import", "blocky", join(src, "config.yml"), "-o", out, "--force"]);
  checked = await runCli(["check", "-c", join(out, "sluice.yaml"), "-d", out]);
  yamlText = readFileSync(join(out, "sluice.yaml"), "utf8");
  mkdirSync(join(out, "data"), { recursive: true });
  sluice = await startSluice(yamlText, {}, { dir: out });
}, 60_000);

afterAll(async () => {
  await sluice?.stop();
  await Promise.all([upstream?.close(), lan?.close(), lists?.close()]);
});

describe("sluice import blocky", () => {
  it("writes a configuration that passes sluice check", () => {
    expect(imported.code, imported.stderr).toBe(0);
    expect(checked.code, checked.stderr + checked.stdout).toBe(0);
  });

  it("lists what has no equivalent in the header and on stderr", () => {
    for (const key of ["ede.enable", "redis.address", "minTlsServeVersion", "caching.prefetchExpires", "blocking.loading.downloads.attempts", "log.privacy", "upstreams.init", "clientLookup.singleNameOrder", "queryLog.fields"]) {
      expect(yamlText).toMatch(new RegExp(`^#   - ${key.replace(/\./g, "\\.")}:`, "m"));
      expect(imported.stderr).toContain(`unsupported: ${key}:`);
    }
    expect(imported.stderr).toContain('unsupported: bootstrapDns: "https://1.1.1.1/dns-query"');
    expect(imported.stderr).toContain('unsupported: blocking.clientGroupsBlock.laptop*: ["ads"]');
    expect(imported.stderr).toContain('unsupported: upstreams.groups.laptop*: ["9.9.9.9"]');
  });

  it("answers blocked names NXDOMAIN: downloaded, inline, wildcard, regex and local-file lists", async () => {
    for (const name of ["tracker.example", "blocked.example", "sub.blocked.example", "a.wild.example", "banner7.example", "evil.example"]) {
      expect(rcodeOf(await query(sluice.udpPort, name)), name).toBe(3);
    }
    const blocked = await query(sluice.udpPort, "pixel.example");
    expect(blocked.authorities[0]?.ttl).toBe(60);
  });

  it("forwards allowed names to the default upstream group, allow list included", async () => {
    expect(answerIps(await query(sluice.udpPort, "allowed.example"))).toEqual(["192.0.2.10"]);
    expect(answerIps(await query(sluice.udpPort, "ok.blocked.example"))).toEqual(["192.0.2.10"]);
  });

  it("answers customDNS names with their addresses and TTL, and other types with no data", async () => {
    const a = await query(sluice.udpPort, "printer.lan");
    expect(answerIps(a)).toEqual(["192.168.178.3"]);
    expect(a.answers[0].ttl).toBe(3600);
    expect(answerIps(await query(sluice.udpPort, "my.printer.lan", "AAAA"))).toEqual(["2001:db8::3"]);
    const txt = await query(sluice.udpPort, "printer.lan", "TXT");
    expect([rcodeOf(txt), txt.answers.length]).toEqual([0, 0]);
  });

  it("forwards conditional domains, and answers special-use, filtered and single-label names itself", async () => {
    expect(answerIps(await query(sluice.udpPort, "box.fritz.box"))).toEqual(["192.0.2.77"]);
    expect(rcodeOf(await query(sluice.udpPort, "nas.lan"))).toBe(3);
    const mx = await query(sluice.udpPort, "allowed.example", QTYPE.MX);
    expect([rcodeOf(mx), mx.answers.length]).toEqual([0, 0]);
    expect(rcodeOf(await query(sluice.udpPort, "nas"))).toBe(3);
  });

  it("gives a client its own list groups and upstream group", async () => {
    expect(await rcodeFrom("127.0.0.2", sluice.udpPort, "games.example")).toBe(3);
    expect(await rcodeFrom("127.0.0.1", sluice.udpPort, "games.example")).toBe(0);
    // The cache is shared by every client, as blocky's is: each client asks a name of its own.
    expect(await rcodeFrom("127.0.0.2", sluice.udpPort, "split-a.example")).toBe(0);
    expect(await rcodeFrom("127.0.0.1", sluice.udpPort, "split-b.example")).toBe(3);
  });
});
