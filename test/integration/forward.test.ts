import dgram from "node:dgram";
import { afterEach, expect, test } from "vitest";
import { ConfigError } from "../../src/config/diagnostics.js";
import { decodeMessage } from "../../src/dns/message.js";
import { answerIps, query, buildQuery, rcodeOf, tcpExchange, udpExchange } from "../helpers/dns.js";
import { answerBytes, idOf, startRawUpstream, type RawHandlers, type RawUpstream } from "../helpers/raw-upstream.js";
import { serversYaml, startSluice, type RunningSluice } from "../helpers/sluice.js";

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function raw(handlers: RawHandlers): Promise<RawUpstream> {
  const r = await startRawUpstream(handlers);
  cleanups.push(() => r.close());
  return r;
}

async function sluice(plugins: string): Promise<RunningSluice> {
  const s = await startSluice(`plugins:\n${plugins}\n${serversYaml()}`);
  cleanups.push(() => s.stop());
  return s;
}

test("the upstream's answer reaches the client byte-for-byte apart from the ID; the client's query and EDNS go out as sent", async () => {
  let sent: Buffer | null = null;
  const r = await raw({
    udp: (msg, reply) => {
      sent = answerBytes(msg, { ips: ["192.0.2.10", "192.0.2.11"], ttl: 4321 });
      reply(sent);
    },
  });
  const s = await sluice(`
  - tag: fwd
    type: forward
    args: { upstreams: [{ addr: "127.0.0.1:${r.port}" }] }
  - tag: main
    type: sequence
    args: [{ exec: $fwd }]`);
  const query = buildQuery("bytes.example", "A", { id: 0xbeef, edns: { udpSize: 1400, options: [{ code: 10, data: Buffer.from("0123456789abcdef") }] } });
  const answer = (await udpExchange(s.udpPort, query)) as Buffer;
  expect(idOf(answer)).toBe(0xbeef);
  expect(answer.subarray(2).equals((sent as unknown as Buffer).subarray(2))).toBe(true);
  const upstreamSaw = r.udpReceived[0];
  expect(idOf(upstreamSaw)).not.toBe(0xbeef);
  expect(upstreamSaw.subarray(2).equals(query.subarray(2))).toBe(true);
});

test("a silent upstream gives the client SERVFAIL after about the timeout", async () => {
  const r = await raw({ udp: () => undefined });
  const s = await sluice(`
  - tag: main
    type: sequence
    args:
      - exec: $fwd
  - tag: fwd
    type: forward
    args: { upstreams: [{ addr: "udp://127.0.0.1:${r.port}", timeout: 500ms }] }`);
  const started = performance.now();
  const m = await query(s.udpPort, "silent.example", "A", { timeoutMs: 4000 });
  const took = performance.now() - started;
  expect(rcodeOf(m)).toBe(2);
  expect(took).toBeGreaterThanOrEqual(450);
  expect(took).toBeLessThan(2000);
});

test("bogus answers (wrong ID, wrong question, another source port) are ignored and the real one is served", async () => {
  const other = dgram.createSocket("udp4");
  await new Promise<void>((res) => other.bind(0, "127.0.0.1", () => res()));
  cleanups.push(() => new Promise<void>((res) => other.close(() => res())));
  const r = await raw({
    udp: (msg, reply, rinfo) => {
      reply(answerBytes(msg, { ips: ["6.6.6.6"], id: (idOf(msg) ^ 0x5555) & 0xffff }));
      reply(answerBytes(msg, { ips: ["6.6.6.7"], name: "elsewhere.example" }));
      other.send(answerBytes(msg, { ips: ["6.6.6.8"] }), rinfo.port, rinfo.address);
      setTimeout(() => reply(answerBytes(msg, { ips: ["192.0.2.20"] })), 100);
    },
  });
  const s = await sluice(`
  - tag: main
    type: sequence
    args:
      - exec: forward 127.0.0.1:${r.port}`);
  const m = await query(s.udpPort, "spoofed.example");
  expect(answerIps(m)).toEqual(["192.0.2.20"]);
});

