// How forward's connections leave: min_conns kept open from start-up and re-opened when closed
// (counted at a TCP upstream and at a SOCKS5 proxy), per-upstream socks5 for TCP, DoT and DoH (the
// proxy resolves host names; a udp:// upstream speaks TCP through it), OxiDNS's proxy spelling,
// an outbound profile's bind address seen by the upstream, its resolver for a hostname upstream,
// and a bootstrap list that falls through to its second server. DoT and DoH upstreams are a second
// Sluice with certificates made here.
import { join } from "node:path";
import { afterAll, beforeAll, expect, test } from "vitest";
import { answerIps, query, rcodeOf } from "../helpers/dns.js";
import { metricValue } from "../helpers/proc.js";
import { makeLeaf, makePki, type Pki } from "../helpers/pki.js";
import { answerBytes, startRawUpstream, type RawUpstream } from "../helpers/raw-upstream.js";
import { answerWith, deadUdpPort, startResponder, type Responder } from "../helpers/responder.js";
import { startSluice, tempDir, type RunningSluice } from "../helpers/sluice.js";
import { startSocks5, type Socks5Server } from "../helpers/socks5.js";

let pki: Pki;
let encrypted: RunningSluice;
let raw: RawUpstream;
let names: Responder;
let proxy: Socks5Server;
let authProxy: Socks5Server;
const cleanups: (() => unknown)[] = [];

beforeAll(async () => {
  pki = makePki(tempDir("sluice-pki-"));
  makeLeaf(pki.dir, "ca", "named", "subjectAltName=DNS:dns.localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n");
  encrypted = await startSluice(`
plugins:
  - { tag: main, type: sequence, args: [{ exec: black_hole 192.0.2.53 short_circuit }] }
  - { tag: dot, type: tcp_server, args: { entry: main, listen: "127.0.0.1:0", cert: ${join(pki.dir, "named.crt")}, key: ${join(pki.dir, "named.key")} } }
  - tag: doh
    type: http_server
    args: { listen: "127.0.0.1:0", cert: ${join(pki.dir, "named.crt")}, key: ${join(pki.dir, "named.key")}, entries: [{ path: /dns-query, exec: main }] }
`);
  raw = await startRawUpstream({
    udp: (msg, reply) => reply(answerBytes(msg, { ips: ["192.0.2.1"] })),
    tcp: (frame, peer) => peer.send(answerBytes(frame, { ips: ["192.0.2.2"] })),
  });
  names = await startResponder((q) => answerWith(q, q.questions[0].name === "dns.lab.test" ? ["127.0.0.1"] : []));
  proxy = await startSocks5();
  authProxy = await startSocks5({ user: "dns", pass: "s3cret" });
});
afterAll(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
  await Promise.all([encrypted?.stop(), raw?.close(), names?.close(), proxy?.close(), authProxy?.close()]);
});

/** One forward per route, each reached by `qname domain:<route>.test`. */
async function routes(r: Record<string, string>, top = ""): Promise<RunningSluice> {
  const plugins = Object.entries(r).map(([name, args]) => `  - { tag: ${name}, type: forward, args: ${args} }`);
  const rules = Object.keys(r).map((name) => `      - { matches: "qname domain:${name.replace(/_/g, "-")}.test", exec: $${name} }`);
  const s = await startSluice(`${top}api: { http: "127.0.0.1:0" }
plugins:
${plugins.join("\n")}
  - tag: main
    type: sequence
    args:
${rules.join("\n")}
  - { tag: udp, type: udp_server, args: { entry: main, listen: "127.0.0.1:0" } }
`);
  cleanups.push(() => s.stop());
  return s;
}

