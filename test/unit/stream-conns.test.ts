// StreamConnections on real loopback sockets (a plain net.Server hands it its sockets, as a TLS
// listener would): a client that stops reading with a few answers unsent — too few to pause it —
// is still closed after idle_timeout and may be evicted; the unsent bytes stay bounded.
import net from "node:net";
import { afterEach, expect, test } from "vitest";
import { StreamConnections } from "../../src/plugins/servers/stream-conns.js";
import { UNSENT_PAUSE_BYTES, type StreamLimits } from "../../src/plugins/servers/stream-limits.js";
import { framed, RawTcp } from "../helpers/tcp-client.js";

const ANSWER = Buffer.alloc(30_000, 0x41); // under UNSENT_PAUSE_BYTES, so one answer alone never pauses
const QUERY = Buffer.alloc(20, 0x42);

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

interface Harness {
  conns: StreamConnections;
  port: number;
  /** Server-side sockets in accept order. */
  accepted: net.Socket[];
  close(): Promise<void>;
}

let harness: Harness | null = null;
afterEach(async () => {
  await harness?.close();
  harness = null;
});

async function listen(limits: StreamLimits): Promise<Harness> {
  const conns = new StreamConnections((_query, _remote, reply) => reply(ANSWER), limits);
  const accepted: net.Socket[] = [];
  const server = net.createServer((socket) => {
    accepted.push(socket);
    conns.accept(socket);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const h = {
    conns,
    port: (server.address() as net.AddressInfo).port,
    accepted,
    close: () =>
      new Promise<void>((resolve) => {
        conns.closeAll();
        server.close(() => resolve());
      }),
  };
  harness = h;
  return h;
}

/** Sends one query at a time without reading until the server holds an answer it cannot hand to the kernel. */
async function stopReadingWithUnsent(h: Harness, client: RawTcp): Promise<net.Socket> {
  client.sock.pause();
  await client.connected;
  const server = h.accepted[h.accepted.length - 1];
  for (let i = 0; i < 2000 && server.writableLength === 0; i++) {
    client.sock.write(framed(QUERY));
    await sleep(i < 50 ? 1 : 5);
  }
  expect(server.writableLength).toBeGreaterThan(0);
  expect(server.writableLength).toBeLessThanOrEqual(UNSENT_PAUSE_BYTES);
  return server;
}

test("a client that stops reading with answers unsent below the pause bound is closed after idle_timeout", async () => {
  const h = await listen({ maxConns: 8, idleMs: 1000, frameMs: 5000, maxFrame: 4096 });
  const client = new RawTcp(h.port);
  const server = await stopReadingWithUnsent(h, client);
  const stuckAt = Date.now();
  console.log(`client stopped reading: ${server.writableLength} bytes unsent on the server side, connection open ${!server.destroyed}`);
  for (let waited = 0; waited < 4000 && !server.destroyed; waited += 50) await sleep(50);
  const after = Date.now() - stuckAt;
  expect(server.destroyed).toBe(true);
  expect(after).toBeGreaterThanOrEqual(900);
  expect(after).toBeLessThan(2500);
  expect(h.conns.stats.closedUnsent.value).toBe(1);
  expect(h.conns.size).toBe(0);
  client.destroy();
});

test("such a connection is evicted before a newer idle one at max_conns", async () => {
  // The sweep runs every quarter of the shorter limit: frame_timeout 400 ms (no frame is left
  // unfinished here) makes it 100 ms.
  const h = await listen({ maxConns: 2, idleMs: 20_000, frameMs: 400, maxFrame: 4096 });
  const stuck = new RawTcp(h.port);
  const stuckServer = await stopReadingWithUnsent(h, stuck);
  // One sweep has seen its unsent answers: the sweeper's interval, armed before this timer, fires
  // first (the same event loop runs both), twice in 250 ms.
  await sleep(250);
  const idle = new RawTcp(h.port);
  await idle.connected;
  await sleep(50);
  const fresh = new RawTcp(h.port);
  await fresh.connected;
  await sleep(50);
  expect(stuckServer.destroyed).toBe(true);
  expect(h.accepted[1].destroyed).toBe(false);
  expect(h.conns.stats.evicted.value).toBe(1);
  expect(h.conns.size).toBe(2);
  for (const c of [stuck, idle, fresh]) c.destroy();
});
