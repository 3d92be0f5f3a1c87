// DNS over TLS (tcp_server with cert and key), over real TLS sockets with certificates made here:
// dig +tls and kdig +tls (verifying against the test CA), a raw TLS client sending three queries
// back to back on one connection, the `dot` metrics label, the handshake bounded by frame_timeout,
// and reloads: an open DoT connection keeps answering, a changed certificate is used for new ones.
import { execFile, execFileSync } from "node:child_process";
import { copyFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import tls from "node:tls";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { decodeMessage } from "../../src/dns/message.js";
import { answerIps, buildQuery } from "../helpers/dns.js";
import { metricValue } from "../helpers/proc.js";
import { makeLeaf, makePki, type Pki } from "../helpers/pki.js";
import { startSluice, tempDir, type RunningSluice } from "../helpers/sluice.js";
import { RawTcp } from "../helpers/tcp-client.js";

const execFileAsync = promisify(execFile);

function requireTool(cmd: string, pkg: string): void {
  try {
    execFileSync(cmd, [cmd === "kdig" ? "-V" : "-v"], { stdio: "ignore" });
  } catch {
    throw new Error(`${cmd} is needed for the DoT interop checks: apt-get install ${pkg} (npm test installs it)`);
  }
}

const yaml = (ports: { api: number; dot: number; slow: number }): string => `
api: { http: "127.0.0.1:${ports.api}" }
plugins:
  - { tag: local, type: hosts, args: { entries: ["domain:dot.test 192.0.2.53"], short_circuit: true } }
  - tag: main
    type: sequence
    args:
      - { matches: "qtype TXT", exec: "sleep 300" }
      - { matches: ["qname full:who.dot.test", "client_ip 127.0.0.1"], exec: black_hole 10.1.1.1 short_circuit }
      - exec: $local
      - exec: reject NXDOMAIN
  - { tag: dot, type: tcp_server, args: { entry: main, listen: "127.0.0.1:${ports.dot}", cert: server.crt, key: server.key } }
  - { tag: slow, type: tcp_server, args: { entry: main, listen: "127.0.0.2:${ports.slow}", cert: server.crt, key: server.key, frame_timeout: 400ms, idle_timeout: 20s, max_conns: 2 } }
`;

let pki: Pki;
let s: RunningSluice;
const ports = { api: 0, dot: 0, slow: 0 };
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

beforeAll(async () => {
  requireTool("dig", "bind9-dnsutils");
  requireTool("kdig", "knot-dnsutils");
  pki = makePki(tempDir("sluice-pki-"));
  // Relative paths: resolved against the working directory (-d).
  s = await startSluice(yaml(ports), { "server.crt": pki.server.cert.toString(), "server.key": pki.server.key.toString() });
  Object.assign(ports, { api: Number(new URL(s.apiUrl).port), dot: s.port("dot"), slow: s.port("slow") });
  writeFileSync(join(s.dir, "sluice.yaml"), yaml(ports));
});
afterAll(() => s.stop());

const tlsOptions = (): tls.ConnectionOptions => ({ ca: pki.ca, ALPNProtocols: ["dot"] });

async function reload(): Promise<void> {
  const before = (await (await s.api("/api/reload/status")).json()) as { last_completed_ms: number | null };
  expect((await s.api("/api/reload", { method: "POST" })).status).toBe(202);
  for (;;) {
    const status = (await (await s.api("/api/reload/status")).json()) as { status: string; last_completed_ms: number | null; last_error?: string };
    if (status.status === "ok" && status.last_completed_ms !== before.last_completed_ms) return;
    if (status.status === "failed") throw new Error(JSON.stringify(status));
    await sleep(10);
  }
}

describe("clients", () => {
  test("dig +tls and kdig +tls get answers, verifying the certificate against the test CA", async () => {
    const ca = join(pki.dir, "ca.crt");
    const dig = await execFileAsync("dig", ["@127.0.0.1", "-p", String(ports.dot), "+tls", `+tls-ca=${ca}`, "+time=2", "+tries=1", "www.dot.test", "+short"], { timeout: 5000 });
    expect(dig.stdout.trim()).toBe("192.0.2.53");
    const kdig = await execFileAsync("kdig", ["@127.0.0.1", "-p", String(ports.dot), `+tls-ca=${ca}`, "+time=2", "+retry=0", "www.dot.test", "+short"], { timeout: 5000 });
    expect(kdig.stdout.trim()).toBe("192.0.2.53");
    const nx = await execFileAsync("kdig", ["@127.0.0.1", "-p", String(ports.dot), "+tls", "+time=2", "+retry=0", "nothing.example"], { timeout: 5000 });
    expect(nx.stdout).toMatch(/status: NXDOMAIN/);
  });

  test("a raw TLS client with ALPN dot gets three answers for three queries sent back to back", async () => {
    const before = metricValue(await (await s.api("/api/metrics")).text(), "server_request_total", 'plugin_tag="dot",protocol="dot"');
    const c = new RawTcp(ports.dot, "127.0.0.1", tlsOptions());
    await c.connected;
    expect((c.sock as tls.TLSSocket).alpnProtocol).toBe("dot");
    // The slow one first: the other two are answered as they complete, not in order.
    c.send(buildQuery("slow.dot.test", "TXT", { id: 1 }), buildQuery("a.dot.test", "A", { id: 2 }), buildQuery("b.dot.test", "A", { id: 3 }));
    const answers = (await c.waitAnswers(3)).map(decodeMessage);
    expect(answers.map((m) => m.id)).toEqual([2, 3, 1]);
    expect(answerIps(answers[0])).toEqual(["192.0.2.53"]);
    // Matchers see the client's address through TLS.
    c.send(buildQuery("who.dot.test", "A", { id: 4 }));
    expect(answerIps(decodeMessage((await c.waitAnswers(4))[3]))).toEqual(["10.1.1.1"]);
    c.destroy();
    const after = metricValue(await (await s.api("/api/metrics")).text(), "server_request_total", 'plugin_tag="dot",protocol="dot"');
    expect(after - before).toBe(4);
  });
});

describe("limits", () => {
  test("a TLS handshake that never finishes is cut off by frame_timeout, and is the first evicted at max_conns", async () => {
    // Connects at the TCP level and never sends a ClientHello.
    const stalled = new RawTcp(ports.slow, "127.0.0.2");
    await stalled.connected;
    const started = Date.now();
    expect(await stalled.closesWithin(3000)).toBe(true);
    expect(Date.now() - started).toBeLessThan(2000);
    // max_conns 2: two stalled handshakes, then a real client takes the place of one of them.
    const a = new RawTcp(ports.slow, "127.0.0.2");
    const b = new RawTcp(ports.slow, "127.0.0.2");
    await Promise.all([a.connected, b.connected]);
    await sleep(50);
    // The test certificate names 127.0.0.1 only.
    const real = new RawTcp(ports.slow, "127.0.0.2", { ...tlsOptions(), checkServerIdentity: (_host, cert) => tls.checkServerIdentity("127.0.0.1", cert) });
    await real.connected;
    real.send(buildQuery("c.dot.test", "A", { id: 9 }));
    expect(decodeMessage((await real.waitAnswers(1))[0]).id).toBe(9);
    expect(a.isClosed || b.isClosed).toBe(true);
    // Once the handshake is done, frame_timeout no longer runs: an idle moment longer than it is fine.
    await sleep(700);
    real.send(buildQuery("d.dot.test", "A", { id: 10 }));
    expect(decodeMessage((await real.waitAnswers(2))[1]).id).toBe(10);
    for (const c of [a, b, real]) c.destroy();
  });
});

describe("reload", () => {
  test("a DoT connection opened before a reload answers after it; a changed certificate is served to new connections", async () => {
    const old = new RawTcp(ports.dot, "127.0.0.1", tlsOptions());
    await old.connected;
    const oldSerial = (old.sock as tls.TLSSocket).getPeerCertificate().serialNumber;
    old.send(buildQuery("before.dot.test", "A", { id: 10 }));
    await old.waitAnswers(1);

    await reload();
    old.send(buildQuery("after.dot.test", "A", { id: 11 }));
    expect(decodeMessage((await old.waitAnswers(2))[1]).id).toBe(11);

    // A renewed certificate (same name, new serial) at the same path.
    makeLeaf(pki.dir, "ca", "renewed", "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n");
    copyFileSync(join(pki.dir, "renewed.crt"), join(s.dir, "server.crt"));
    copyFileSync(join(pki.dir, "renewed.key"), join(s.dir, "server.key"));
    await reload();
    const fresh = new RawTcp(ports.dot, "127.0.0.1", tlsOptions());
    await fresh.connected;
    expect((fresh.sock as tls.TLSSocket).getPeerCertificate().serialNumber).not.toBe(oldSerial);
    fresh.send(buildQuery("new.dot.test", "A", { id: 12 }));
    expect(decodeMessage((await fresh.waitAnswers(1))[0]).id).toBe(12);
    // The connection from before both reloads still answers, on its original certificate.
    old.send(buildQuery("still.dot.test", "A", { id: 13 }));
    expect(decodeMessage((await old.waitAnswers(3))[2]).id).toBe(13);
    expect((old.sock as tls.TLSSocket).getPeerCertificate().serialNumber).toBe(oldSerial);
    old.destroy();
    fresh.destroy();
  });
});

test("cert without key, and an unreadable certificate, are refused with the reason", async () => {
  await expect(startSluice(`plugins:\n  - { tag: main, type: sequence, args: [{ exec: reject 5 }] }\n  - { tag: t, type: tcp_server, args: { entry: main, listen: "127.0.0.1:0", cert: a.crt } }\n`)).rejects.toThrow(/key is needed too/);
  await expect(startSluice(`plugins:\n  - { tag: main, type: sequence, args: [{ exec: reject 5 }] }\n  - { tag: t, type: tcp_server, args: { entry: main, listen: "127.0.0.1:0", cert: missing.crt, key: missing.key } }\n`)).rejects.toThrow(/cannot read cert 'missing.crt': ENOENT/);
});
