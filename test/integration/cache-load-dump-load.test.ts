// A large valid cache dump must not block DNS (issue 22, defect 5: a 184 MB dump of 1.5 M entries
// posted to load_dump was decoded whole on the DNS thread: 25.8 s, 827 of 921 queries lost, RSS
// 468 MB → 1.59 GB). The real program (a child process, cache size 100 000) serves a steady
// 1 500 q/s from a load generator in its own process while a valid dump of 1 500 000 entries
// (built here in the dump format, src/plugins/executors/cache/dump.ts) is posted. DNS must be
// answered throughout with no long gap, memory must stay bounded (the dump is decoded as it arrives
// and only `size` entries are kept), and afterwards the cache holds exactly its `size` most recently
// used entries of the dump. Then the route's own 256 MiB limit: declared or streamed past, 413.
import { createHash } from "node:crypto";
import http from "node:http";
import { afterAll, beforeAll, expect, test } from "vitest";
import { answerIps, query } from "../helpers/dns.js";
import { formatLoad, startDnsLoad, type DnsLoadReport } from "../helpers/dns-load.js";
import { rssMb, startChild, type ChildSluice } from "../helpers/proc.js";

const ENTRIES = 1_500_000;
const SIZE = 100_000;
const QPS = 1500;
const DUMPED_IP = [198, 51, 100, 7];

/**
 * A valid dump (format version 1) of `count` positive A answers for n<i>.dump.test, most recently
 * used first, each alive for 200 s more.
 */
function buildDump(count: number): Buffer {
  const MAGIC = Buffer.from("SLUICE-CACHE", "latin1");
  const entrySize = (i: number): number => {
    const label = 1 + String(i).length;
    const key = "1|1|0||".length + label + ".dump.test".length;
    const wire = 12 + (1 + label + 5 + 5 + 1) + 4 + 16;
    return 2 + key + 1 + 4 + 32 + 2 + wire;
  };
  let total = MAGIC.length + 1 + 8 + 4;
  for (let i = 0; i < count; i++) total += entrySize(i);
  const buf = Buffer.allocUnsafe(total + 32);
  let at = MAGIC.copy(buf, 0);
  at = buf.writeUInt8(1, at);
  at = buf.writeDoubleBE(Date.now(), at);
  at = buf.writeUInt32BE(count, at);
  for (let i = 0; i < count; i++) {
    const label = `n${i}`;
    const key = `1|1|0||${label}.dump.test`;
    at = buf.writeUInt16BE(key.length, at);
    at += buf.write(key, at, "latin1");
    at = buf.writeUInt8(0, at); // flags: positive
    at = buf.writeUInt32BE(300, at); // ttl
    at = buf.writeDoubleBE(1_000, at); // age
    at = buf.writeDoubleBE(200_000, at); // fresh ms left
    at = buf.writeDoubleBE(200_000, at); // ms left until expiry
    at = buf.writeDoubleBE(0, at); // ms since last use
    const wireLen = 12 + (1 + label.length + 5 + 5 + 1) + 4 + 16;
    at = buf.writeUInt16BE(wireLen, at);
    // Header: id 0, QR RD RA, one question, one answer.
    at = buf.writeUInt16BE(0, at);
    at = buf.writeUInt16BE(0x8180, at);
    at = buf.writeUInt16BE(1, at);
    at = buf.writeUInt16BE(1, at);
    at = buf.writeUInt32BE(0, at);
    at = buf.writeUInt8(label.length, at);
    at += buf.write(label, at, "latin1");
    at = buf.writeUInt8(4, at);
    at += buf.write("dump", at, "latin1");
    at = buf.writeUInt8(4, at);
    at += buf.write("test", at, "latin1");
    at = buf.writeUInt8(0, at);
    at = buf.writeUInt32BE(0x00010001, at); // A IN
    at = buf.writeUInt16BE(0xc00c, at);
    at = buf.writeUInt32BE(0x00010001, at);
    at = buf.writeUInt32BE(300, at);
    at = buf.writeUInt16BE(4, at);
    for (const b of DUMPED_IP) at = buf.writeUInt8(b, at);
  }
  createHash("sha256").update(buf.subarray(0, at)).digest().copy(buf, at);
  if (at + 32 !== buf.length) throw new Error(`dump size ${at + 32} != ${buf.length}`);
  return buf;
}

interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
}

/** POSTs `body` (bytes, or chunks written with backpressure until the server answers) with node:http. */
function post(url: string, body: Buffer | Iterable<Buffer>, headers: Record<string, string> = {}): Promise<Answer> {
  return new Promise((resolve, reject) => {
    let answered = false;
    const req = http.request(url, { method: "POST", headers: { "content-type": "application/octet-stream", ...headers } }, (res) => {
      answered = true;
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (d: string) => (text += d));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text }));
      res.on("error", reject);
    });
    // The server may answer and close before the whole body is sent.
    req.on("error", (err) => (answered ? undefined : reject(err)));
    if (Buffer.isBuffer(body)) {
      req.end(body);
      return;
    }
    const it = body[Symbol.iterator]();
    const pump = (): void => {
      for (;;) {
        if (answered || req.destroyed) return;
        const next = it.next();
        if (next.done === true) {
          req.end();
          return;
        }
        if (!req.write(next.value)) {
          req.once("drain", pump);
          return;
        }
      }
    };
    pump();
  });
}

let child: ChildSluice;
beforeAll(async () => {
  child = await startChild(`
log: { level: info }
api: { http: "127.0.0.1:0" }
plugins:
  - { tag: c, type: cache, args: { size: ${SIZE}, short_circuit: true } }
  - tag: main
    type: sequence
    args:
      - exec: $c
      - exec: black_hole 192.0.2.1
  - { tag: udp, type: udp_server, args: { entry: main, listen: "127.0.0.1:0" } }
`);
}, 60_000);
afterAll(() => child?.stop());

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

test("a valid 1.5 M-entry dump loads while DNS keeps answering, memory stays bounded, and the cache keeps its size", async () => {
  const port = child.port("udp");
  const dump = buildDump(ENTRIES);
  for (let i = 0; i < 200; i++) await query(port, `warm${i}.test`);
  await sleep(300);
  const before = rssMb(child.pid);
  let peak = before;
  const sampler = setInterval(() => (peak = Math.max(peak, rssMb(child.pid))), 20);

  // A shared 2-core box can deschedule the program (or the load generator) for a while whatever it
  // does: up to three tries, the best one judged. The fault guarded against (everything lost for the
  // seconds the decode takes) shows in every try.
  const tries: { dns: DnsLoadReport; res: Answer; tookMs: number }[] = [];
  for (let attempt = 1; attempt <= 3; attempt++) {
    const load = await startDnsLoad(port, QPS);
    await sleep(300);
    const started = performance.now();
    const res = await post(`${child.apiUrl}/api/plugins/c/load_dump`, dump);
    const tookMs = performance.now() - started;
    await sleep(300);
    tries.push({ dns: await load.stop(), res, tookMs });
    const last = tries[tries.length - 1];
    console.log(`try ${attempt}: ${res.status} in ${tookMs.toFixed(0)} ms; ${formatLoad(last.dns)}`);
    if (last.dns.lost <= Math.ceil(last.dns.sent * 0.01) && last.dns.longestGapMs < 200) break;
  }
  const best = tries.reduce((a, b) => (b.dns.lost < a.dns.lost || (b.dns.lost === a.dns.lost && b.dns.longestGapMs < a.dns.longestGapMs) ? b : a));
  const { dns, res, tookMs } = best;
  clearInterval(sampler);
  let after = rssMb(child.pid);
  for (let waited = 0; waited < 10_000 && after - before >= 250; waited += 250) {
    await sleep(250);
    after = rssMb(child.pid);
  }
  const entries = (await (await fetch(`${child.apiUrl}/api/plugins/c/entries?limit=1`)).json()) as { total_entries: number };
  console.log(
    `load_dump of ${ENTRIES} entries (${(dump.length / 1048576).toFixed(0)} MiB) into a size-${SIZE} cache: ${res.status} ${res.body} in ${tookMs.toFixed(0)} ms; ` +
      `${formatLoad(dns)}; RSS before ${before.toFixed(0)} MB, peak ${peak.toFixed(0)} MB, after ${after.toFixed(0)} MB; cache now holds ${entries.total_entries}`,
  );
  expect(res.status).toBe(200);
  expect(JSON.parse(res.body)).toEqual({ ok: true, loaded_entries: SIZE });
  expect(entries.total_entries).toBe(SIZE);
  // The most recently used entries of the dump are the ones kept (the load's own queries since have
  // evicted a few of the least recent); the rest are not.
  expect(answerIps(await query(port, "n0.dump.test"))).toEqual([DUMPED_IP.join(".")]);
  expect(answerIps(await query(port, `n${SIZE / 2}.dump.test`))).toEqual([DUMPED_IP.join(".")]);
  expect(answerIps(await query(port, `n${SIZE}.dump.test`))).toEqual(["192.0.2.1"]);
  expect(answerIps(await query(port, `n${ENTRIES - 1}.dump.test`))).toEqual(["192.0.2.1"]);
  // DNS throughout: (before the fix 827 of 921 were lost and nothing was answered for 25 s).
  expect(dns.lost).toBeLessThanOrEqual(Math.ceil(dns.sent * 0.01));
  expect(dns.longestGapMs).toBeLessThan(200);
  // Bounded memory: `size` entries (~60 MB of heap) and the decoder's buffers, never the dump itself
  // (before the fix: +1.1 GB). The cache's content stays, so "after" is bounded the same way.
  expect(peak - before).toBeLessThan(250);
  expect(after - before).toBeLessThan(250);
}, 120_000);

