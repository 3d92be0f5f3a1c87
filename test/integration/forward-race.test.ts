import { afterEach, expect, test } from "vitest";
import { answerIps, query, rcodeOf } from "../helpers/dns.js";
import { answerBytes, startRawUpstream, type RawHandlers, type RawUpstream } from "../helpers/raw-upstream.js";
import { answerWith, deadUdpPort, startResponder } from "../helpers/responder.js";
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
  const s = await startSluice(`plugins:\n${plugins}\n  - tag: main\n    type: sequence\n    args: [{ exec: $fwd }]\n${serversYaml()}`);
  cleanups.push(() => s.stop());
  return s;
}

const after = (ms: number, fn: () => void): void => void setTimeout(fn, ms);

test("dead, slow and good upstreams with concurrent 3: the good answer wins without waiting for the others", async () => {
  const dead = await deadUdpPort();
  const slow = await raw({ udp: (msg, reply) => after(2500, () => reply(answerBytes(msg, { ips: ["192.0.2.2"] }))) });
  const good = await raw({ udp: (msg, reply) => after(30, () => reply(answerBytes(msg, { ips: ["192.0.2.3"] }))) });
  const s = await sluice(`
  - tag: fwd
    type: forward
    args:
      concurrent: 3
      upstreams:
        - { addr: "127.0.0.1:${dead}", tag: dead }
        - { addr: "127.0.0.1:${slow.port}", tag: slow }
        - { addr: "127.0.0.1:${good.port}", tag: good }`);
  for (let i = 0; i < 4; i++) {
    const started = performance.now();
    const m = await query(s.udpPort, `race${i}.example`);
    expect(answerIps(m)).toEqual(["192.0.2.3"]);
    expect(performance.now() - started).toBeLessThan(1500);
  }
  // Every query asked all three at once.
  expect(slow.udpReceived).toHaveLength(4);
  expect(good.udpReceived).toHaveLength(4);
});

test("SERVFAIL from one upstream is held until a NOERROR from another arrives", async () => {
  const failing = await raw({ udp: (msg, reply) => reply(answerBytes(msg, { ips: [], rcode: 2 })) });
  const later = await raw({ udp: (msg, reply) => after(200, () => reply(answerBytes(msg, { ips: ["192.0.2.4"] }))) });
  const s = await sluice(`
  - tag: fwd
    type: forward
    args:
      concurrent: 2
      upstreams: [{ addr: "127.0.0.1:${failing.port}" }, { addr: "127.0.0.1:${later.port}" }]`);
  for (let i = 0; i < 3; i++) {
    const m = await query(s.udpPort, `held${i}.example`);
    expect(rcodeOf(m)).toBe(0);
    expect(answerIps(m)).toEqual(["192.0.2.4"]);
  }
});

test("NXDOMAIN is a preferred answer and wins at once", async () => {
  const nx = await raw({ udp: (msg, reply) => reply(answerBytes(msg, { ips: [], rcode: 3 })) });
  const slow = await raw({ udp: (msg, reply) => after(1500, () => reply(answerBytes(msg, { ips: ["192.0.2.5"] }))) });
  const s = await sluice(`
  - tag: fwd
    type: forward
    args:
      concurrent: 2
      upstreams: [{ addr: "127.0.0.1:${nx.port}" }, { addr: "127.0.0.1:${slow.port}" }]`);
  const started = performance.now();
  expect(rcodeOf(await query(s.udpPort, "nx.example"))).toBe(3);
  expect(performance.now() - started).toBeLessThan(1000);
});

test("when nothing better comes, the upstream's own SERVFAIL answer is served rather than discarded", async () => {
  // The marker address proves the client got the upstream's message, not one Sluice made up.
  const failing = await raw({ udp: (msg, reply) => reply(answerBytes(msg, { ips: ["192.0.2.99"], rcode: 2 })) });
  const silent = await raw({ udp: () => undefined });
  const s = await sluice(`
  - tag: fwd
    type: forward
    args:
      concurrent: 2
      upstreams: [{ addr: "127.0.0.1:${failing.port}", timeout: 400ms }, { addr: "127.0.0.1:${silent.port}", timeout: 400ms }]`);
  const started = performance.now();
  const m = await query(s.udpPort, "held-servfail.example", "A", { timeoutMs: 3000 });
  expect(rcodeOf(m)).toBe(2);
  expect(answerIps(m)).toEqual(["192.0.2.99"]);
  expect(performance.now() - started).toBeLessThan(1900);
});

