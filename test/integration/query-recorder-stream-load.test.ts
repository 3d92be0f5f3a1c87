// Record-stream clients must not slow DNS (issue 22, defect 3): the real program with a query
// recorder in front of every answer takes a steady 2 000 QPS from a UDP client, first with no
// stream clients, then with 200 SSE clients reading /api/plugins/rec/stream (in a separate process,
// so their reading does not delay this process's clock). Every query must be answered, the p99 stay
// within 100 ms (or 3× the no-client run on a box busier than that; before the fix: p99 2.9 s and a
// third of the queries lost), and every client must be told of every record committed meanwhile, in
// order: received, or counted in an `event: dropped` frame (a client that falls behind skips
// records, never silently). Then stalled clients (never read) must not make the process grow.
import dgram from "node:dgram";
import { rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, expect, test } from "vitest";
import { CLI } from "../helpers/cli.js";
import { lineChild, type LineChild } from "../helpers/line-child.js";
import { buildQuery } from "../helpers/dns.js";
import { rssMb } from "../helpers/proc.js";
import { tempDir } from "../helpers/sluice.js";

const QPS = 2000;
const SECONDS = 2;
const CLIENTS = 200;


/**
 * SSE clients of the record stream in their own process, kept cheap (native Buffer searches, no
 * decoding) so that reading competes little with the program for the CPU. `read`: per client, the
 * record frames received, the records reported dropped, the last record id seen, and how often an
 * id was not above the one before. `stall`: stop reading after the headers.
 */
const CLIENT_SCRIPT = `
import http from "node:http";
const port = Number(process.env.PORT), count = Number(process.env.COUNT), stall = process.env.MODE === "stall";
const agent = new http.Agent({ keepAlive: false, maxSockets: Infinity });
const got = new Array(count).fill(0), dropped = new Array(count).fill(0), last = new Array(count).fill(0), order = new Array(count).fill(0);
const RECORD = Buffer.from("\\nevent: record\\n"), ID = Buffer.from("\\nid: "), DROPPED = Buffer.from('event: dropped\\ndata: {"dropped":');
const CARRY = 80;
let ready = 0, bytes = 0, errors = 0;
/** The number at \`at\` and the index after its digits, or null when the line is not complete in \`buf\`. */
function numberAt(buf, at) {
  let n = 0, i = at;
  for (; i < buf.length && buf[i] >= 48 && buf[i] <= 57; i++) n = n * 10 + buf[i] - 48;
  return i > at && i < buf.length ? { n, end: i } : null;
}
for (let i = 0; i < count; i++) {
  http.get({ host: "127.0.0.1", port, path: "/api/plugins/rec/stream", headers: { accept: "text/event-stream" }, agent }, (res) => {
    let first = true, carry = Buffer.alloc(0);
    res.on("data", (d) => {
      bytes += d.length;
      if (first) {
        first = false;
        if (stall) res.pause();
        if (++ready === count) process.stdout.write("ready\\n");
        if (stall) return;
      }
      // The last bytes of the previous chunk come first, for frames split between chunks; a match
      // counts when it completes in the new bytes (one that completed in the carry counted before).
      const buf = carry.length > 0 ? Buffer.concat([carry, d]) : d;
      const old = carry.length;
      for (let at = buf.indexOf(RECORD, Math.max(0, old - RECORD.length + 1)); at !== -1; at = buf.indexOf(RECORD, at + RECORD.length)) got[i]++;
      for (let at = buf.indexOf(DROPPED); at !== -1; at = buf.indexOf(DROPPED, at + DROPPED.length)) {
        const m = numberAt(buf, at + DROPPED.length);
        if (m && m.end >= old) dropped[i] += m.n;
      }
      for (let at = buf.lastIndexOf(ID); at !== -1; at = at > 0 ? buf.lastIndexOf(ID, at - 1) : -1) {
        const m = numberAt(buf, at + ID.length);
        if (!m) continue;
        if (m.end < old) break;
        if (m.n <= last[i]) order[i]++;
        last[i] = m.n;
        break;
      }
      carry = Buffer.from(buf.subarray(Math.max(0, buf.length - CARRY)));
    });
  }).on("error", () => errors++);
}
process.stdin.setEncoding("utf8");
process.stdin.on("data", (d) => {
  for (const cmd of d.split("\\n")) if (cmd === "report") process.stdout.write("report " + JSON.stringify({ got, dropped, last, order, bytes, errors }) + "\\n");
});
`;

interface Report {
  got: number[];
  dropped: number[];
  last: number[];
  order: number[];
  bytes: number;
  errors: number;
}

