// forward to tls:// and https:// upstreams, with unbound as the real DoT and DoH server (started
// here with certificates made here): connections are reused (a relay in front counts the TCP
// connections, so the TLS handshakes, against the queries), sessions resume, and a certificate
// that does not verify (unknown CA, wrong name, not in the trust store) is an upstream error —
// SERVFAIL, never an answer — unless insecure_skip_verify says otherwise. dial_addr keeps the
// host name for SNI and verification; NODE_EXTRA_CA_CERTS extends the trust store.
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { answerIps, query, rcodeOf } from "../helpers/dns.js";
import { startCli } from "../helpers/cli.js";
import { metricValue } from "../helpers/proc.js";
import { makeLeaf, makePki, type Pki } from "../helpers/pki.js";
import { startRelay, type Relay } from "../helpers/relay.js";
import { startSluice, tempDir, type RunningSluice } from "../helpers/sluice.js";
import { startUnbound, type UnboundServer } from "../helpers/unbound.js";

const ANSWER = "192.0.2.77";
let pki: Pki;
let good: UnboundServer;
let rogue: UnboundServer;
let dotRelay: Relay;
let dohRelay: Relay;
let s: RunningSluice;

const routes = (r: Record<string, string>): string =>
  Object.entries(r)
    .map(([name, upstream]) => `  - { tag: ${name}, type: forward, args: { short_circuit: true, upstreams: [${upstream}] } }`)
    .join("\n");

beforeAll(async () => {
  pki = makePki(tempDir("sluice-pki-"));
  makeLeaf(pki.dir, "ca", "named", "subjectAltName=DNS:dns.sluice.test,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n");
  makeLeaf(pki.dir, "other-ca", "rogue", "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n");
  const zone = { localData: ["up.test. 300 IN A 192.0.2.77"], zones: ['"up.test." redirect'] };
  good = await startUnbound({ dir: pki.dir, cert: join(pki.dir, "named.crt"), key: join(pki.dir, "named.key"), ...zone }, "good");
  rogue = await startUnbound({ dir: pki.dir, cert: join(pki.dir, "rogue.crt"), key: join(pki.dir, "rogue.key"), ...zone }, "rogue");
  dotRelay = await startRelay(good.dot);
  dohRelay = await startRelay(good.doh);
  const ca = `ca: ${join(pki.dir, "ca.crt")}`;
  const config = `
log: { level: debug }
api: { http: "127.0.0.1:0" }
plugins:
${routes({
  dot: `{ addr: "tls://127.0.0.1:${dotRelay.port}", ${ca}, max_conns: 2 }`,
  doh: `{ addr: "https://127.0.0.1:${dohRelay.port}/dns-query", ${ca} }`,
  named: `{ addr: "tls://dns.sluice.test:${good.dot}", dial_addr: "127.0.0.1", ${ca} }`,
  named_doh: `{ addr: "https://dns.sluice.test/dns-query", dial_addr: "127.0.0.1:${good.doh}", ${ca} }`,
  wrong_name: `{ addr: "tls://other.sluice.test:${good.dot}", dial_addr: "127.0.0.1", ${ca} }`,
  untrusted_dot: `{ addr: "tls://127.0.0.1:${rogue.dot}", ${ca} }`,
  untrusted_doh: `{ addr: "https://127.0.0.1:${rogue.doh}/dns-query", ${ca} }`,
  no_store: `{ addr: "tls://127.0.0.1:${good.dot}" }`,
  insecure: `{ addr: "tls://127.0.0.1:${rogue.dot}", insecure_skip_verify: true }`,
  resume: `{ addr: "tls://127.0.0.1:${good.dot}", ${ca}, idle_timeout: 50ms }`,
  resume_doh: `{ addr: "https://127.0.0.1:${good.doh}", ${ca}, idle_timeout: 50ms }`,
})}
  - tag: main
    type: sequence
    args:
${["dot", "doh", "named", "named_doh", "wrong_name", "untrusted_dot", "untrusted_doh", "no_store", "insecure", "resume", "resume_doh"].map((r) => `      - { matches: "qname domain:${r.replace("_", "-")}.up.test", exec: $${r} }`).join("\n")}
      - exec: reject REFUSED
  - { tag: udp, type: udp_server, args: { entry: main, listen: "127.0.0.1:0" } }
`;
  s = await startSluice(config);
});
afterAll(async () => {
  await s?.stop();
  await Promise.all([good?.stop(), rogue?.stop(), dotRelay?.close(), dohRelay?.close()]);
});

async function metrics(): Promise<string> {
  return (await s.api("/api/metrics")).text();
}

/** `n` queries in waves of 50 in flight; every one must be answered with the upstream's address. */
async function burst(route: string, n: number): Promise<void> {
  for (let done = 0; done < n; done += 50) {
    const answers = await Promise.all(Array.from({ length: Math.min(50, n - done) }, (_, i) => query(s.udpPort, `q${done + i}.${route}.up.test`, "A", { timeoutMs: 4000 })));
    for (const a of answers) expect(answerIps(a)).toEqual([ANSWER]);
  }
}