test("a truncated UDP answer is fetched again over TCP and served whole", async () => {
  const ips = Array.from({ length: 30 }, (_, i) => `203.0.113.${i + 1}`);
  const r = await raw({
    udp: (msg, reply) => reply(answerBytes(msg, { ips: [], truncated: true })),
    tcp: (frame, peer) => peer.send(answerBytes(frame, { ips })),
  });
  const s = await sluice(`
  - tag: main
    type: sequence
    args:
      - exec: forward 127.0.0.1:${r.port}`);
  const m = await query(s.udpPort, "large.example", "A", { edns: 4096 });
  expect(m.flags & 0x0200).toBe(0);
  expect(answerIps(m)).toEqual(ips);
  expect(r.udpReceived).toHaveLength(1);
  expect(r.tcpReceived).toHaveLength(1);
});

test("a tcp:// upstream is asked over TCP and its pooled connection is reused across client queries", async () => {
  const r = await raw({ tcp: (frame, peer) => peer.send(answerBytes(frame, { ips: ["192.0.2.30"] })) });
  const s = await sluice(`
  - tag: main
    type: sequence
    args:
      - exec: forward tcp://127.0.0.1:${r.port}`);
  for (let i = 0; i < 4; i++) expect(answerIps(await query(s.udpPort, `t${i}.example`))).toEqual(["192.0.2.30"]);
  const [viaTcp] = await tcpExchange(s.tcpPort, [buildQuery("t-tcp.example")]);
  expect(answerIps(decodeMessage(viaTcp))).toEqual(["192.0.2.30"]);
  expect(r.udpReceived).toHaveLength(0);
  expect(r.tcpReceived).toHaveLength(5);
  expect(r.accepted).toBe(1);
});

test("short_circuit ends the sequence; without it the next rule still runs", async () => {
  const r = await raw({ udp: (msg, reply) => reply(answerBytes(msg, { ips: ["192.0.2.40"] })) });
  const s = await sluice(`
  - tag: stop
    type: sequence
    args:
      - exec: forward 127.0.0.1:${r.port} short_circuit
      - exec: reject 5
  - tag: go_on
    type: sequence
    args:
      - exec: forward 127.0.0.1:${r.port} short_circuit=false
      - exec: reject 5
  - tag: object_form
    type: sequence
    args:
      - exec: $fwd_sc
      - exec: reject 5
  - tag: fwd_sc
    type: forward
    args: { upstreams: [{ addr: "127.0.0.1:${r.port}" }], short_circuit: true }
  - tag: main
    type: sequence
    args:
      - matches: qname domain:stop.example
        exec: goto stop
      - matches: qname domain:object.example
        exec: goto object_form
      - exec: goto go_on`);
  const stopped = await query(s.udpPort, "stop.example");
  expect(rcodeOf(stopped)).toBe(0);
  expect(answerIps(stopped)).toEqual(["192.0.2.40"]);
  expect(rcodeOf(await query(s.udpPort, "object.example"))).toBe(0);
  expect(rcodeOf(await query(s.udpPort, "continued.example"))).toBe(5);
});

test("forward counts calls and per-upstream outcomes in its metrics", async () => {
  const good = await raw({ udp: (msg, reply) => reply(answerBytes(msg)) });
  const silent = await raw({ udp: () => undefined });
  const s = await sluice(`
  - tag: main
    type: sequence
    args:
      - matches: qname domain:slow.example
        exec: $slow
      - exec: $fwd
  - tag: fwd
    type: forward
    args: { upstreams: [{ addr: "127.0.0.1:${good.port}", tag: good }] }
  - tag: slow
    type: forward
    args: { upstreams: [{ addr: "127.0.0.1:${silent.port}", timeout: 300ms }] }`);
  await query(s.udpPort, "a.example");
  await query(s.udpPort, "b.example");
  expect(rcodeOf(await query(s.udpPort, "slow.example"))).toBe(2);
  const text = await s.app.services.metrics.text();
  const value = (line: string): number => Number(new RegExp(`^${line.replace(/[{}]/g, "\\$&")} (\\d+)`, "m").exec(text)?.[1] ?? NaN);
  expect(value('forward_query_total{plugin_tag="fwd"}')).toBe(2);
  expect(value('forward_success_total{plugin_tag="fwd"}')).toBe(2);
  expect(value('forward_query_duration_seconds_count{plugin_tag="fwd"}')).toBe(2);
  expect(value('forward_query_duration_seconds_bucket{le="5",plugin_tag="fwd"}')).toBe(2);
  expect(value('forward_upstream_query_duration_seconds_count{plugin_tag="fwd",upstream="good"}')).toBe(2);
  // The failed call is not a latency sample.
  expect(value('forward_query_duration_seconds_count{plugin_tag="slow"}')).toBe(0);
  expect(value('forward_upstream_success_total{plugin_tag="fwd",upstream="good"}')).toBe(2);
  expect(value('forward_error_total{plugin_tag="slow"}')).toBe(1);
  expect(value('forward_timeout_total{plugin_tag="slow"}')).toBe(1);
  expect(value(`forward_upstream_timeout_total{plugin_tag="slow",upstream="127.0.0.1:${silent.port}"}`)).toBe(1);
});

