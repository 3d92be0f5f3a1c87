// tcp_server connection limits, over real sockets: max_conns evicts the connection idle longest and
// refuses only when every connection is busy; idle_timeout counts from the last complete query, so
// stray bytes do not keep a connection open; a connection paused at 128 queries in flight reads on;
// a reload's new limits apply to the listener it takes over.
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { decodeMessage } from "../../src/dns/message.js";
import { buildQuery, rcodeOf } from "../helpers/dns.js";
import { metricValue } from "../helpers/proc.js";
import { startSluice, type RunningSluice } from "../helpers/sluice.js";
import { RawTcp } from "../helpers/tcp-client.js";

// One configuration may not listen twice on 127.0.0.1:0, so the listeners use three loopback addresses.
const yaml = (ports: { api: number; capped: number; idle: number; many: number }, cappedMax = 2): string => `
api: { http: "127.0.0.1:${ports.api}" }
plugins:
  - tag: main
    type: sequence
    args:
      - { matches: "qtype TXT", exec: "sleep 1500" }
      - { matches: "qtype SRV", exec: "sleep 100" }
      - exec: reject 5
  - { tag: capped, type: tcp_server, args: { entry: main, listen: "127.0.0.1:${ports.capped}", max_conns: ${cappedMax}, idle_timeout: 20s } }
  - { tag: idle, type: tcp_server, args: { entry: main, listen: "127.0.0.2:${ports.idle}", idle_timeout: 1s, frame_timeout: 20s } }
  - { tag: many, type: tcp_server, args: { entry: main, listen: "127.0.0.3:${ports.many}" } }
`;

let s: RunningSluice;
const ports = { api: 0, capped: 0, idle: 0, many: 0 };
beforeAll(async () => {
  s = await startSluice(yaml(ports));
  Object.assign(ports, { api: Number(new URL(s.apiUrl).port), capped: s.port("capped"), idle: s.port("idle"), many: s.port("many") });
});
afterAll(() => s.stop());

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

async function metrics(): Promise<string> {
  return (await s.api("/api/metrics")).text();
}

async function reload(): Promise<void> {
  const before = (await (await s.api("/api/reload/status")).json()) as { last_completed_ms: number | null };
  expect((await s.api("/api/reload", { method: "POST" })).status).toBe(202);
  for (;;) {
    const status = (await (await s.api("/api/reload/status")).json()) as { status: string; last_completed_ms: number | null };
    if (status.status === "ok" && status.last_completed_ms !== before.last_completed_ms) return;
    if (status.status === "failed") throw new Error(JSON.stringify(status));
    await sleep(10);
  }
}

describe("max_conns", () => {
  test("a new connection evicts the one idle longest; with every connection busy it is refused", async () => {
    const before = await metrics();
    const a = new RawTcp(ports.capped);
    await a.connected;
    await sleep(50);
    const b = new RawTcp(ports.capped);
    await b.connected;
    b.send(buildQuery("slow-b.test", "TXT", { id: 2 })); // busy for 1.5 s
    await sleep(100);

    // Full (a idle, b busy): c is admitted and a, the idle one, is closed.
    const c = new RawTcp(ports.capped);
    await c.connected;
    expect(await a.closesWithin(1000)).toBe(true);
    expect(b.isClosed).toBe(false);
    c.send(buildQuery("slow-c.test", "TXT", { id: 3 }));
    await sleep(100);

    // Full and both busy: d is closed at once, and b and c still get their answers.
    const d = new RawTcp(ports.capped);
    expect(await d.closesWithin(1000)).toBe(true);
    const [answerB] = await b.waitAnswers(1, 3000);
    const [answerC] = await c.waitAnswers(1, 3000);
    expect([answerB.readUInt16BE(0), rcodeOf(decodeMessage(answerB))]).toEqual([2, 5]);
    expect([answerC.readUInt16BE(0), rcodeOf(decodeMessage(answerC))]).toEqual([3, 5]);

    const after = await metrics();
    const delta = (name: string): number => metricValue(after, name, 'plugin_tag="capped"') - (metricValue(before, name, 'plugin_tag="capped"') || 0);
    console.log(`max_conns 2: evicted ${delta("server_tcp_conn_evicted_total")}, refused ${delta("server_tcp_conn_refused_total")}, open ${metricValue(after, "server_tcp_connections", 'plugin_tag="capped"')}`);
    expect(delta("server_tcp_conn_evicted_total")).toBe(1);
    expect(delta("server_tcp_conn_refused_total")).toBe(1);
    expect(metricValue(after, "server_tcp_connections", 'plugin_tag="capped"')).toBe(2);
    b.destroy();
    c.destroy();
  });
});

describe("idle_timeout", () => {
  test("counts from the last complete query: stray bytes every 250 ms do not keep a connection open", async () => {
    const t = new RawTcp(ports.idle, "127.0.0.2");
    await t.connected;
    t.send(buildQuery("x.test", "MX"));
    await t.waitAnswers(1);
    const answeredAt = Date.now();
    // A frame that never completes: two length bytes announcing 300, then one byte at a time.
    t.sock.write(Buffer.from([0x01, 0x2c]));
    const trickle = setInterval(() => t.sock.write(Buffer.from([0x41])), 250);
    const closed = await t.closesWithin(4000);
    clearInterval(trickle);
    const after = t.closedAt - answeredAt;
    console.log(`idle_timeout 1s with stray bytes every 250 ms: closed ${closed ? `${after} ms after the last answer` : "never (4 s)"}`);
    expect(closed).toBe(true);
    expect(after).toBeGreaterThanOrEqual(900);
    expect(after).toBeLessThan(2500);
  });

  test("complete queries keep a connection open past idle_timeout", async () => {
    const t = new RawTcp(ports.idle, "127.0.0.2");
    await t.connected;
    for (let i = 0; i < 6; i++) {
      t.send(buildQuery(`q${i}.test`, "MX", { id: i }));
      await t.waitAnswers(i + 1);
      await sleep(400);
    }
    expect(t.isClosed).toBe(false); // 2.4 s of queries 400 ms apart on a 1 s idle timeout
    expect(await t.closesWithin(3000)).toBe(true);
  });
});

test("a connection paused at 128 queries in flight reads on as answers leave: 300 pipelined slow queries all answered", async () => {
  const t = new RawTcp(ports.many, "127.0.0.3");
  await t.connected;
  const started = Date.now();
  t.send(...Array.from({ length: 300 }, (_, i) => buildQuery(`p${i}.test`, "SRV", { id: i })));
  const answers = await t.waitAnswers(300, 10_000);
  console.log(`300 pipelined 100 ms queries answered in ${Date.now() - started} ms`);
  expect(new Set(answers.map((a) => a.readUInt16BE(0))).size).toBe(300);
  t.destroy();
});

test("a reload's limits apply to the listener it takes over", async () => {
  writeFileSync(join(s.dir, "sluice.yaml"), yaml(ports, 1));
  await reload();
  const a = new RawTcp(ports.capped);
  await a.connected;
  await sleep(50);
  const b = new RawTcp(ports.capped);
  await b.connected;
  expect(await a.closesWithin(1000)).toBe(true); // max_conns is 1 now
  b.send(buildQuery("after-reload.test", "MX", { id: 9 }));
  const [answer] = await b.waitAnswers(1);
  expect(answer.readUInt16BE(0)).toBe(9);
  expect(metricValue(await metrics(), "server_tcp_connections", 'plugin_tag="capped"')).toBe(1);
  b.destroy();
});
