// `fallback` seen from a client: which branch answers, and when, with real upstream responders.
import { afterEach, expect, test } from "vitest";
import { ConfigError } from "../../src/config/diagnostics.js";
import { answerIps, query, rcodeOf } from "../helpers/dns.js";
import { answerWith, deadUdpPort, startResponder, type Responder } from "../helpers/responder.js";
import { serversYaml, startSluice, type RunningSluice } from "../helpers/sluice.js";

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const wait = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** An upstream answering `ip` after `delayMs`; `arrivals` records when each query came in. */
async function upstream(ip: string, delayMs = 0): Promise<Responder & { arrivals: number[] }> {
  const arrivals: number[] = [];
  const r = await startResponder(async (q) => {
    arrivals.push(performance.now());
    if (delayMs > 0) await wait(delayMs);
    return answerWith(q, [ip]);
  });
  cleanups.push(() => r.close());
  return Object.assign(r, { arrivals });
}

/** A fallback `fb` between forward executors `p` and `s`, entered from `main`. */
async function sluice(primaryPort: number, secondaryPort: number, fbArgs: string, extraRules = ""): Promise<RunningSluice> {
  const s = await startSluice(`plugins:
  - tag: p
    type: forward
    args: { upstreams: [{ addr: "127.0.0.1:${primaryPort}", timeout: 3s }] }
  - tag: s
    type: forward
    args: { upstreams: [{ addr: "127.0.0.1:${secondaryPort}", timeout: 3s }] }
  - tag: fb
    type: fallback
    args: { primary: p, secondary: s, ${fbArgs} }
  - tag: main
    type: sequence
    args:
      - exec: $fb${extraRules}
${serversYaml()}`);
  cleanups.push(() => s.stop());
  return s;
}

async function timed(port: number, name: string): Promise<{ ips: string[]; rcode: number; ms: number }> {
  const started = performance.now();
  const m = await query(port, name, "A", { timeoutMs: 4000 });
  return { ips: answerIps(m), rcode: rcodeOf(m), ms: performance.now() - started };
}

const metric = async (s: RunningSluice, name: string): Promise<number> => {
  const text = await s.app.services.metrics.text();
  return Number(new RegExp(`^${name}\\{plugin_tag="fb"\\} (\\d+)`, "m").exec(text)?.[1] ?? NaN);
};

test("a slow primary: the secondary starts at the threshold and its answer arrives at about the threshold", async () => {
  const primary = await upstream("192.0.2.1", 1500);
  const secondary = await upstream("192.0.2.2");
  const s = await sluice(primary.port, secondary.port, "threshold: 200");
  const sent = performance.now();
  const r = await timed(s.udpPort, "slow.example");
  expect(r.ips).toEqual(["192.0.2.2"]);
  expect(r.ms).toBeGreaterThanOrEqual(190);
  expect(r.ms).toBeLessThan(600);
  expect(primary.seen).toHaveLength(1);
  expect(secondary.seen).toHaveLength(1);
  // The secondary was asked only once the threshold had passed.
  expect(secondary.arrivals[0] - sent).toBeGreaterThanOrEqual(195);
  expect(await metric(s, "fallback_primary_total")).toBe(1);
  expect(await metric(s, "fallback_secondary_total")).toBe(1);
  expect(await metric(s, "fallback_primary_error_total")).toBe(0);
});

test("a failing primary hands over at once, well before the threshold", async () => {
  const dead = await deadUdpPort();
  const secondary = await upstream("192.0.2.2");
  const s = await sluice(dead, secondary.port, "threshold: 1500");
  const r = await timed(s.udpPort, "dead.example");
  expect(r.ips).toEqual(["192.0.2.2"]);
  expect(r.ms).toBeLessThan(500);
  expect(await metric(s, "fallback_primary_error_total")).toBe(1);
  expect(await metric(s, "fallback_secondary_total")).toBe(1);
});

test("a primary that finishes without a response counts as failed (synchronous branch)", async () => {
  const secondary = await upstream("192.0.2.2");
  const s = await startSluice(`plugins:
  - tag: nothing
    type: sequence
    args: [{ exec: mark 7 }]
  - tag: s
    type: forward
    args: { upstreams: [{ addr: "127.0.0.1:${secondary.port}" }] }
  - tag: fb
    type: fallback
    args: { primary: nothing, secondary: s, threshold: 2000 }
  - tag: main
    type: sequence
    args: [{ exec: $fb }]
${serversYaml()}`);
  cleanups.push(() => s.stop());
  const r = await timed(s.udpPort, "empty.example");
  expect(r.ips).toEqual(["192.0.2.2"]);
  expect(r.ms).toBeLessThan(500);
});

