// `geosite` and `geoip` seen from a client over real sockets: geosite lists (by code, code@attr)
// decide answers through `qname`; geoip lists (geoip.dat and a MaxMind .mmdb) match answer
// addresses through `resp_ip`; reloads through the API change answers, report rule counts and
// keep the old lists when the new file is bad. The data files are written by test/helpers/geodata.ts.
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, expect, test } from "vitest";
import { ConfigError } from "../../src/config/diagnostics.js";
import { PluginInitError } from "../../src/registry/runtime.js";
import { query, rcodeOf } from "../helpers/dns.js";
import { countryMmdb, geoipDat, geositeDat, type SiteDomain } from "../helpers/geodata.js";
import { answerWith, startResponder, type Responder } from "../helpers/responder.js";
import { serversYaml, startSluice, type RunningSluice } from "../helpers/sluice.js";

// Answers: geosite cn → REFUSED (5); category-ads@ads → NXDOMAIN (3); otherwise forwarded, then
// an answer address in geoip `cn` → NOTAUTH (9), in the mmdb's `us` → NOTIMP (4), outside the
// reverse_match list `notlan` (so: in 192.168.0.0/16) → YXDOMAIN (6); anything else NOERROR.
const ADDRESSES: Record<string, string[]> = {
  "cn-ip.test": ["1.0.1.5"],
  "us-ip.test": ["8.8.8.8"],
  "cn6-ip.test": ["2400:3200::1"],
  "lan-ip.test": ["192.168.7.7"],
  "other-ip.test": ["9.9.9.9"],
  "moved-ip.test": ["5.5.5.5"],
};

const cnSite = (extra: SiteDomain[] = []): SiteDomain[] => [
  { type: "domain", value: "baidu.com" },
  { type: "full", value: "www.qq.com" },
  { type: "plain", value: "taobao" },
  { type: "regex", value: "^cdn[0-9]+\\.cn-only\\.test$" },
  // v2ray takes it; our compiler wants punycode: skipped, counted, one warning.
  { type: "domain", value: "bücher.cn" },
  ...extra,
];
const site = (extra: SiteDomain[] = []): Buffer =>
  geositeDat({
    cn: cnSite(extra),
    "category-ads": [
      { type: "domain", value: "ads.example", attrs: ["ads"] },
      { type: "full", value: "tracker.example" },
      { type: "regex", value: "^ad[0-9]+\\.", attrs: ["ads"] },
    ],
    google: [{ type: "domain", value: "google.com" }],
  });
const ips = (cn: string[] = ["1.0.1.0/24", "2400:3200::/32"]): Buffer => geoipDat({ cn: { cidrs: cn }, private: { cidrs: ["10.0.0.0/8"] }, notlan: { cidrs: ["192.168.0.0/16"], reverse: true } });
const mmdb = countryMmdb([
  { cidr: "8.8.8.0/24", country: "US" },
  { cidr: "2001:4860::/32", country: "US" },
  { cidr: "1.0.1.0/24", country: "CN" },
]);

let up: Responder;
let s: RunningSluice;
const rcode = async (name: string, type = "A"): Promise<number> => rcodeOf(await query(s.udpPort, name, type));

beforeAll(async () => {
  up = await startResponder((q) => answerWith(q, (ADDRESSES[q.questions[0].name] ?? ["192.0.2.1"]).filter((a) => a.includes(":") === (q.questions[0].type === 28))));
  s = await startSluice(
    `api: { http: "127.0.0.1:0" }
plugins:
  - { tag: site_cn, type: geosite, args: { file: geosite.dat, selectors: [CN] } }
  - { tag: site_ads, type: geosite, args: { file: geosite.dat, selectors: ["category-ads@ADS"] } }
  - { tag: ip_cn, type: geoip, args: { file: geoip.dat, selectors: [cn] } }
  - { tag: ip_notlan, type: geoip, args: { file: geoip.dat, selectors: [notlan] } }
  - { tag: mm_us, type: geoip, args: { file: country.mmdb, selectors: [us] } }
  - tag: main
    type: sequence
    args:
      - { matches: "qname $site_ads", exec: reject 3 }
      - { matches: "qname $site_cn", exec: reject 5 }
      - exec: forward 127.0.0.1:${up.port}
      - { matches: "resp_ip $ip_cn", exec: reject 9 }
      - { matches: "resp_ip $mm_us", exec: reject 4 }
      - { matches: "!resp_ip $ip_notlan", exec: reject 6 }
${serversYaml()}`,
    { "geosite.dat": site(), "geoip.dat": ips(), "country.mmdb": mmdb },
  );
});
afterAll(async () => {
  await s.stop();
  await up.close();
});

test("geosite `cn` decides answers by each domain type (domain, full, plain → keyword, regex)", async () => {
  expect(await rcode("baidu.com")).toBe(5);
  expect(await rcode("www.baidu.com")).toBe(5);
  expect(await rcode("www.qq.com")).toBe(5);
  expect(await rcode("qq.com")).toBe(0);
  expect(await rcode("img.taobao.net")).toBe(5);
  expect(await rcode("cdn12.cn-only.test")).toBe(5);
  expect(await rcode("cdnx.cn-only.test")).toBe(0);
  expect(await rcode("google.com")).toBe(0);
});