test("configuration errors name the field: unsupported schemes, unknown keys, bad values", async () => {
  const tryConfig = async (args: string): Promise<string> => {
    const err = await startSluice(`plugins:\n  - tag: fwd\n    type: forward\n    args: ${args}\n  - tag: main\n    type: sequence\n    args: [{ exec: $fwd }]\n${serversYaml()}`).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConfigError);
    return (err as Error).message;
  };
  expect(await tryConfig(`{ upstreams: [{ addr: "quic://1.1.1.1" }] }`)).toContain("args.upstreams[0].addr: scheme quic:// is not supported in this build");
  expect(await tryConfig(`{ upstreams: [{ addr: "1.1.1.1", insecure_skip_verify: true }] }`)).toContain("args.upstreams[0].insecure_skip_verify: insecure_skip_verify applies to tls:// and https:// upstreams only");
  expect(await tryConfig(`{ upstreams: [{ addr: "tls://1.1.1.1", dial_addr: "dns.google" }] }`)).toContain("args.upstreams[0].dial_addr: dial_addr 'dns.google' must be an IP address");
  // Files are read when the plugin is created (start-up or reload), not by `check`.
  const noCa = await startSluice(`plugins:\n  - { tag: fwd, type: forward, args: { upstreams: [{ addr: "tls://1.1.1.1", ca: missing.pem }] } }\n  - { tag: main, type: sequence, args: [{ exec: $fwd }] }\n${serversYaml()}`).catch((e: unknown) => e);
  expect((noCa as Error).message).toContain("args.upstreams[0].ca: cannot read ca 'missing.pem': ENOENT");
  expect(await tryConfig(`{ upstreams: [{ addr: "1.1.1.1", socks5: "http://127.0.0.1:1080" }] }`)).toContain("args.upstreams[0].socks5: 'http://127.0.0.1:1080': only socks5:// proxies are supported");
  expect(await tryConfig(`{ upstreams: [{ addr: "1.1.1.1", enable_http3: true }] }`)).toContain("unknown field 'enable_http3'");
  expect(await tryConfig(`{ upstreams: [] }`)).toContain("upstreams");
  expect(await tryConfig(`{ upstreams: [{ addr: "1.1.1.1" }], concurrent: 33 }`)).toContain("concurrent");
  expect(await tryConfig(`{ upstreams: [{ addr: "1.1.1.1", timeout: 0 }] }`)).toContain("timeout must be greater than zero");
  expect(await tryConfig(`{ upstreams: [{ addr: "dns.test", bootstrap: "dns.google" }] }`)).toContain("args.upstreams[0].bootstrap");
  const quick = await startSluice(`plugins:\n  - tag: main\n    type: sequence\n    args: [{ exec: forward h3://dns.google/dns-query }]\n${serversYaml()}`).catch((e: unknown) => e);
  expect((quick as Error).message).toContain("scheme h3:// is not supported in this build");
  const empty = await startSluice(`plugins:\n  - tag: main\n    type: sequence\n    args: [{ exec: forward short_circuit }]\n${serversYaml()}`).catch((e: unknown) => e);
  expect((empty as Error).message).toContain("at least one upstream address");
});