test("a fast primary wins and the secondary is never asked", async () => {
  const primary = await upstream("192.0.2.1");
  const secondary = await upstream("192.0.2.2");
  const s = await sluice(primary.port, secondary.port, "threshold: 150");
  for (let i = 0; i < 3; i++) expect((await timed(s.udpPort, `fast${i}.example`)).ips).toEqual(["192.0.2.1"]);
  await wait(300);
  expect(primary.seen).toHaveLength(3);
  expect(secondary.seen).toHaveLength(0);
  expect(await metric(s, "fallback_secondary_total")).toBe(0);
});

test("always_standby asks both at once and holds the secondary's answer until the threshold", async () => {
  const primary = await upstream("192.0.2.1", 1500);
  const secondary = await upstream("192.0.2.2");
  const s = await sluice(primary.port, secondary.port, "threshold: 300, always_standby: true");
  const started = performance.now();
  const r = await timed(s.udpPort, "standby.example");
  expect(r.ips).toEqual(["192.0.2.2"]);
  expect(primary.arrivals[0] - started).toBeLessThan(150);
  expect(secondary.arrivals[0] - started).toBeLessThan(150);
  expect(r.ms).toBeGreaterThanOrEqual(290);
  expect(r.ms).toBeLessThan(800);
});

test("always_standby: a primary that answers before the threshold wins over the held secondary", async () => {
  const primary = await upstream("192.0.2.1", 80);
  const secondary = await upstream("192.0.2.2");
  const s = await sluice(primary.port, secondary.port, "threshold: 600, always_standby: true");
  const r = await timed(s.udpPort, "race.example");
  expect(r.ips).toEqual(["192.0.2.1"]);
  expect(r.ms).toBeLessThan(500);
  expect(secondary.seen).toHaveLength(1);
});

test("always_standby: a failing primary releases the secondary's answer before the threshold", async () => {
  const dead = await deadUdpPort();
  const secondary = await upstream("192.0.2.2", 50);
  const s = await sluice(dead, secondary.port, "threshold: 1500, always_standby: true");
  const r = await timed(s.udpPort, "standby-dead.example");
  expect(r.ips).toEqual(["192.0.2.2"]);
  expect(r.ms).toBeLessThan(700);
});

test("both branches failing gives SERVFAIL and the log names both failures", async () => {
  const dead1 = await deadUdpPort();
  const dead2 = await deadUdpPort();
  const s = await sluice(dead1, dead2, "threshold: 1000");
  const r = await timed(s.udpPort, "bothfail.example");
  expect(r.rcode).toBe(2);
  expect(r.ms).toBeLessThan(700);
  const failure = s.logs.find((l) => l.msg === "query failed; answering SERVFAIL");
  expect(String(failure?.err)).toContain("primary 'p'");
  expect(String(failure?.err)).toContain("secondary 's'");
});

test("short_circuit ends the pipeline; without it the following rules run", async () => {
  const primary = await upstream("192.0.2.1");
  const secondary = await upstream("192.0.2.2");
  const stop = await sluice(primary.port, secondary.port, "short_circuit: true", "\n      - exec: reject 5");
  expect((await timed(stop.udpPort, "sc.example")).ips).toEqual(["192.0.2.1"]);
  const go = await sluice(primary.port, secondary.port, "short_circuit: false", "\n      - exec: reject 5");
  expect((await timed(go.udpPort, "nosc.example")).rcode).toBe(5);
});

test("bad arguments are refused with the field named", async () => {
  const tryArgs = async (args: string): Promise<string> => {
    const err = await startSluice(`plugins:
  - tag: a
    type: sequence
    args: [{ exec: reject 2 }]
  - tag: fb
    type: fallback
    args: ${args}
  - tag: main
    type: sequence
    args: [{ exec: $fb }]
${serversYaml()}`).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConfigError);
    return (err as Error).message;
  };
  expect(await tryArgs("{ primary: a, secondary: a }")).toContain("secondary must differ from primary");
  expect(await tryArgs("{ primary: a, secondary: missing }")).toContain("missing");
  expect(await tryArgs("{ primary: a, secondary: b, threshold: 0 }")).toContain("threshold");
  expect(await tryArgs("{ primary: a }")).toContain("secondary");
});
