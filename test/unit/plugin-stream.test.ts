// An event stream client (src/api/sse-client.ts) on real loopback sockets: frames handed over
// while the reader does not read are held by reference up to the queue's capacity, the oldest
// dropped beyond it (to a shared chunk's boundary), and once the reader reads, every frame is either
// received in order or counted in one `event: dropped` frame. The broadcaster's turns reach every
// client, one shared batch for all.
import net from "node:net";
import { afterEach, expect, test } from "vitest";
import { SseBroadcast, SseClient } from "../../src/api/sse-client.js";

interface Pair {
  server: net.Socket;
  client: net.Socket;
  close(): Promise<void>;
}

const open: Pair[] = [];
afterEach(async () => {
  for (const p of open.splice(0)) await p.close();
});

async function pair(): Promise<Pair> {
  let accepted: (s: net.Socket) => void = () => undefined;
  const got = new Promise<net.Socket>((r) => (accepted = r));
  const listener = net.createServer((s) => accepted(s));
  await new Promise<void>((r) => listener.listen(0, "127.0.0.1", r));
  const client = net.connect((listener.address() as net.AddressInfo).port, "127.0.0.1");
  const server = await got;
  const p = {
    server,
    client,
    close: async () => {
      client.destroy();
      server.destroy();
      await new Promise((r) => listener.close(r));
    },
  };
  open.push(p);
  return p;
}

const frame = (id: number): string => `id: ${id}\nevent: record\ndata: {"id":${id},"pad":"${"x".repeat(900)}"}\n\n`;
const batch = (from: number, n: number): string[] => Array.from({ length: n }, (_, i) => frame(from + i));

/** Reads until `done` says the text so far is complete, or `ms` pass without data. */
function readAll(sock: net.Socket, done: (text: string) => boolean, ms = 2000): Promise<string> {
  return new Promise((resolve) => {
    let text = "";
    let timer = setTimeout(() => resolve(text), ms);
    sock.setEncoding("utf8");
    sock.on("data", (d: string) => {
      text += d;
      clearTimeout(timer);
      if (done(text)) return resolve(text);
      timer = setTimeout(() => resolve(text), ms);
    });
    sock.resume();
  });
}

const ids = (text: string): number[] => [...text.matchAll(/^id: (\d+)$/gm)].map((m) => Number(m[1]));
/**
 * The id of the last frame in `text`, from its end only: scanning the whole text on every chunk was quadratic
 * (20 clients × 2 MB: seconds of CPU in the reading loop, which on a busy machine left a client silent past
 * readAll's 2 s and failed the test).
 */
const lastId = (text: string): number | undefined => ids(text.slice(-4096)).at(-1);
const droppedIn = (text: string): number => [...text.matchAll(/event: dropped\ndata: \{"dropped":(\d+)\}/g)].reduce((n, m) => n + Number(m[1]), 0);

test("a reader that stops holds at most `capacity` frames; when it reads again every frame is received in order or counted as dropped", async () => {
  const { server, client } = await pair();
  client.pause();
  let wakes = 0;
  const conn = new SseClient(server, () => wakes++, 500);
  // ~19 MB: more than the kernel's socket buffers and the response's user-space share hold.
  const total = 20_000;
  // The batches arrive while the reader is stalled; turns write until the socket pushes back.
  for (let i = 0; i < total; i += 500) {
    conn.add(batch(i + 1, 500));
    conn.turn();
  }
  const stalled = conn.stats();
  expect(stalled.queued).toBeLessThanOrEqual(500);
  expect(stalled.maxQueued).toBeLessThanOrEqual(500);
  expect(stalled.dropped).toBeGreaterThan(0);
  const reading = readAll(client, (t) => lastId(t) === total);
  // Drains ask for turns until everything is written.
  const deadline = Date.now() + 5000;
  while ((conn.stats().queued > 0 || conn.ready) && Date.now() < deadline) {
    conn.turn();
    await new Promise((r) => setTimeout(r, 5));
  }
  const text = await reading;
  const got = ids(text);
  console.log(`${total} frames to a reader stalled then reading: ${got.length} received, ${droppedIn(text)} reported dropped, ${wakes} drains, most held ${stalled.maxQueued}`);
  expect(got.at(-1)).toBe(total);
  expect(got.every((id, i) => i === 0 || id > got[i - 1])).toBe(true);
  expect(got.length + droppedIn(text)).toBe(total);
  expect(droppedIn(text)).toBe(conn.stats().dropped);
});

test("the broadcaster's turns reach every client, and a reader that keeps up gets every frame", async () => {
  const broadcast = new SseBroadcast();
  const pairs = await Promise.all(Array.from({ length: 20 }, () => pair()));
  const conns = pairs.map((p) => new SseClient(p.server, broadcast.wake));
  for (const c of conns) broadcast.add(c);
  const total = 2000;
  // Every reader ends at its last frame; the 10 s of silence that would end one early only bound a failure.
  const readers = pairs.map((p) => readAll(p.client, (t) => lastId(t) === total, 10_000));
  for (let i = 0; i < total; i += 200) {
    const frames = batch(i + 1, 200);
    // One array for every client: each only keeps a reference.
    for (const c of conns) c.add(frames);
    broadcast.wake();
    await new Promise((r) => setTimeout(r, 10));
  }
  const texts = await Promise.all(readers);
  for (const t of texts) {
    expect(droppedIn(t)).toBe(0);
    expect(ids(t)).toEqual(Array.from({ length: total }, (_, i) => i + 1));
  }
  for (const c of conns) broadcast.remove(c);
  expect(broadcast.size).toBe(0);
});