test("all upstreams failing gives SERVFAIL within the timeout", async () => {
  const dead = await deadUdpPort();
  const silent = await raw({ udp: () => undefined });
  const s = await sluice(`
  - tag: fwd
    type: forward
    args:
      concurrent: 2
      upstreams: [{ addr: "127.0.0.1:${dead}" }, { addr: "127.0.0.1:${silent.port}", timeout: 500ms }]`);
  const started = performance.now();
  const m = await query(s.udpPort, "allfail.example", "A", { timeoutMs: 4000 });
  const took = performance.now() - started;
  expect(rcodeOf(m)).toBe(2);
  expect(answerIps(m)).toEqual([]);
  expect(took).toBeGreaterThanOrEqual(450);
  expect(took).toBeLessThan(2000);
  const failure = s.logs.find((l) => l.msg === "query failed; answering SERVFAIL");
  expect(String(failure?.err)).toContain("all upstreams failed");
  expect(String(failure?.err)).toContain("ECONNREFUSED");
  expect(String(failure?.err)).toContain("no answer within 500ms");
});

test("with concurrent 1, an upstream that fails fast hands over to the next one inside the time budget", async () => {
  const dead = await deadUdpPort();
  const good = await raw({ udp: (msg, reply) => reply(answerBytes(msg, { ips: ["192.0.2.6"] })) });
  const s = await sluice(`
  - tag: fwd
    type: forward
    args:
      upstreams: [{ addr: "127.0.0.1:${dead}" }, { addr: "127.0.0.1:${good.port}" }]`);
  // The random start picks the dead one about half the time; every query must still be answered.
  for (let i = 0; i < 8; i++) {
    const started = performance.now();
    const m = await query(s.udpPort, `failover${i}.example`);
    expect(answerIps(m)).toEqual(["192.0.2.6"]);
    expect(performance.now() - started).toBeLessThan(1500);
  }
  expect(good.udpReceived).toHaveLength(8);
});

test("quick setup with several addresses races them (concurrent 3)", async () => {
  const silent = await raw({ udp: () => undefined });
  const good = await raw({ udp: (msg, reply) => reply(answerBytes(msg, { ips: ["192.0.2.7"] })) });
  const s = await startSluice(`plugins:
  - tag: main
    type: sequence
    args:
      - exec: forward 127.0.0.1:${silent.port} 127.0.0.1:${good.port}
${serversYaml()}`);
  cleanups.push(() => s.stop());
  for (let i = 0; i < 4; i++) {
    const started = performance.now();
    expect(answerIps(await query(s.udpPort, `qs${i}.example`))).toEqual(["192.0.2.7"]);
    expect(performance.now() - started).toBeLessThan(1500);
  }
  expect(silent.udpReceived).toHaveLength(4);
});

test("a hostname upstream is reached through its bootstrap server", async () => {
  const target = await startResponder((q) => answerWith(q, ["192.0.2.8"]));
  cleanups.push(() => target.close());
  const bootstrap = await startResponder((q) => answerWith(q, q.questions[0].name === "resolver.test" ? ["127.0.0.1"] : [], 300));
  cleanups.push(() => bootstrap.close());
  const s = await sluice(`
  - tag: fwd
    type: forward
    args:
      upstreams:
        - { addr: "tcp://resolver.test:${target.port}", bootstrap: "127.0.0.1:${bootstrap.port}", bootstrap_version: 4 }`);
  expect(answerIps(await query(s.udpPort, "via-bootstrap.example"))).toEqual(["192.0.2.8"]);
  expect(answerIps(await query(s.udpPort, "again.example"))).toEqual(["192.0.2.8"]);
  expect(bootstrap.seen).toHaveLength(1);
  expect(target.seen.map((x) => x.via)).toEqual(["tcp", "tcp"]);
});