describe("connection reuse", () => {
  test("DoT: 300 queries over at most max_conns (2) TLS connections, pipelined", async () => {
    await burst("dot", 300);
    expect(dotRelay.connections).toBeGreaterThanOrEqual(1);
    expect(dotRelay.connections).toBeLessThanOrEqual(2);
    expect(metricValue(await metrics(), "forward_upstream_connections_total", 'plugin_tag="dot"')).toBe(dotRelay.connections);
  });

  test("DoH: 300 queries over one HTTP/2 session", async () => {
    await burst("doh", 300);
    expect(dohRelay.connections).toBe(1);
    const text = await metrics();
    expect(metricValue(text, "forward_upstream_connections_total", 'plugin_tag="doh"')).toBe(1);
    expect(metricValue(text, "forward_upstream_success_total", 'plugin_tag="doh"')).toBe(300);
  });

  test("a new connection after an idle close resumes the TLS session (DoT and DoH)", async () => {
    for (const route of ["resume", "resume-doh"]) {
      for (let i = 0; i < 3; i++) {
        expect(answerIps(await query(s.udpPort, `r${i}.${route}.up.test`))).toEqual([ANSWER]);
        // Longer than idle_timeout: the connection closes and the next query opens a new one.
        await new Promise((r) => setTimeout(r, 200));
      }
    }
    const text = await metrics();
    for (const tag of ["resume", "resume_doh"]) {
      expect(metricValue(text, "forward_upstream_connections_total", `plugin_tag="${tag}"`), tag).toBe(3);
      expect(metricValue(text, "forward_upstream_tls_resumed_total", `plugin_tag="${tag}"`), tag).toBeGreaterThanOrEqual(1);
    }
  });
});

describe("certificates", () => {
  test("dial_addr connects to an IP and verifies the certificate against the host name (SNI too)", async () => {
    expect(answerIps(await query(s.udpPort, "a.named.up.test"))).toEqual([ANSWER]);
    expect(answerIps(await query(s.udpPort, "a.named-doh.up.test"))).toEqual([ANSWER]);
  });

  test("a certificate from an unknown CA, for another name, or not in the trust store is refused: SERVFAIL", async () => {
    for (const route of ["untrusted-dot", "untrusted-doh", "wrong-name", "no-store"]) {
      expect(rcodeOf(await query(s.udpPort, `a.${route}.up.test`)), route).toBe(2);
    }
    const text = await metrics();
    for (const tag of ["untrusted_dot", "untrusted_doh", "wrong_name", "no_store"]) {
      expect(metricValue(text, "forward_upstream_error_total", `plugin_tag="${tag}"`), tag).toBe(1);
      expect(metricValue(text, "forward_upstream_success_total", `plugin_tag="${tag}"`), tag).toBe(0);
    }
    // Each failure says why, naming the upstream (every one at debug level; at warn only the first of a period).
    const reasons = s.logs.filter((l) => l.msg === "query failed").map((l) => String(l.err));
    expect(reasons.filter((r) => /^tls:\/\/127\.0\.0\.1:\d+: tls: certificate not trusted/.test(r))).toHaveLength(2);
    expect(reasons.filter((r) => /^https:\/\/127\.0\.0\.1:\d+\/dns-query: https: certificate not trusted/.test(r))).toHaveLength(1);
    expect(reasons.filter((r) => /^tls:\/\/other\.sluice\.test:\d+: tls: certificate does not match/.test(r))).toHaveLength(1);
  });

  test("insecure_skip_verify accepts the certificate nothing else would", async () => {
    expect(answerIps(await query(s.udpPort, "a.insecure.up.test"))).toEqual([ANSWER]);
  });

  test("NODE_EXTRA_CA_CERTS adds the test CA to the trust store of the process", async () => {
    const dir = tempDir();
    const yaml = `plugins:\n  - { tag: main, type: sequence, args: [{ exec: "forward tls://127.0.0.1:${good.dot}" }] }\n  - { tag: udp, type: udp_server, args: { entry: main, listen: "127.0.0.1:0" } }\n`;
    writeFileSync(join(dir, "sluice.yaml"), yaml);
    for (const [extra, expected] of [[join(pki.dir, "ca.crt"), 0], [undefined, 2]] as const) {
      const cli = startCli(["-c", "sluice.yaml", "-d", dir], { cwd: dir, env: { NODE_EXTRA_CA_CERTS: extra } });
      try {
        const port = (await cli.waitForLog((l) => l.msg === "udp server listening")).port as number;
        await cli.waitForLog((l) => l.msg === "sluice started");
        expect(rcodeOf(await query(port, "a.up.test")), `NODE_EXTRA_CA_CERTS=${extra}`).toBe(expected);
      } finally {
        cli.child.kill("SIGTERM");
        await cli.exited;
      }
    }
  });
});
