import dgram from "node:dgram";
import { afterEach, expect, test } from "vitest";
import { UpstreamError } from "../../src/engine/upstream/exchange.js";
import { Upstream } from "../../src/engine/upstream/upstream.js";
import { answerIps, buildQuery } from "../helpers/dns.js";
import { answerBytes, idOf, startRawUpstream, type RawUpstream } from "../helpers/raw-upstream.js";
import { deadUdpPort } from "../helpers/responder.js";

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0)) await c();
});

async function raw(handlers: Parameters<typeof startRawUpstream>[0]): Promise<RawUpstream> {
  const r = await startRawUpstream(handlers);
  cleanups.push(() => r.close());
  return r;
}

function upstream(addr: string, extra: Partial<ConstructorParameters<typeof Upstream>[0]> = {}): Upstream {
  const u = new Upstream({ addr, name: addr, ...extra });
  cleanups.push(() => u.close());
  return u;
}

test("the answer comes back byte-for-byte; the query goes out unchanged except for our own ID", async () => {
  let sent: Buffer | null = null;
  const r = await raw({
    udp: (msg, reply) => {
      sent = answerBytes(msg, { ips: ["192.0.2.7"], ttl: 1234 });
      reply(sent);
    },
  });
  const query = buildQuery("pass.example", "A", { id: 0x1234, edns: 1400 });
  const answer = await upstream(`127.0.0.1:${r.port}`).exchange(query, null);
  expect(answer.toWire().equals(sent as unknown as Buffer)).toBe(true);
  const got = r.udpReceived[0];
  expect(got.subarray(2).equals(query.subarray(2))).toBe(true);
  expect(idOf(got)).not.toBe(0x1234);
});

test("every exchange picks a fresh random ID (never the client's)", async () => {
  const r = await raw({ udp: (msg, reply) => reply(answerBytes(msg)) });
  const u = upstream(`127.0.0.1:${r.port}`);
  const query = buildQuery("ids.example", "A", { id: 7 });
  for (let i = 0; i < 4; i++) await u.exchange(query, null);
  const ids = r.udpReceived.map(idOf);
  expect(ids).not.toContain(7);
  expect(new Set(ids).size).toBeGreaterThan(1);
});

test("wrong ID, wrong question, QR clear, garbage and other source ports are ignored; the real answer wins", async () => {
  const other = dgram.createSocket("udp4");
  await new Promise<void>((r) => other.bind(0, "127.0.0.1", () => r()));
  cleanups.push(() => new Promise<void>((r) => other.close(() => r())));
  const r = await raw({
    udp: (msg, reply, rinfo) => {
      const bogus = ["6.6.6.6"];
      reply(answerBytes(msg, { ips: bogus, id: (idOf(msg) + 1) & 0xffff }));
      reply(answerBytes(msg, { ips: bogus, name: "evil.example" }));
      reply(answerBytes(msg, { ips: bogus, notResponse: true }));
      reply(answerBytes(msg, { ips: bogus }).subarray(0, 20));
      other.send(answerBytes(msg, { ips: bogus }), rinfo.port, rinfo.address);
      // The genuine answer (question in different letter case, as 0x20-randomising servers do) comes last.
      setTimeout(() => reply(answerBytes(msg, { ips: ["192.0.2.55"], name: "SpOoF.ExAmPlE" })), 80);
    },
  });
  const answer = await upstream(`127.0.0.1:${r.port}`, { timeoutMs: 2000 }).exchange(buildQuery("spoof.example"), null);
  expect(answerIps(answer.message)).toEqual(["192.0.2.55"]);
});

test("a truncated UDP answer is retried over TCP to the same host:port and the full answer returned", async () => {
  const many = Array.from({ length: 40 }, (_, i) => `198.51.100.${i + 1}`);
  const r = await raw({
    udp: (msg, reply) => reply(answerBytes(msg, { ips: [], truncated: true })),
    tcp: (frame, peer) => peer.send(answerBytes(frame, { ips: many })),
  });
  const answer = await upstream(`127.0.0.1:${r.port}`).exchange(buildQuery("big.example"), null);
  expect(answer.truncated).toBe(false);
  expect(answerIps(answer.message)).toEqual(many);
  expect(r.udpReceived).toHaveLength(1);
  expect(r.tcpReceived).toHaveLength(1);
  expect(r.tcpReceived[0].subarray(2).equals(r.udpReceived[0].subarray(2))).toBe(true);
});

test("a silent upstream fails with a timeout after about `timeout`", async () => {
  const r = await raw({ udp: () => undefined });
  const started = performance.now();
  const err = await upstream(`127.0.0.1:${r.port}`, { timeoutMs: 300 })
    .exchange(buildQuery("silent.example"), null)
    .catch((e: unknown) => e);
  const took = performance.now() - started;
  expect(err).toBeInstanceOf(UpstreamError);
  expect((err as UpstreamError).kind).toBe("timeout");
  expect(took).toBeGreaterThanOrEqual(250);
  expect(took).toBeLessThan(1800);
});

test("the timeout bounds the whole exchange, TCP retry included", async () => {
  const r = await raw({ udp: (msg, reply) => reply(answerBytes(msg, { ips: [], truncated: true })), tcp: () => undefined });
  const started = performance.now();
  const err = await upstream(`127.0.0.1:${r.port}`, { timeoutMs: 400 })
    .exchange(buildQuery("tc-then-silent.example"), null)
    .catch((e: unknown) => e);
  const took = performance.now() - started;
  expect((err as UpstreamError).kind).toBe("timeout");
  expect(r.tcpReceived).toHaveLength(1);
  expect(took).toBeGreaterThanOrEqual(350);
  expect(took).toBeLessThan(1900);
});

test("a port with nothing listening fails fast (ICMP unreachable), long before the timeout", async () => {
  const port = await deadUdpPort();
  const started = performance.now();
  const err = await upstream(`127.0.0.1:${port}`, { timeoutMs: 5000 })
    .exchange(buildQuery("dead.example"), null)
    .catch((e: unknown) => e);
  expect((err as UpstreamError).kind).toBe("error");
  expect((err as Error).message).toContain("ECONNREFUSED");
  expect(performance.now() - started).toBeLessThan(1500);
});

test("many queries share a few sockets instead of one socket each", async () => {
  const r = await raw({ udp: (msg, reply) => setTimeout(() => reply(answerBytes(msg)), 20) });
  const u = upstream(`127.0.0.1:${r.port}`);
  const ports = new Set<number>();
  r.udpSocket.on("message", (_m, rinfo) => ports.add(rinfo.port));
  const answers = await Promise.all(Array.from({ length: 60 }, (_, i) => u.exchange(buildQuery(`q${i}.example`), null)));
  expect(answers).toHaveLength(60);
  for (const [i, a] of answers.entries()) expect(a.message.questions[0].name).toBe(`q${i}.example`);
  expect(ports.size).toBeGreaterThan(0);
  expect(ports.size).toBeLessThanOrEqual(4);
});

test("close() fails queries in flight at once", async () => {
  const r = await raw({ udp: () => undefined });
  const u = new Upstream({ addr: `127.0.0.1:${r.port}`, name: "x", timeoutMs: 5000 });
  const started = performance.now();
  const pending = u.exchange(buildQuery("closing.example"), null).catch((e: unknown) => e);
  await new Promise((res) => setTimeout(res, 50));
  u.close();
  const err = await pending;
  expect((err as Error).message).toContain("upstream closed");
  expect(performance.now() - started).toBeLessThan(1000);
});
