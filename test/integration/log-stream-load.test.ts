// Log streaming must not slow DNS: the real program at level debug with `debug_print` in the
// pipeline answers a steady 3 000 QPS from a UDP client here, first with no log clients, then with
// 200 SSE clients reading /api/logs/stream (in a separate process, so their reading does not delay
// this process's clock). Every query must be answered and the p99 latency stay within 10× the
// no-client run, or 100 ms, whichever is larger: generous for a shared 2-core box (before the fix
// 84 % of the queries went unanswered and the p99 was 5.4 s). Then stalled clients (never read)
// must not make the process grow.
import dgram from "node:dgram";
import { rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, expect, test } from "vitest";
import { CLI } from "../helpers/cli.js";
import { lineChild, type LineChild } from "../helpers/line-child.js";
import { buildQuery } from "../helpers/dns.js";
import { tempDir } from "../helpers/sluice.js";

const QPS = 3000;
const SECONDS = 2;
const CLIENTS = 200;


/** SSE clients in their own process: `read` counts log frames per client; `stall` stops reading after the headers. */
const CLIENT_SCRIPT = `
import http from "node:http";
const port = Number(process.env.PORT), count = Number(process.env.COUNT), stall = process.env.MODE === "stall";
const agent = new http.Agent({ keepAlive: false, maxSockets: Infinity });
const needle = Buffer.from("event: log\\n");
const frames = new Array(count).fill(0);
let ready = 0, bytes = 0;
for (let i = 0; i < count; i++) {
  http.get({ host: "127.0.0.1", port, path: "/api/logs/stream?level=debug", headers: { accept: "text/event-stream" }, agent }, (res) => {
    let first = true;
    res.on("data", (d) => {
      bytes += d.length;
      for (let at = d.indexOf(needle); at !== -1; at = d.indexOf(needle, at + needle.length)) frames[i]++;
      if (first) {
        first = false;
        if (stall) res.pause();
        if (++ready === count) process.stdout.write("ready\\n");
      }
    });
  }).on("error", (e) => process.stdout.write("error " + e.message + "\\n"));
}
process.stdin.on("data", () => process.stdout.write("report " + JSON.stringify({ frames, bytes }) + "\\n"));
`;

function clients(port: number, count: number, mode: "read" | "stall"): LineChild {
  return lineChild(["--input-type=module", "-e", CLIENT_SCRIPT], { PORT: String(port), COUNT: String(count), MODE: mode });
}

interface LoadResult {
  sent: number;
  answered: number;
  p50: number;
  p99: number;
  max: number;
}

/** QPS queries a second for `seconds` at a steady pace from one UDP socket; latency in ms per answer. */
async function steadyLoad(port: number, seconds = SECONDS): Promise<LoadResult> {
  const total = QPS * seconds;
  const sock = dgram.createSocket("udp4");
  await new Promise<void>((r) => sock.bind(0, "127.0.0.1", () => r()));
  const sentAt = new Float64Array(65536);
  const latencies: number[] = [];
  sock.on("message", (msg) => {
    const id = msg.readUInt16BE(0);
    if (sentAt[id] > 0) {
      latencies.push(performance.now() - sentAt[id]);
      sentAt[id] = 0;
    }
  });
  const packets = Array.from({ length: total }, (_, i) => buildQuery(`q${i}.load.example`, "A", { id: i & 0xffff }));
  let sent = 0;
  const start = performance.now();
  await new Promise<void>((resolve) => {
    const tick = setInterval(() => {
      const due = Math.min(total, Math.floor(((performance.now() - start) * QPS) / 1000));
      for (; sent < due; sent++) {
        sentAt[sent & 0xffff] = performance.now();
        sock.send(packets[sent], port, "127.0.0.1");
      }
      if (sent === total) {
        clearInterval(tick);
        resolve();
      }
    }, 2);
  });
  const deadline = performance.now() + 3000;
  while (latencies.length < total && performance.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  sock.close();
  latencies.sort((a, b) => a - b);
  const at = (q: number): number => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))] ?? Infinity;
  return { sent, answered: latencies.length, p50: at(0.5), p99: at(0.99), max: latencies[latencies.length - 1] ?? Infinity };
}

const fmt = (r: LoadResult): string => `${r.answered}/${r.sent} answered, p50 ${r.p50.toFixed(2)} ms, p99 ${r.p99.toFixed(2)} ms, max ${r.max.toFixed(1)} ms`;

