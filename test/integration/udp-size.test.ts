// udp_server's max_udp_size: a small query asking for EDNS 65 535 cannot draw a large answer
// (amplification), fresh or from the cache; answers above the cap are cut with TC, and TCP still
// carries the whole answer.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, expect, test } from "vitest";
import { FLAG } from "../../src/dns/constants.js";
import { decodeMessage } from "../../src/dns/message.js";
import { answerIps, query, buildQuery, udpExchange } from "../helpers/dns.js";
import { runCli } from "../helpers/cli.js";
import { metricValue } from "../helpers/proc.js";
import { startSluice, type RunningSluice } from "../helpers/sluice.js";

// 300 IPv4 sinkhole addresses (an A answer of about 4.9 KB) and 100 IPv6 ones (AAAA, about 2.8 KB).
const v4 = Array.from({ length: 300 }, (_, i) => `10.${(i >> 8) & 255}.${i & 255}.1`);
const v6 = Array.from({ length: 100 }, (_, i) => `2001:db8::${(i + 1).toString(16)}`);
const ips = [...v4, ...v6].join(" ");

let s: RunningSluice;
beforeAll(async () => {
  s = await startSluice(`
api: { http: "127.0.0.1:0" }
plugins:
  - { tag: cache, type: cache, args: { size: 100, short_circuit: true } }
  - tag: main
    type: sequence
    args:
      - exec: $cache
      - exec: black_hole ${ips}
  - { tag: udp, type: udp_server, args: { entry: main, listen: "127.0.0.1:0" } }
  - { tag: udp4096, type: udp_server, args: { entry: main, listen: "127.0.0.2:0", max_udp_size: 4096 } }
  - { tag: tcp, type: tcp_server, args: { entry: main, listen: "127.0.0.1:0" } }
`);
});
afterAll(() => s.stop());

async function cacheHits(): Promise<number> {
  return metricValue(await (await s.api("/api/metrics")).text(), "cache_hit_total", 'kind="fresh"') || 0;
}

test("a 45-byte query with EDNS 65535 gets at most 1232 bytes with TC, fresh and from the cache", async () => {
  const packet = buildQuery("amplify1234.test", "A", { edns: 65535 });
  expect(packet.length).toBe(45);
  const hitsBefore = await cacheHits();
  const sizes: number[] = [];
  for (const round of ["fresh", "cached"]) {
    const raw = await udpExchange(s.port("udp"), packet);
    expect(raw, round).not.toBeNull();
    sizes.push(raw!.length);
    const m = decodeMessage(raw!);
    expect(raw!.length, round).toBeLessThanOrEqual(1232);
    expect(m.flags & FLAG.TC, round).toBe(FLAG.TC);
    expect(m.edns, round).not.toBeNull();
  }
  expect(await cacheHits()).toBe(hitsBefore + 1); // the second answer was the cached one
  const whole = await query(s.port("tcp"), "amplify1234.test", "A", { tcp: true, edns: 65535 });
  console.log(`45-byte query, EDNS 65535: UDP answers ${sizes.join(" / ")} bytes (fresh / cached), TCP answer has ${answerIps(whole).length} addresses`);
  expect(answerIps(whole)).toHaveLength(300);
});

test("max_udp_size: 4096 raises the cap; without EDNS the limit stays 512", async () => {
  const at4096 = (type: string, edns: number): Promise<Buffer | null> => udpExchange(s.port("udp4096"), buildQuery("cap4096.test", type, { edns }), 2000, "127.0.0.2");
  // 2.8 KB fits under 4096 whole; 4.9 KB does not and is cut.
  const aaaa = await at4096("AAAA", 65535);
  expect(aaaa!.length).toBeGreaterThan(1232);
  expect(aaaa!.length).toBeLessThanOrEqual(4096);
  expect(decodeMessage(aaaa!).flags & FLAG.TC).toBe(0);
  expect(answerIps(decodeMessage(aaaa!))).toHaveLength(100);
  const a = await at4096("A", 65535);
  expect(a!.length).toBeLessThanOrEqual(4096);
  expect(decodeMessage(a!).flags & FLAG.TC).toBe(FLAG.TC);
  // A client asking for less than the cap still gets no more than its own size.
  const small = await at4096("AAAA", 2000);
  expect(small!.length).toBeLessThanOrEqual(2000);
  expect(decodeMessage(small!).flags & FLAG.TC).toBe(FLAG.TC);
  // The same 2.8 KB answer on the default cap is cut.
  const capped = await udpExchange(s.port("udp"), buildQuery("cap1232.test", "AAAA", { edns: 65535 }));
  expect(capped!.length).toBeLessThanOrEqual(1232);
  expect(decodeMessage(capped!).flags & FLAG.TC).toBe(FLAG.TC);
  const plain = await udpExchange(s.port("udp"), buildQuery("plain.test", "A"));
  expect(plain!.length).toBeLessThanOrEqual(512);
  expect(decodeMessage(plain!).flags & FLAG.TC).toBe(FLAG.TC);
  console.log(`max_udp_size 4096: AAAA ${aaaa!.length} bytes whole, A ${a!.length} cut; EDNS 2000: ${small!.length} cut; max_udp_size 1232: AAAA ${capped!.length} cut; no EDNS: ${plain!.length} cut`);
});

test("sluice check refuses max_udp_size outside 512–65535", async () => {
  const dir = mkdtempSync(join(tmpdir(), "sluice-udp-size-"));
  try {
    for (const [value, message] of [
      ["100", "must be >= 512"],
      ["70000", "must be <= 65535"],
    ]) {
      writeFileSync(join(dir, "s.yaml"), `plugins:\n  - { tag: main, type: sequence, args: [{ exec: reject 5 }] }\n  - { tag: udp, type: udp_server, args: { entry: main, listen: "127.0.0.1:53", max_udp_size: ${value} } }\n`);
      const r = await runCli(["check", "-c", "s.yaml", "-d", dir], { cwd: dir });
      expect(r.code).toBe(1);
      expect(r.stderr).toContain("max_udp_size");
      expect(r.stderr).toContain(message);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
