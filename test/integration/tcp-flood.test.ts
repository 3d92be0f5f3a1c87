// Idle and slow TCP connections against the real program run under `ulimit -n 1024`: 1 100 idle
// connections neither starve new TCP queries nor the management API (max_conns evicts the idlest,
// open descriptors never pass max_conns), a client sending one byte per second is closed by
// frame_timeout, and a silent one by idle_timeout.
import { afterAll, beforeAll, expect, test } from "vitest";
import { RCODE } from "../../src/dns/constants.js";
import { answerIps, query, rcodeOf } from "../helpers/dns.js";
import { metricValue, openFds, startChild, type ChildSluice } from "../helpers/proc.js";
import { RawTcp } from "../helpers/tcp-client.js";

const MAX_CONNS = 256; // the default; the config below does not set it

let child: ChildSluice;
beforeAll(async () => {
  child = await startChild(
    `
log: { level: info }
api: { http: "127.0.0.1:0" }
plugins:
  - tag: main
    type: sequence
    args:
      - exec: black_hole 10.0.0.1
  - { tag: udp, type: udp_server, args: { entry: main, listen: "127.0.0.1:0" } }
  - { tag: tcp, type: tcp_server, args: { entry: main, listen: "127.0.0.1:0", idle_timeout: 3s, frame_timeout: 1s } }
`,
    { openFiles: 1024 },
  );
});
afterAll(() => child.stop());

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

async function metrics(): Promise<string> {
  return (await fetch(`${child.apiUrl}/api/metrics`, { signal: AbortSignal.timeout(2000) })).text();
}

test("1 100 idle connections: new TCP queries and the API are still answered; connections stay within max_conns", async () => {
  const tcpPort = child.port("tcp");
  const baseline = openFds(child.pid);
  let maxFds = baseline;
  const sampler = setInterval(() => (maxFds = Math.max(maxFds, openFds(child.pid))), 20);

  const idle: RawTcp[] = [];
  const flooding = (async () => {
    for (let i = 0; i < 1100; i += 100) {
      const batch = Array.from({ length: 100 }, () => new RawTcp(tcpPort));
      idle.push(...batch);
      await Promise.all(batch.map((c) => c.connected.catch(() => undefined)));
    }
  })();

  // While the flood goes on and for a second after it: a TCP query and a health check every 100 ms.
  const failures: string[] = [];
  let checks = 0;
  let slowest = 0;
  let floodDone = 0;
  void flooding.then(() => (floodDone = Date.now()));
  await sleep(100);
  while (floodDone === 0 || Date.now() - floodDone < 1000) {
    const t0 = Date.now();
    try {
      const m = await query(tcpPort, "fresh.test", "A", { tcp: true, timeoutMs: 1000 });
      if (rcodeOf(m) !== RCODE.NOERROR || answerIps(m)[0] !== "10.0.0.1") failures.push("wrong DNS answer");
      const health = await fetch(`${child.apiUrl}/api/health`, { signal: AbortSignal.timeout(1000) });
      if (health.status !== 200) failures.push(`health ${health.status}`);
    } catch (err) {
      failures.push((err as Error).message);
    }
    checks++;
    slowest = Math.max(slowest, Date.now() - t0);
    await sleep(100);
  }
  await flooding;
  clearInterval(sampler);
  const text = await metrics();
  const open = metricValue(text, "server_tcp_connections", 'plugin_tag="tcp"');
  const evicted = metricValue(text, "server_tcp_conn_evicted_total", 'plugin_tag="tcp"');
  const refused = metricValue(text, "server_tcp_conn_refused_total", 'plugin_tag="tcp"');
  const stillOpen = idle.filter((c) => !c.isClosed).length;
  console.log(
    `1 100 idle connections under ulimit -n 1024: ${checks} rounds of TCP query + /api/health, ${failures.length} failed, slowest ${slowest} ms; ` +
      `server fds ${baseline} → max ${maxFds}; open connections ${open} (clients still connected ${stillOpen}); evicted ${evicted}, refused ${refused}`,
  );
  for (const c of idle) c.destroy();

  expect(failures.slice(0, 5)).toEqual([]);
  expect(checks).toBeGreaterThanOrEqual(5);
  expect(open).toBeLessThanOrEqual(MAX_CONNS);
  expect(maxFds - baseline).toBeLessThanOrEqual(MAX_CONNS + 16);
  expect(evicted).toBeGreaterThanOrEqual(1100 - MAX_CONNS);
}, 60_000);

test("a client sending one byte per second is closed by frame_timeout (1 s)", async () => {
  const t = new RawTcp(child.port("tcp"));
  await t.connected;
  const started = Date.now();
  // A 40-byte query announced, then delivered one byte per second.
  t.sock.write(Buffer.from([0]));
  let sent = 1;
  const drip = setInterval(() => {
    if (!t.isClosed) t.sock.write(Buffer.from([sent++ === 1 ? 40 : 0x41]));
  }, 1000);
  const closed = await t.closesWithin(6000);
  clearInterval(drip);
  const after = t.closedAt - started;
  console.log(`one byte per second: ${closed ? `closed after ${after} ms and ${sent} bytes` : `still open after 6 s and ${sent} bytes`}`);
  expect(closed).toBe(true);
  expect(after).toBeGreaterThanOrEqual(900);
  expect(after).toBeLessThan(3000);
  expect(metricValue(await metrics(), "server_tcp_conn_closed_total", 'reason="frame"')).toBeGreaterThanOrEqual(1);
});

test("a silent client is closed by idle_timeout (3 s)", async () => {
  const t = new RawTcp(child.port("tcp"));
  await t.connected;
  const started = Date.now();
  const closed = await t.closesWithin(7000);
  const after = t.closedAt - started;
  console.log(`silent client: ${closed ? `closed after ${after} ms` : "still open after 7 s"}`);
  expect(closed).toBe(true);
  expect(after).toBeGreaterThanOrEqual(2900);
  expect(after).toBeLessThan(5000);
}, 15_000);
