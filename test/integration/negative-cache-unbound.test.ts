// The point of the synthesised SOA: a real resolver in front of Sluice (unbound, forwarding every
// name to it) caches Sluice's negative answers. Each name is asked of unbound twice; Sluice sees the
// question once, and unbound's second answer is its cached copy (same rcode, the SOA counting down
// from the TTL Sluice gave).
import { spawn, type ChildProcess } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, expect, test } from "vitest";
import { QTYPE } from "../../src/dns/constants.js";
import type { Message } from "../../src/dns/message.js";
import { buildQuery, query, rcodeOf, udpExchange } from "../helpers/dns.js";
import { serversYaml, startSluice, tempDir, type RunningSluice } from "../helpers/sluice.js";
import { freePort } from "../helpers/ports.js";
import { requireUnbound, UNBOUND } from "../helpers/unbound.js";

let s: RunningSluice;
let unbound: ChildProcess;
let port = 0;
let log = "";

beforeAll(async () => {
  requireUnbound();
  s = await startSluice(`
plugins:
  - tag: main
    type: sequence
    args:
      - exec: ddr
      - { matches: "qname domain:nx.example", exec: black_hole nxdomain ttl=120 short_circuit }
      - { matches: "qname domain:nodata.example", exec: black_hole nodata short_circuit }
      - { matches: "qname domain:rejected.example", exec: reject nxdomain ttl=90 }
      - { matches: "qtype AAAA", exec: reject nodata ttl=60 }
      - exec: black_hole 192.0.2.1 short_circuit
${serversYaml()}
`);
  const dir = tempDir();
  for (let attempt = 0; attempt < 3 && port === 0; attempt++) {
    const p = await freePort();
    const conf = join(dir, "unbound.conf");
    writeFileSync(
      conf,
      [
        "server:",
        "  do-daemonize: no",
        '  chroot: ""',
        '  username: ""',
        `  directory: "${dir}"`,
        '  pidfile: ""',
        "  use-syslog: no",
        '  logfile: ""',
        "  verbosity: 1",
        `  interface: 127.0.0.1@${p}`,
        "  num-threads: 1",
        "  access-control: 127.0.0.0/8 allow",
        "  do-ip6: no",
        "  so-reuseport: no",
        '  module-config: "iterator"',
        "  qname-minimisation: no",
        "  do-not-query-localhost: no",
        '  local-zone: "resolver.arpa." nodefault',
        "forward-zone:",
        '  name: "."',
        `  forward-addr: 127.0.0.1@${s.udpPort}`,
        "",
      ].join("\n"),
    );
    unbound = spawn(UNBOUND, ["-d", "-c", conf], { stdio: ["ignore", "pipe", "pipe"] });
    unbound.stdout?.on("data", (d: Buffer) => (log += d.toString()));
    unbound.stderr?.on("data", (d: Buffer) => (log += d.toString()));
    const deadline = Date.now() + 10_000;
    while (unbound.exitCode === null && Date.now() < deadline) {
      if ((await udpExchange(p, buildQuery("up.ok.example", "A"), 200, "127.0.0.1")) !== null) {
        port = p;
        break;
      }
    }
    if (port === 0) {
      unbound.kill("SIGTERM");
      if (!/can't bind|Address already in use/i.test(log)) break;
    }
  }
  if (port === 0) throw new Error(`unbound did not start:\n${log}`);
});
afterAll(async () => {
  if (unbound.exitCode === null) {
    const gone = new Promise((r) => unbound.once("exit", r));
    unbound.kill("SIGTERM");
    await gone;
  }
  await s.stop();
});

/** Queries Sluice's UDP server has taken so far. */
async function sluiceQueries(): Promise<number> {
  const text = await s.app.services.metrics.registry.metrics();
  const line = text.split("\n").find((l) => l.startsWith('server_request_total{plugin_tag="udp",protocol="udp"}'));
  return Number(line?.split(" ")[1] ?? 0);
}

const soaTtl = (m: Message): number => {
  expect(m.authorities.map((r) => r.type)).toEqual([QTYPE.SOA]);
  return m.authorities[0].ttl;
};

test.each([
  ["www.nx.example", "A", 3, 120],
  ["www.nx.example", "TXT", 3, 120],
  ["www.nodata.example", "MX", 0, 300],
  ["www.rejected.example", "A", 3, 90],
  ["v4only.example", "AAAA", 0, 60],
  ["_dns.resolver.arpa", "SVCB", 0, 300],
])("%s %s: unbound asks Sluice once and answers the second time from its cache", async (name, type, rcode, ttl) => {
  const before = await sluiceQueries();
  const first = await query(port, name, type);
  expect(rcodeOf(first), log).toBe(rcode);
  expect(first.answers).toEqual([]);
  expect(soaTtl(first)).toBeLessThanOrEqual(ttl);
  expect(soaTtl(first)).toBeGreaterThan(ttl - 5);
  expect(await sluiceQueries()).toBe(before + 1);
  const second = await query(port, name, type);
  expect(rcodeOf(second)).toBe(rcode);
  // The cached copy counts down from the SOA's TTL.
  expect(soaTtl(second)).toBeLessThanOrEqual(soaTtl(first));
  expect(soaTtl(second)).toBeGreaterThan(ttl - 5);
  expect(await sluiceQueries()).toBe(before + 1);
});

test("for comparison, a positive answer: asked once, then cached", async () => {
  const before = await sluiceQueries();
  expect(rcodeOf(await query(port, "www.ok.example", "A"))).toBe(0);
  expect(rcodeOf(await query(port, "www.ok.example", "A"))).toBe(0);
  expect(await sluiceQueries()).toBe(before + 1);
});

