import net from "node:net";
import { afterEach, expect, test } from "vitest";
import { decodeMessage } from "../../src/dns/message.js";
import type { UpstreamError } from "../../src/engine/upstream/exchange.js";
import { Upstream, type UpstreamOptions } from "../../src/engine/upstream/upstream.js";
import { answerIps, buildQuery } from "../helpers/dns.js";
import { answerBytes, startRawUpstream, type RawHandlers, type RawUpstream, type TcpPeer } from "../helpers/raw-upstream.js";

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0)) await c();
});

async function raw(handlers: RawHandlers): Promise<RawUpstream> {
  const r = await startRawUpstream(handlers);
  cleanups.push(() => r.close());
  return r;
}

function upstream(addr: string, extra: Partial<UpstreamOptions> = {}): Upstream {
  const u = new Upstream({ addr, name: addr, ...extra });
  cleanups.push(() => u.close());
  return u;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** The address a test query for `name` (or the query in `frame`) is answered with. */
function ipFor(name: string | Buffer): string {
  const text = typeof name === "string" ? name : decodeMessage(name).questions[0].name;
  return `198.51.100.${Number(/\d+/.exec(text)?.[0] ?? 0)}`;
}

test("tcp:// reuses one pooled connection for sequential queries", async () => {
  const r = await raw({ tcp: (frame, peer) => peer.send(answerBytes(frame, { ips: ["192.0.2.1"] })) });
  const u = upstream(`tcp://127.0.0.1:${r.port}`);
  for (let i = 0; i < 5; i++) {
    const a = await u.exchange(buildQuery(`seq${i}.example`), null);
    expect(answerIps(a.message)).toEqual(["192.0.2.1"]);
  }
  expect(r.tcpReceived).toHaveLength(5);
  expect(r.udpReceived).toHaveLength(0);
  expect(r.accepted).toBe(1);
});

test("without pipelining a connection carries one query at a time and max_conns caps the pool", async () => {
  const inflight = new Map<TcpPeer, number>();
  let worst = 0;
  const r = await raw({
    tcp: (frame, peer) => {
      const n = (inflight.get(peer) ?? 0) + 1;
      inflight.set(peer, n);
      worst = Math.max(worst, n);
      setTimeout(() => {
        inflight.set(peer, (inflight.get(peer) ?? 1) - 1);
        peer.send(answerBytes(frame, { ips: [ipFor(frame)] }));
      }, 40);
    },
  });
  const u = upstream(`tcp://127.0.0.1:${r.port}`, { maxConns: 2 });
  const names = Array.from({ length: 8 }, (_, i) => `n${i + 1}.example`);
  const answers = await Promise.all(names.map((n) => u.exchange(buildQuery(n), null)));
  answers.forEach((a, i) => expect(answerIps(a.message)).toEqual([ipFor(names[i])]));
  expect(worst).toBe(1);
  expect(r.maxOpen).toBeLessThanOrEqual(2);
  expect(r.accepted).toBe(2);
});

test("pipelining sends several queries on one connection and matches answers that come back out of order", async () => {
  const held: { frame: Buffer; peer: TcpPeer }[] = [];
  const r = await raw({
    tcp: (frame, peer) => {
      held.push({ frame, peer });
      if (held.length === 3) for (const h of held.reverse()) h.peer.send(answerBytes(h.frame, { ips: [ipFor(h.frame)] }));
    },
  });
  const u = upstream(`tcp+pipeline://127.0.0.1:${r.port}`, { maxConns: 1 });
  const names = ["p1.example", "p2.example", "p3.example"];
  const answers = await Promise.all(names.map((n) => u.exchange(buildQuery(n), null)));
  answers.forEach((a, i) => expect(answerIps(a.message)).toEqual([ipFor(names[i])]));
  expect(r.accepted).toBe(1);
});

test("enable_pipeline on a tcp:// upstream pipelines too, within max_conns", async () => {
  const r = await raw({ tcp: (frame, peer) => setTimeout(() => peer.send(answerBytes(frame, { ips: [ipFor(frame)] })), 30) });
  const u = upstream(`tcp://127.0.0.1:${r.port}`, { pipeline: true, maxConns: 2 });
  const names = Array.from({ length: 12 }, (_, i) => `m${i + 1}.example`);
  const answers = await Promise.all(names.map((n) => u.exchange(buildQuery(n), null)));
  answers.forEach((a, i) => expect(answerIps(a.message)).toEqual([ipFor(names[i])]));
  expect(r.accepted).toBe(2);
  expect(r.maxOpen).toBe(2);
});

test("an idle connection is closed after idle_timeout, not before", async () => {
  const r = await raw({ tcp: (frame, peer) => peer.send(answerBytes(frame)) });
  const u = upstream(`tcp://127.0.0.1:${r.port}`, { idleTimeoutMs: 300 });
  await u.exchange(buildQuery("idle.example"), null);
  await sleep(100);
  expect(r.open).toBe(1);
  expect(r.closedByClient).toBe(0);
  await sleep(500);
  expect(r.closedByClient).toBe(1);
  expect(r.open).toBe(0);
  // The next query opens a new connection and still works.
  await u.exchange(buildQuery("again.example"), null);
  expect(r.accepted).toBe(2);
});

test("a reused connection that the upstream closed is replaced and the query still answered", async () => {
  let seen = 0;
  const r = await raw({
    tcp: (frame, peer) => {
      seen++;
      // The second query arrives on the reused connection: hang up without answering.
      if (seen === 2) peer.hangUp();
      else peer.send(answerBytes(frame, { ips: ["192.0.2.9"] }));
    },
  });
  const u = upstream(`tcp://127.0.0.1:${r.port}`, { timeoutMs: 2000 });
  await u.exchange(buildQuery("first.example"), null);
  const a = await u.exchange(buildQuery("second.example"), null);
  expect(answerIps(a.message)).toEqual(["192.0.2.9"]);
  expect(r.accepted).toBe(2);
});

test("a fresh connection that closes without an answer fails its query (no retry loop)", async () => {
  const r = await raw({ tcp: (_frame, peer) => peer.hangUp() });
  const started = performance.now();
  const err = await upstream(`tcp://127.0.0.1:${r.port}`, { timeoutMs: 3000 })
    .exchange(buildQuery("hangup.example"), null)
    .catch((e: unknown) => e);
  expect((err as UpstreamError).kind).toBe("error");
  expect((err as Error).message).toMatch(/^tcp: /);
  expect(r.accepted).toBe(1);
  expect(performance.now() - started).toBeLessThan(1500);
});

test("TCP answers with a wrong ID or question are ignored until the real one", async () => {
  const r = await raw({
    tcp: (frame, peer) => {
      peer.send(answerBytes(frame, { ips: ["6.6.6.6"], id: (frame.readUInt16BE(0) + 1) & 0xffff }));
      peer.send(answerBytes(frame, { ips: ["6.6.6.6"], name: "other.example" }));
      setTimeout(() => peer.send(answerBytes(frame, { ips: ["192.0.2.77"] })), 50);
    },
  });
  const a = await upstream(`tcp://127.0.0.1:${r.port}`).exchange(buildQuery("tcpspoof.example"), null);
  expect(answerIps(a.message)).toEqual(["192.0.2.77"]);
});

test("connection refused fails fast", async () => {
  const probe = net.createServer();
  await new Promise<void>((res) => probe.listen(0, "127.0.0.1", () => res()));
  const port = (probe.address() as net.AddressInfo).port;
  await new Promise<void>((res) => probe.close(() => res()));
  const started = performance.now();
  const err = await upstream(`tcp://127.0.0.1:${port}`, { timeoutMs: 5000 })
    .exchange(buildQuery("refused.example"), null)
    .catch((e: unknown) => e);
  expect((err as Error).message).toContain("ECONNREFUSED");
  expect(performance.now() - started).toBeLessThan(1500);
});