let dir: string;
let sluice: LineChild;
let apiPort = 0;
let udpPort = 0;

async function memoryMb(): Promise<number> {
  const res = await fetch(`http://127.0.0.1:${apiPort}/api/system`);
  return ((await res.json()) as { process_memory_mb: number }).process_memory_mb;
}

async function lastLogId(): Promise<number> {
  const res = await fetch(`http://127.0.0.1:${apiPort}/api/logs?limit=1`);
  return ((await res.json()) as { entries: { id: number }[] }).entries[0]?.id ?? 0;
}

beforeAll(async () => {
  dir = tempDir("sluice-logload-");
  writeFileSync(
    join(dir, "sluice.yaml"),
    `log: { level: debug }
api:
  http: "127.0.0.1:0"
plugins:
  - tag: main
    type: sequence
    args:
      - exec: black_hole 192.0.2.1 2001:db8::1
      - exec: debug_print
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

test(`${CLIENTS} SSE log clients do not slow DNS at ${QPS} QPS (debug level, debug_print)`, { timeout: 90_000 }, async () => {
  await steadyLoad(udpPort, 1); // warm-up: JIT, caches
  // The reference run, like the loaded ones below, is taken again when the shared box dropped datagrams.
  let baseline = await steadyLoad(udpPort);
  if (baseline.answered < baseline.sent) baseline = await steadyLoad(udpPort);
  console.log(`no log clients:       ${fmt(baseline)}`);
  expect(baseline.answered).toBe(baseline.sent);

  const readers = clients(apiPort, CLIENTS, "read");
  try {
    await readers.line(/^ready$/, 20_000);
    const bound = Math.max(10 * baseline.p99, 100);
    // A second run only when the first misses: a shared box can stall any process for a moment,
    // while the fault this guards against (5 s latencies, most queries lost) shows in every run.
    let loaded: LoadResult | null = null;
    for (let attempt = 1; attempt <= 2; attempt++) {
      const firstId = await lastLogId();
      const run = await steadyLoad(udpPort);
      const entries = (await lastLogId()) - firstId;
      console.log(`${CLIENTS} log clients (run ${attempt}): ${fmt(run)}; bound ${bound.toFixed(1)} ms; ${entries} log entries`);
      if (loaded === null || run.answered > loaded.answered || (run.answered === loaded.answered && run.p99 < loaded.p99)) loaded = run;
      if (run.answered === run.sent && run.p99 <= bound) break;
    }
    await new Promise((r) => setTimeout(r, 500));
    const report = readers.line(/^report (.*)$/);
    readers.proc.stdin.write("report\n");
    const { frames, bytes } = JSON.parse((await report)[1]) as { frames: number[]; bytes: number };
    const least = Math.min(...frames);
    console.log(`frames per client min ${least}, max ${Math.max(...frames)}; ${(bytes / 1048576).toFixed(1)} MiB read in all`);
    expect(loaded?.answered).toBe(loaded?.sent);
    expect(loaded?.p99).toBeLessThanOrEqual(bound);
    // Every client really was streaming the load's entries (the broadcaster's turns rotate).
    expect(least).toBeGreaterThan(0);
  } finally {
    await readers.stop();
  }
});

test("stalled log clients (never reading) do not grow the process", { timeout: 60_000 }, async () => {
  const stalled = clients(apiPort, 20, "stall");
  try {
    await stalled.line(/^ready$/, 20_000);
    await steadyLoad(udpPort, 2);
    const before = await memoryMb();
    const first = await steadyLoad(udpPort, 2);
    const mid = await memoryMb();
    const second = await steadyLoad(udpPort, 2);
    const after = await memoryMb();
    console.log(`20 stalled clients: RSS ${before} → ${mid} → ${after} MB; ${fmt(first)}; ${fmt(second)}`);
    // Stalled clients cost O(1) per batch; most of all they must not stop DNS (a loaded box may drop a few datagrams).
    expect(first.answered).toBeGreaterThan(0.9 * first.sent);
    expect(second.answered).toBeGreaterThan(0.9 * second.sent);
    // 12 000 more entries of ~600 bytes for each of 20 clients would be ~140 MB if anything kept them.
    expect(after - before).toBeLessThan(40);
  } finally {
    await stalled.stop();
  }
});
