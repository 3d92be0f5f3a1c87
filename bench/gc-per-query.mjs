// @ts-check
// What the collector costs per query on `cache-hot` over UDP, in numbers that other work on the machine does
// not move: bytes allocated per query and scavenges (with their pauses) per 100 000 queries, from V8's own
// trace (`--trace-gc-nvp`: one line per collection with `allocated=` bytes since the previous one and `pause=`).
// Sluice (bench/configs/cache-hot.yaml, CPU 1) forwards its misses to bench/ceiling.mjs; after a warm-up pass
// and 3 s of load every query is a cache hit, and dnsperf then sends `--queries` of them at `--qps` (CPU 0).
//   npm run build && node bench/gc-per-query.mjs [--queries 200000] [--qps 20000] [--idle SECONDS] [--node-arg=--max-semi-space-size=4 ...] [--no-launcher]
// Sluice starts through its launcher (bin/sluice, with the node options it adds; --node-arg goes to SLUICE_NODE_ARGS), or
// with --no-launcher as `node [--node-arg ...] dist/bundle/cli.js`. --idle leaves it idle before the measured queries, as the
// bench's interleaved rounds do while the other servers are measured: V8 then shrinks the young generation unless told not to.
// Needs dnsperf and taskset; uses two free ports it picks itself, so it can run beside `npm run bench`.
import dgram from "node:dgram";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { localNames, queryFile } from "./lib/data.mjs";
import { dnsperf, latencySummary } from "./lib/dnsperf.mjs";
import { installSignalHandlers, start, stop, stopAll, waitReady } from "./lib/procs.mjs";

const BENCH = dirname(fileURLToPath(import.meta.url));
const ROOT = resolve(BENCH, "..");

const argv = process.argv.slice(2);
/** @param {string} name @param {string} fallback */
const opt = (name, fallback) => {
  const at = argv.indexOf(name);
  return at >= 0 && at + 1 < argv.length ? argv[at + 1] : fallback;
};
const QUERIES = Number(opt("--queries", "200000"));
const QPS = Number(opt("--qps", "20000"));
/** Seconds Sluice sits idle between the steady-state load and the measured queries (the bench's interleaved rounds leave it idle while the other servers are measured). */
const IDLE_SECONDS = Number(opt("--idle", "0"));
const LAUNCHER = !argv.includes("--no-launcher");
const NODE_ARGS = argv.filter((a) => a.startsWith("--node-arg=")).map((a) => a.slice("--node-arg=".length));

/** A UDP port nothing is bound to right now (the kernel's pick). */
function freePort() {
  return new Promise((done) => {
    const s = dgram.createSocket("udp4");
    s.bind(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => done(port));
    });
  });
}

/**
 * The collections in `text` (trace-gc-nvp lines): count, pauses and bytes allocated, scavenges apart.
 * @param {string} text
 */
export function gcTotals(text) {
  const t = { scavenges: 0, scavengePauseMs: 0, maxScavengePauseMs: 0, sweepArrayBuffersMs: 0, others: 0, otherPauseMs: 0, allocated: 0 };
  for (const line of text.split("\n")) {
    const kind = / gc=(\S+)/.exec(line)?.[1];
    if (kind === undefined) continue;
    const pause = Number(/ pause=([\d.]+)/.exec(line)?.[1] ?? 0);
    t.allocated += Number(/ allocated=(\d+)/.exec(line)?.[1] ?? 0);
    if (kind === "s") {
      t.scavenges++;
      t.scavengePauseMs += pause;
      t.maxScavengePauseMs = Math.max(t.maxScavengePauseMs, pause);
      // Freeing the backing stores of dead ArrayBuffers: Node gives every received datagram one of its own.
      t.sweepArrayBuffersMs += Number(/ scavenge\.sweep_array_buffers=([\d.]+)/.exec(line)?.[1] ?? 0);
    } else {
      t.others++;
      t.otherPauseMs += pause;
    }
  }
  return t;
}