test("load_dump has its own 256 MiB limit: a declared Content-Length over it, or a stream that passes it, is 413 and changes nothing", async () => {
  const total = (await (await fetch(`${child.apiUrl}/api/plugins/c/entries?limit=1`)).json()) as { total_entries: number };
  const declared = await post(`${child.apiUrl}/api/plugins/c/load_dump`, Buffer.alloc(16), { "content-length": String(300 * 1024 * 1024) }).catch((err: Error): Answer => ({ status: -1, headers: {}, body: err.message }));
  // A valid header, then zeros past the limit, sent chunked: refused once 256 MiB have arrived.
  const header = buildDump(0).subarray(0, 25);
  const zeros = Buffer.alloc(1024 * 1024);
  const chunks = function* (): Iterable<Buffer> {
    yield header;
    for (let i = 0; i < 300; i++) yield zeros;
  };
  // The server answers 413 and closes while the client is still writing: a client that has not read the
  // answer before its next write can see EPIPE or a reset instead (a busy box makes that likelier), so
  // such a try is made again; the answer itself must be the 413.
  let streamed: Answer = { status: -1, headers: {}, body: "" };
  for (let attempt = 0; attempt < 3 && streamed.status !== 413; attempt++) {
    streamed = await post(`${child.apiUrl}/api/plugins/c/load_dump`, chunks()).catch((err: NodeJS.ErrnoException): Answer => {
      if (err.code !== "EPIPE" && err.code !== "ECONNRESET") throw err;
      return { status: -1, headers: {}, body: err.code };
    });
  }
  console.log(`load_dump over the limit: declared ${declared.status} ${declared.body}; streamed ${streamed.status} ${streamed.body}`);
  for (const r of [declared, streamed]) {
    expect(r.status).toBe(413);
    expect(JSON.parse(r.body)).toEqual({ ok: false, code: "body_too_large", message: "request body is larger than the limit of 256 MiB for POST load_dump" });
    expect(r.headers.connection).toBe("close");
  }
  const now = (await (await fetch(`${child.apiUrl}/api/plugins/c/entries?limit=1`)).json()) as { total_entries: number };
  expect(now.total_entries).toBe(total.total_entries);
  // The cache's actor is free again.
  expect((await fetch(`${child.apiUrl}/api/plugins/c/flush`, { method: "POST" })).status).toBe(200);
}, 60_000);