function clients(port: number, count: number, mode: "read" | "stall"): LineChild {
  return lineChild(["--input-type=module", "-e", CLIENT_SCRIPT], { PORT: String(port), COUNT: String(count), MODE: mode });
}

async function report(c: LineChild): Promise<Report> {
  const line = c.line(/^report (.*)$/);
  c.proc.stdin.write("report\n");
  return JSON.parse((await line)[1]) as Report;
}

interface LoadResult {
  sent: number;
  answered: number;
  p50: number;
  p99: number;
  max: number;
  /** Longest time between two answers while queries were being sent. */
  gap: number;
  /** Highest RSS of the Sluice process sampled during the run, MiB. */
  peakRss: number;
}

/** QPS queries a second for `seconds` at a steady pace from one UDP socket; latency in ms per answer. */
async function steadyLoad(port: number, seconds = SECONDS): Promise<LoadResult> {
  const total = QPS * seconds;
  const sock = dgram.createSocket("udp4");
  await new Promise<void>((r) => sock.bind(0, "127.0.0.1", () => r()));
  const sentAt = new Float64Array(65536);
  const latencies: number[] = [];
  let lastAnswer = 0;
  let gap = 0;
  let sending = true;
  sock.on("message", (msg) => {
    const id = msg.readUInt16BE(0);
    if (sentAt[id] > 0) {
      const now = performance.now();
      latencies.push(now - sentAt[id]);
      sentAt[id] = 0;
      if (sending && lastAnswer > 0) gap = Math.max(gap, now - lastAnswer);
      lastAnswer = now;
    }
  });
  const packets = Array.from({ length: total }, (_, i) => buildQuery(`q${i}.load.example`, "A", { id: i & 0xffff }));
  let sent = 0;
  let peakRss = rssMb(sluice.proc.pid ?? 0);
  const start = performance.now();
  await new Promise<void>((resolve) => {
    const tick = setInterval(() => {
      const due = Math.min(total, Math.floor(((performance.now() - start) * QPS) / 1000));
      for (; sent < due; sent++) {
        sentAt[sent & 0xffff] = performance.now();
        sock.send(packets[sent], port, "127.0.0.1");
      }
      if (sent % 200 === 0) peakRss = Math.max(peakRss, rssMb(sluice.proc.pid ?? 0));
      if (sent === total) {
        clearInterval(tick);
        resolve();
      }
    }, 2);
  });
  sending = false;
  const deadline = performance.now() + 3000;
  while (latencies.length < total && performance.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  sock.close();
  latencies.sort((a, b) => a - b);
  const at = (q: number): number => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))] ?? Infinity;
  return { sent, answered: latencies.length, p50: at(0.5), p99: at(0.99), max: latencies[latencies.length - 1] ?? Infinity, gap, peakRss };
}

const fmt = (r: LoadResult): string =>
  `${r.answered}/${r.sent} answered (${r.sent - r.answered} lost), p50 ${r.p50.toFixed(2)} ms, p99 ${r.p99.toFixed(2)} ms, max ${r.max.toFixed(1)} ms, longest gap ${r.gap.toFixed(1)} ms`;

let dir: string;
let sluice: LineChild;
let apiPort = 0;
let udpPort = 0;

const rss = (): number => Math.round(rssMb(sluice.proc.pid ?? 0));

/** Id of the newest committed record, once the recorder has committed everything (two equal reads 300 ms apart). */
async function settledNewestId(): Promise<number> {
  let prev = -1;
  for (;;) {
    const res = await fetch(`http://127.0.0.1:${apiPort}/api/plugins/rec/records?limit=1`);
    const id = ((await res.json()) as { records: { id: number }[] }).records[0]?.id ?? 0;
    if (id === prev) return id;
    prev = id;
    await new Promise((r) => setTimeout(r, 300));
  }
}

beforeAll(async () => {
  dir = tempDir("sluice-recload-");
  writeFileSync(
    join(dir, "sluice.yaml"),
    `api:
  http: "127.0.0.1:0"
plugins:
  - { tag: rec, type: query_recorder, args: { path: rec.db, queue_size: 65536, flush_interval_ms: 50 } }
  - tag: main
    type: sequence
    args:
      - exec: $rec
      - exec: black_hole 192.0.2.1 2001:db8::1
  - { tag: udp, type: udp_server, args: { entry: main, listen: "127.0.0.1:0" } }
`,
  );
  sluice = lineChild([CLI, "start", "-c", "sluice.yaml", "-d", dir]);
  const api = sluice.line(/"port":(\d+).*"management API listening"/);
  const udp = sluice.line(/"port":(\d+).*"udp server listening"/);
  apiPort = Number((await api)[1]);
  udpPort = Number((await udp)[1]);
});

