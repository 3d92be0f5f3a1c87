// A provider reload must not stall DNS (issue 22, defect 9: reloading a 300 000-rule domain_set
// paused DNS for up to 635 ms). The real program (a child process) serves a steady 1 500 q/s from a
// load generator in its own process while `POST /api/plugins/<tag>/reload` rebuilds a domain_set
// of 300 000 rules (mostly full: and domain:, some keyword:, a few regexp:) and an ip_set of
// 300 000 addresses and CIDRs. The longest time without an answer must stay under 100 ms, and the
// answers switch to the new rules. One reload's gap can be inflated by a box busy with the rest of
// the suite, so each provider gets up to three tries and the best is judged: a rebuild that blocks
// the event loop stalls every time.
import { rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, expect, test } from "vitest";
import { query, rcodeOf } from "../helpers/dns.js";
import { formatLoad, startDnsLoad, type DnsLoadReport } from "../helpers/dns-load.js";
import { rssMb, startChild, type ChildSluice } from "../helpers/proc.js";
import { tempDir } from "../helpers/sluice.js";

const RULES = 300_000;
const QPS = 1500;
const MAX_GAP_MS = 100;
const TRIES = 3;

/** 300 000 domain rules ending with `marker` (blocked after this version is loaded). */
function domainList(version: number, marker: string): string {
  const lines: string[] = [];
  for (let i = 0; i < RULES - 1; i++) {
    const k = i % 1000;
    // Real lists are mostly names; a few keywords, fewer regexps (each is tested against every name).
    if (k === 999 && i % 3000 === 2999) lines.push(`regexp:^v${version}re${i}\\.[a-z]+\\.example$`);
    else if (k >= 980) lines.push(`keyword:v${version}kw${i}x`);
    else if (k < 550) lines.push(`full:v${version}-host${i}.filler.example`);
    else lines.push(`domain:v${version}-zone${i}.filler.example`);
  }
  lines.push(`full:${marker}`);
  return lines.join("\n") + "\n";
}

function ipList(version: number): string {
  const lines: string[] = [];
  for (let i = 0; i < RULES; i++) {
    if (i % 3 === 0) lines.push(`10.${version}.${(i >> 8) & 255}.${i & 255}`);
    else if (i % 3 === 1) lines.push(`2001:db8:${version.toString(16)}:${(i & 0xffff).toString(16)}::/64`);
    else lines.push(`172.${16 + (i % 16)}.${(i >> 8) & 255}.0/24`);
  }
  return lines.join("\n") + "\n";
}

let child: ChildSluice;
let dir = "";
beforeAll(async () => {
  dir = tempDir("sluice-provider-load-");
  writeFileSync(join(dir, "block.txt"), "full:seed.test\n");
  writeFileSync(join(dir, "nets.txt"), "10.0.0.1\n");
  child = await startChild(`
log: { level: info }
api: { http: "127.0.0.1:0" }
plugins:
  - { tag: blocklist, type: domain_set, args: { files: ["${join(dir, "block.txt")}"] } }
  - { tag: nets, type: ip_set, args: { files: ["${join(dir, "nets.txt")}"] } }
  - tag: main
    type: sequence
    args:
      - { matches: "qname $blocklist", exec: reject NXDOMAIN }
      - { matches: "client_ip $nets", exec: reject REFUSED }
      - exec: black_hole 192.0.2.1
  - { tag: udp, type: udp_server, args: { entry: main, listen: "127.0.0.1:0" } }
`);
}, 60_000);
afterAll(async () => {
  await child?.stop();
  rmSync(dir, { recursive: true, force: true });
});

/** Reloads `tag` while the load runs; the load's report and the reload's answer. */
async function reloadUnderLoad(tag: string): Promise<{ load: DnsLoadReport; status: number; body: { rules?: number; duration_ms?: number }; peakMb: number }> {
  const load = await startDnsLoad(child.port("udp"), QPS);
  let peakMb = rssMb(child.pid);
  const sampler = setInterval(() => (peakMb = Math.max(peakMb, rssMb(child.pid))), 20);
  await new Promise((r) => setTimeout(r, 300));
  const res = await fetch(`${child.apiUrl}/api/plugins/${tag}/reload`, { method: "POST" });
  const body = (await res.json()) as { rules?: number; duration_ms?: number };
  await new Promise((r) => setTimeout(r, 300));
  clearInterval(sampler);
  return { load: await load.stop(), status: res.status, body, peakMb };
}

test("reloading a 300 000-rule domain_set and ip_set keeps the longest DNS gap under 100 ms; answers switch to the new rules", async () => {
  const port = child.port("udp");
  writeFileSync(join(dir, "block.txt"), domainList(1, "first.test"));
  writeFileSync(join(dir, "nets.txt"), ipList(1));
  for (const tag of ["blocklist", "nets"]) expect((await fetch(`${child.apiUrl}/api/plugins/${tag}/reload`, { method: "POST" })).status).toBe(200);
  expect(rcodeOf(await query(port, "first.test"))).toBe(3);
  const before = rssMb(child.pid);
  const idle = await startDnsLoad(port, QPS);
  await new Promise((r) => setTimeout(r, 1500));
  console.log(`baseline, no reload: ${formatLoad(await idle.stop())}`);

  const results: Record<string, number[]> = { blocklist: [], nets: [] };
  for (const tag of ["blocklist", "nets"] as const) {
    for (let t = 0; t < TRIES; t++) {
      const version = 2 + t;
      if (tag === "blocklist") writeFileSync(join(dir, "block.txt"), domainList(version, `marker${version}.test`));
      else writeFileSync(join(dir, "nets.txt"), ipList(version));
      const r = await reloadUnderLoad(tag);
      console.log(
        `${tag} reload of ${RULES} rules, try ${t + 1}: ${r.status} in ${r.body.duration_ms} ms; ${formatLoad(r.load)}; RSS before ${before.toFixed(0)} MB, peak ${r.peakMb.toFixed(0)} MB, after ${rssMb(child.pid).toFixed(0)} MB`,
      );
      expect(r.status).toBe(200);
      expect(r.body.rules).toEqual(tag === "blocklist" ? RULES : expect.any(Number));
      expect(r.load.lost).toBeLessThanOrEqual(Math.ceil(r.load.sent * 0.01));
      if (tag === "blocklist") {
        // The new rules serve: this version's marker is blocked, the previous one's no longer.
        expect(rcodeOf(await query(port, `marker${version}.test`))).toBe(3);
        expect(rcodeOf(await query(port, version === 2 ? "first.test" : `marker${version - 1}.test`))).toBe(0);
        expect(rcodeOf(await query(port, `v${version}-host12.filler.example`))).toBe(3);
        expect(rcodeOf(await query(port, `a.v${version}-zone600.filler.example`))).toBe(3);
        expect(rcodeOf(await query(port, `v${version - 1}-host12.filler.example`))).toBe(0);
      }
      results[tag].push(r.load.longestGapMs);
      if (r.load.longestGapMs < MAX_GAP_MS) break;
    }
  }
  console.log(`longest DNS gap per try: domain_set ${results.blocklist.map((g) => g.toFixed(0)).join(", ")} ms; ip_set ${results.nets.map((g) => g.toFixed(0)).join(", ")} ms`);
  expect(Math.min(...results.blocklist)).toBeLessThan(MAX_GAP_MS);
  expect(Math.min(...results.nets)).toBeLessThan(MAX_GAP_MS);
}, 180_000);