const waitFor = async (what: string, cond: () => boolean): Promise<void> => {
  const deadline = performance.now() + 4000;
  while (!cond()) {
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
};

const ca = (): string => `ca: ${join(pki.dir, "ca.crt")}`;

test("min_conns: kept TCP connections open before any query, stay open when idle, and are re-opened when the upstream closes one", async () => {
  const before = raw.accepted;
  const s = await routes({ kept: `{ upstreams: [{ addr: "tcp://127.0.0.1:${raw.port}", min_conns: 2, max_conns: 3, idle_timeout: 0 }] }` });
  await waitFor("two connections", () => raw.accepted === before + 2);
  for (let i = 0; i < 3; i++) expect(answerIps(await query(s.udpPort, `q${i}.kept.test`))).toEqual(["192.0.2.2"]);
  expect(raw.accepted).toBe(before + 2);
  raw.peers[raw.peers.length - 1].hangUp();
  await waitFor("a third connection", () => raw.accepted === before + 3);
  const metrics = await (await s.api("/api/metrics")).text();
  expect(metricValue(metrics, "forward_upstream_connections_total", `plugin_tag="kept",upstream="tcp://127.0.0.1:${raw.port}"`)).toBe(3);
});

test("min_conns through a SOCKS5 proxy: the DoT connection and the DoH session exist before the first query", async () => {
  const before = proxy.targets.length;
  const s = await routes({
    dot_kept: `{ upstreams: [{ addr: "tls://dns.localhost:${encrypted.port("dot")}", socks5: "${proxy.url}", min_conns: 1, ${ca()} }] }`,
    doh_kept: `{ upstreams: [{ addr: "https://dns.localhost:${encrypted.port("doh")}/dns-query", socks5: "${proxy.url}", min_conns: 1, ${ca()} }] }`,
  });
  await waitFor("two proxied connections", () => proxy.targets.length === before + 2);
  expect(proxy.targets.slice(before).sort()).toEqual([`dns.localhost:${encrypted.port("doh")}`, `dns.localhost:${encrypted.port("dot")}`].sort());
  expect(answerIps(await query(s.udpPort, "a.dot-kept.test"))).toEqual(["192.0.2.53"]);
  expect(answerIps(await query(s.udpPort, "a.doh-kept.test"))).toEqual(["192.0.2.53"]);
  expect(proxy.targets.length).toBe(before + 2);
});

test("socks5: TCP, DoT and DoH upstreams connect through the proxy, which resolves their names; a udp:// upstream speaks TCP through it; port overrides the address's", async () => {
  const before = proxy.targets.length;
  const tcpBefore = raw.tcpReceived.length;
  const udpBefore = raw.udpReceived.length;
  const s = await routes({
    tcp: `{ upstreams: [{ addr: "tcp://127.0.0.1:${raw.port}", socks5: "${proxy.url}" }] }`,
    dot: `{ upstreams: [{ addr: "tls://dns.localhost:${encrypted.port("dot")}", socks5: "${proxy.url}", ${ca()} }] }`,
    doh: `{ upstreams: [{ addr: "https://dns.localhost:${encrypted.port("doh")}/dns-query", socks5: "${proxy.url}", ${ca()} }] }`,
    plain_udp: `{ upstreams: [{ addr: "udp://127.0.0.1:${raw.port}", socks5: "${proxy.url}" }] }`,
    ported: `{ upstreams: [{ addr: "tcp://127.0.0.1", port: ${raw.port}, socks5: "${proxy.url}" }] }`,
  });
  expect(answerIps(await query(s.udpPort, "a.tcp.test"))).toEqual(["192.0.2.2"]);
  expect(answerIps(await query(s.udpPort, "a.dot.test"))).toEqual(["192.0.2.53"]);
  expect(answerIps(await query(s.udpPort, "b.dot.test"))).toEqual(["192.0.2.53"]);
  expect(answerIps(await query(s.udpPort, "a.doh.test"))).toEqual(["192.0.2.53"]);
  expect(answerIps(await query(s.udpPort, "a.plain-udp.test"))).toEqual(["192.0.2.2"]);
  expect(answerIps(await query(s.udpPort, "a.ported.test"))).toEqual(["192.0.2.2"]);
  // One connection each (the DoT one reused), names as written; `port` overrides the scheme's 53.
  expect(proxy.targets.slice(before)).toEqual([`127.0.0.1:${raw.port}`, `dns.localhost:${encrypted.port("dot")}`, `dns.localhost:${encrypted.port("doh")}`, `127.0.0.1:${raw.port}`, `127.0.0.1:${raw.port}`]);
  expect(raw.tcpReceived.length - tcpBefore).toBe(3);
  expect(raw.udpReceived.length).toBe(udpBefore);
});

test("socks5 with a user and password, also in OxiDNS's spelling without the scheme; wrong credentials are SERVFAIL", async () => {
  const hostPort = `127.0.0.1:${authProxy.port}`;
  const s = await routes({
    scheme: `{ upstreams: [{ addr: "tcp://127.0.0.1:${raw.port}", socks5: "socks5://dns:s3cret@${hostPort}" }] }`,
    bare: `{ upstreams: [{ addr: "tcp://127.0.0.1:${raw.port}", socks5: "dns:s3cret@${hostPort}" }] }`,
    wrong: `{ upstreams: [{ addr: "tcp://127.0.0.1:${raw.port}", socks5: "dns:nope@${hostPort}", timeout: 2s }] }`,
  });
  expect(answerIps(await query(s.udpPort, "a.scheme.test"))).toEqual(["192.0.2.2"]);
  expect(answerIps(await query(s.udpPort, "a.bare.test"))).toEqual(["192.0.2.2"]);
  expect(rcodeOf(await query(s.udpPort, "a.wrong.test", "A", { timeoutMs: 4000 }))).toBe(2);
  expect(authProxy.targets).toEqual([`127.0.0.1:${raw.port}`, `127.0.0.1:${raw.port}`]);
});

test("an outbound profile's bind address is where UDP, TCP and proxied connections come from; an upstream's own outbound wins over the plugin's", async () => {
  const seenFrom: string[] = [];
  const up = await startRawUpstream({
    udp: (msg, reply, rinfo) => {
      seenFrom.push(`udp ${rinfo.address}`);
      reply(answerBytes(msg, { ips: ["192.0.2.3"] }));
    },
    tcp: (frame, peer) => {
      seenFrom.push(`tcp ${peer.socket.remoteAddress}`);
      peer.send(answerBytes(frame, { ips: ["192.0.2.4"] }));
    },
  });
  cleanups.push(() => up.close());
  const clientsBefore = proxy.clients.length;
  const s = await routes(
    {
      bound: `{ outbound: two, upstreams: [{ addr: "127.0.0.1:${up.port}" }, { addr: "tcp://127.0.0.1:${up.port}", outbound: three }], concurrent: 2, response_selection: consensus }`,
      proxied: `{ outbound: proxied, upstreams: [{ addr: "tcp://127.0.0.1:${up.port}" }] }`,
    },
    `network:
  outbound:
    two: { bind: 127.0.0.2 }
    three: { bind: 127.0.0.3 }
    proxied: { bind: 127.0.0.4, socks5: "${proxy.url}" }
`,
  );
  // consensus asks both; they disagree (two addresses), which is SERVFAIL, but both were asked.
  expect(rcodeOf(await query(s.udpPort, "a.bound.test"))).toBe(2);
  expect(seenFrom.sort()).toEqual(["tcp 127.0.0.3", "udp 127.0.0.2"]);
  expect(answerIps(await query(s.udpPort, "a.proxied.test"))).toEqual(["192.0.2.4"]);
  expect(proxy.clients.slice(clientsBefore)).toEqual(["127.0.0.4"]);
});

test("a hostname upstream: resolved by the outbound profile's resolver, or by the second of two bootstrap servers when the first is dead", async () => {
  const dead = await deadUdpPort();
  const asked = names.seen.length;
  const s = await routes(
    {
      resolved: `{ outbound: lab, upstreams: [{ addr: "udp://dns.lab.test:${raw.port}" }] }`,
      booted: `{ upstreams: [{ addr: "tcp://dns.lab.test:${raw.port}", bootstrap: ["127.0.0.1:${dead}", "127.0.0.1:${names.port}"], timeout: 2s }] }`,
    },
    `network:\n  outbound:\n    lab: { resolver: "127.0.0.1:${names.port}" }\n`,
  );
  expect(answerIps(await query(s.udpPort, "a.resolved.test"))).toEqual(["192.0.2.1"]);
  expect(answerIps(await query(s.udpPort, "a.booted.test", "A", { timeoutMs: 4000 }))).toEqual(["192.0.2.2"]);
  expect(names.seen.slice(asked).map((q) => q.query.questions[0].name)).toEqual(["dns.lab.test", "dns.lab.test"]);
});