afterAll(async () => {
  await sluice.stop();
  rmSync(dir, { recursive: true, force: true });
});

test(`${CLIENTS} record-stream clients do not slow DNS at ${QPS} QPS, and each is told of every record`, { timeout: 120_000 }, async () => {
  await steadyLoad(udpPort, 1); // warm-up: JIT, caches
  // The reference run, like the loaded ones below, is taken again when the shared box dropped datagrams.
  let baseline = await steadyLoad(udpPort);
  if (baseline.answered < baseline.sent) baseline = await steadyLoad(udpPort);
  console.log(`no stream clients:       ${fmt(baseline)}; RSS peak ${baseline.peakRss.toFixed(0)} MB`);
  expect(baseline.answered).toBe(baseline.sent);

  const readers = clients(apiPort, CLIENTS, "read");
  try {
    await readers.line(/^ready$/, 20_000);
    // 100 ms, or 3× the run without clients when the box is busier than that.
    const bound = Math.max(3 * baseline.p99, 100);
    // Every client is live once the writer has answered its (empty) replay; the recorder is idle
    // then, and each client gets nothing but the records after the newest one now.
    await new Promise((r) => setTimeout(r, 500));
    const mark = await settledNewestId();
    // A second run only when the first misses: a shared box can stall any process for a moment,
    // while the fault this guards against (latencies of a second and more) shows in every run.
    let loaded: LoadResult | null = null;
    const rssBefore = rss();
    for (let attempt = 1; attempt <= 2; attempt++) {
      const run = await steadyLoad(udpPort);
      console.log(`${CLIENTS} stream clients (run ${attempt}): ${fmt(run)}; bound ${bound.toFixed(1)} ms; RSS ${rssBefore} → peak ${run.peakRss.toFixed(0)} MB`);
      if (loaded === null || run.answered > loaded.answered || (run.answered === loaded.answered && run.p99 < loaded.p99)) loaded = run;
      if (run.answered === run.sent && run.p99 <= bound) break;
    }
    const newest = await settledNewestId();
    const expected = newest - mark;
    // Each client catches up with the newest record once the load stops.
    let r = await report(readers);
    for (let i = 0; i < 300 && r.last.some((id) => id < newest); i++) {
      await new Promise((res) => setTimeout(res, 100));
      r = await report(readers);
    }
    const told = r.got.map((g, i) => g + r.dropped[i]);
    const min = (a: number[]): number => Math.min(...a);
    const max = (a: number[]): number => Math.max(...a);
    console.log(
      `${expected} records committed under load; per client received min ${min(r.got)} max ${max(r.got)}, dropped min ${min(r.dropped)} max ${max(r.dropped)}; ` +
        `${r.last.filter((id) => id === newest).length}/${CLIENTS} reached the newest; ${(r.bytes / 1048576).toFixed(1)} MiB read in all; RSS after ${rss()} MB`,
    );
    expect(loaded?.answered).toBe(loaded?.sent);
    expect(loaded?.p99).toBeLessThanOrEqual(bound);
    expect(r.errors).toBe(0);
    expect(expected).toBeGreaterThanOrEqual(QPS * SECONDS);
    // Every client streamed records of the load, in order, up to the newest, and was told of any it skipped.
    expect(min(r.got)).toBeGreaterThan(0);
    expect(r.order.every((n) => n === 0)).toBe(true);
    expect(r.last.every((id) => id === newest)).toBe(true);
    expect(told.every((n) => n === expected)).toBe(true);
  } finally {
    await readers.stop();
  }
});

test("stalled record-stream clients (never reading) do not grow the process", { timeout: 90_000 }, async () => {
  const stalled = clients(apiPort, 50, "stall");
  try {
    await stalled.line(/^ready$/, 20_000);
    await steadyLoad(udpPort, 2);
    const before = rss();
    const first = await steadyLoad(udpPort, 2);
    const mid = rss();
    const second = await steadyLoad(udpPort, 2);
    const after = rss();
    const peak = Math.round(Math.max(first.peakRss, second.peakRss));
    console.log(`50 stalled clients: RSS ${before} → ${mid} → ${after} MB (peak ${peak}); ${fmt(first)}; ${fmt(second)}`);
    // Stalled clients cost O(1) per batch; most of all they must not stop DNS (a loaded box may drop a few datagrams).
    expect(first.answered).toBeGreaterThan(0.9 * first.sent);
    expect(second.answered).toBeGreaterThan(0.9 * second.sent);
    // 8 000 more records of ~1 KB for each of 50 clients would be ~400 MB if anything kept them per client.
    expect(peak - before).toBeLessThan(60);
    expect(after - before).toBeLessThan(40);
  } finally {
    await stalled.stop();
  }
});