test("geosite `category-ads@ads` takes only the entries with that attribute", async () => {
  expect(await rcode("ads.example")).toBe(3);
  expect(await rcode("x.ads.example")).toBe(3);
  expect(await rcode("ad7.anything.test")).toBe(3);
  expect(await rcode("tracker.example")).toBe(0);
});

test("geoip lists (geoip.dat and .mmdb) match answer addresses through resp_ip", async () => {
  expect(await rcode("cn-ip.test")).toBe(9);
  expect(await rcode("cn6-ip.test", "AAAA")).toBe(9);
  expect(await rcode("us-ip.test")).toBe(4);
  expect(await rcode("lan-ip.test")).toBe(6);
  expect(await rcode("other-ip.test")).toBe(0);
});

test("reload through the API: new files change answers; rule counts in the response and in metrics", async () => {
  expect(await rcode("newsite.test")).toBe(0);
  expect(await rcode("moved-ip.test")).toBe(0);
  writeFileSync(join(s.dir, "geosite.dat"), site([{ type: "domain", value: "newsite.test" }]));
  writeFileSync(join(s.dir, "geoip.dat"), ips(["5.5.5.0/24"]));

  const siteRes = await s.api("/api/plugins/site_cn/reload", { method: "POST" });
  expect(siteRes.status).toBe(200);
  expect(await siteRes.json()).toMatchObject({ ok: true, provider: "site_cn", rules: 5 });
  const ipRes = await s.api("/api/plugins/ip_cn/reload", { method: "POST" });
  expect(await ipRes.json()).toMatchObject({ ok: true, provider: "ip_cn", rules: 1 });

  expect(await rcode("newsite.test")).toBe(5);
  expect(await rcode("moved-ip.test")).toBe(9);
  expect(await rcode("cn-ip.test")).toBe(0);
  // The other provider over the same file keeps what it loaded until it is reloaded itself.
  expect(await rcode("ads.example")).toBe(3);

  const metrics = await (await s.api("/api/metrics")).text();
  expect(metrics).toMatch(/^provider_rules\{plugin_tag="site_cn"\} 5$/m);
  expect(metrics).toMatch(/^provider_rules_skipped\{plugin_tag="site_cn"\} 1$/m);
  expect(s.logs.find((l) => typeof l.msg === "string" && l.msg.startsWith("geosite: skipped 1 entry"))).toMatchObject({ file: "geosite.dat", skipped: 1 });
  expect(metrics).toMatch(/^provider_rules\{plugin_tag="site_ads"\} 2$/m);
  expect(metrics).toMatch(/^provider_rules\{plugin_tag="ip_cn"\} 1$/m);
  expect(metrics).toMatch(/^provider_rules\{plugin_tag="mm_us"\} 2$/m);
  expect(metrics).toMatch(/^provider_reload_total\{plugin_tag="site_cn",result="ok"\} 1$/m);
});

test("a corrupt file at reload is a 400 naming it; the previous lists keep serving", async () => {
  const before = await rcode("www.baidu.com");
  writeFileSync(join(s.dir, "geosite.dat"), site().subarray(0, 40));
  const res = await s.api("/api/plugins/site_cn/reload", { method: "POST" });
  expect(res.status).toBe(400);
  const body = (await res.json()) as { code: string; message: string };
  expect(body.code).toBe("provider_reload_failed");
  expect(body.message).toContain("'geosite.dat' is not a valid geosite.dat");
  expect(await rcode("www.baidu.com")).toBe(before);

  writeFileSync(join(s.dir, "country.mmdb"), Buffer.concat([Buffer.from("abcdef4d61784d696e642e636f6d", "hex"), Buffer.from([0xe0])]));
  const mm = await s.api("/api/plugins/mm_us/reload", { method: "POST" });
  expect(mm.status).toBe(400);
  expect(((await mm.json()) as { message: string }).message).toContain("'country.mmdb'");
  expect(await rcode("us-ip.test")).toBe(4);
  const metrics = await (await s.api("/api/metrics")).text();
  expect(metrics).toMatch(/^provider_reload_total\{plugin_tag="mm_us",result="error"\} 1$/m);
});

test("at start: a list the file does not have, a missing file and a bad selector stop start-up with a clear message", async () => {
  const attempt = async (args: string, files: Record<string, Uint8Array> = { "geosite.dat": site() }): Promise<string> => {
    const err = await startSluice(
      `plugins:
  - { tag: g, type: geosite, args: ${args} }
  - tag: main
    type: sequence
    args: [{ matches: "qname $g", exec: reject 3 }]
${serversYaml()}`,
      files,
    ).catch((e: unknown) => e);
    // Syntax is checked with the config (ConfigError); the file's contents when the plugin is created.
    expect(err instanceof ConfigError || err instanceof PluginInitError).toBe(true);
    return (err as Error).message;
  };
  expect(await attempt("{ file: geosite.dat, selectors: [cn, nosuch] }")).toMatch(/'geosite\.dat' has no list 'nosuch' \(it has 3: cn, category-ads, google\)/);
  expect(await attempt("{ file: missing.dat }")).toContain("cannot read 'missing.dat'");
  expect(await attempt('{ file: geosite.dat, selectors: ["cn@"] }')).toContain("is not a list code");
  expect(await attempt("{ selectors: [cn] }")).toContain("file");
});