installSignalHandlers();
const tmp = await mkdtemp(join(tmpdir(), "sluice-gc-"));
try {
  const [port, upstreamPort] = [await freePort(), await freePort()];
  const file = join(tmp, "names.txt");
  await writeFile(file, queryFile(localNames()));
  const upstream = start("ceiling", process.execPath, [join(BENCH, "ceiling.mjs"), String(upstreamPort)], { cpus: "0" });
  await waitReady(upstream, upstreamPort, "probe.bench.test", 10_000);
  const traceFile = join(tmp, "trace.txt");
  const { openSync, closeSync } = await import("node:fs");
  const fd = openSync(traceFile, "w");
  const env = { ...process.env, PORT: String(port), UPSTREAM: `127.0.0.1:${upstreamPort}`, API_PORT: "0" };
  const startArgs = ["start", "-c", join(BENCH, "configs", "cache-hot.yaml"), "-d", tmp];
  const nodeArgs = ["--trace-gc-nvp", ...NODE_ARGS];
  const sluice = LAUNCHER
    ? start("sluice", join(ROOT, "bin", "sluice"), startArgs, { cpus: "1", env: { ...env, SLUICE_NODE: process.execPath, SLUICE_NODE_ARGS: nodeArgs.join(" ") }, cwd: tmp, stdoutFd: fd })
    : start("sluice", process.execPath, [...nodeArgs, join(ROOT, "dist/bundle/cli.js"), ...startArgs], { cpus: "1", env, cwd: tmp, stdoutFd: fd });
  closeSync(fd);
  await waitReady(sluice, port, "probe.bench.test", 20_000);
  // What node runs with, as the launcher passed it (taskset and the launcher exec, so the PID is node's).
  const cmdline = (await readFile(`/proc/${sluice.pid}/cmdline`, "utf8")).split("\0").filter(Boolean);
  const ran = cmdline.slice(1, cmdline.findIndex((a) => a.endsWith("cli.js"))).join(" ");
  const base = { port, file, outFile: join(tmp, "perf.txt"), clients: 4, outstanding: 500, cpus: "0" };
  await dnsperf({ ...base, maxRuns: 1 });
  await dnsperf({ ...base, seconds: 3, qps: QPS });
  if (IDLE_SECONDS > 0) await new Promise((done) => setTimeout(done, IDLE_SECONDS * 1000));
  const before = (await readFile(traceFile, "utf8")).length;
  const run = await dnsperf({ ...base, seconds: Math.ceil(QUERIES / QPS), qps: QPS, verbose: true });
  const text = (await readFile(traceFile, "utf8")).slice(before);
  const t = gcTotals(text);
  const answered = run.stats.completed;
  const per100k = (/** @type {number} */ n) => ((n * 100_000) / answered).toFixed(1);
  const lat = latencySummary(run.latencies, run.stats.lost);
  console.log(`${LAUNCHER ? "bin/sluice" : "node dist/bundle/cli.js"}, node options: ${ran}; idle ${IDLE_SECONDS} s before; ${answered} queries answered at ${QPS} QPS, ${run.stats.lost} lost`);
  console.log(`allocated: ${(t.allocated / answered).toFixed(0)} bytes/query (${(t.allocated / 1048576).toFixed(1)} MiB)`);
  console.log(`scavenges: ${per100k(t.scavenges)} per 100k queries (${(t.allocated / Math.max(1, t.scavenges) / 1048576).toFixed(1)} MiB allocated between two), pause ${per100k(t.scavengePauseMs)} ms per 100k (mean ${(t.scavengePauseMs / Math.max(1, t.scavenges)).toFixed(2)} ms, max ${t.maxScavengePauseMs.toFixed(2)} ms; of which sweeping ArrayBuffers ${per100k(t.sweepArrayBuffersMs)} ms)`);
  console.log(`other collections: ${t.others} (pause ${t.otherPauseMs.toFixed(1)} ms)`);
  console.log(`latency (under whatever else runs on the machine): avg ${lat.avgMs?.toFixed(3)} ms, p99 ${lat.p99Ms?.toFixed(3) ?? "—"} ms`);
  await stop(sluice);
  await stop(upstream);
} finally {
  await stopAll();
  await rm(tmp, { recursive: true, force: true });
}
