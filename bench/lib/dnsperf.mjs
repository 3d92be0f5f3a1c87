// @ts-check
// Runs dnsperf (always bounded by -l or -n and by an outer timeout) and reads its statistics; with -v,
// collects the per-query latencies from the `> RCODE name TYPE seconds` lines as they stream in.
import { closeSync, openSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { deadline, start, stop } from "./procs.mjs";

/**
 * @typedef {object} PerfStats
 * @property {number} sent
 * @property {number} completed
 * @property {number} lost
 * @property {number} qps
 * @property {number} avgLatencyMs  dnsperf's own average over completed queries
 * @property {Record<string, number>} rcodes
 * @property {number} runSeconds
 * @property {string} command
 */

/**
 * @typedef {object} PerfRun
 * @property {PerfStats} stats
 * @property {Float64Array} latencies  seconds per completed query (only with verbose)
 * @property {number[]} intervalQps  one value per -S interval (only with statsInterval)
 */

/** @param {string} text @param {RegExp} re */
const num = (text, re) => {
  const m = re.exec(text);
  return m ? Number(m[1]) : NaN;
};

/**
 * Parses the "Statistics:" block.
 * @param {string} text @param {string} command
 * @returns {PerfStats}
 */
export function parseStats(text, command) {
  /** @type {Record<string, number>} */
  const rcodes = {};
  const rc = /Response codes:\s+(.*)/.exec(text);
  if (rc) for (const m of rc[1].matchAll(/([A-Z0-9]+) (\d+) \(/g)) rcodes[m[1]] = Number(m[2]);
  const stats = {
    sent: num(text, /Queries sent:\s+(\d+)/),
    completed: num(text, /Queries completed:\s+(\d+)/),
    lost: num(text, /Queries lost:\s+(\d+)/),
    qps: num(text, /Queries per second:\s+([\d.]+)/),
    avgLatencyMs: num(text, /Average Latency \(s\):\s+([\d.]+)/) * 1000,
    rcodes,
    runSeconds: num(text, /Run time \(s\):\s+([\d.]+)/),
    command,
  };
  if (Number.isNaN(stats.sent) || Number.isNaN(stats.qps)) throw new Error(`could not read dnsperf's statistics (${command}):\n${text.slice(-2000)}`);
  return stats;
}

/**
 * Runs dnsperf against 127.0.0.1:port. Its output goes to `outFile` (read when it ends; with `onInterval`, polled
 * each second for the -S lines), so the harness does no work while a measurement runs.
 * @param {{ port: number, file: string, outFile: string, seconds?: number, maxRuns?: number, clients: number,
 *   outstanding: number, threads?: number, qps?: number, mode?: "udp" | "tcp" | "dot" | "doh", verbose?: boolean, statsInterval?: number,
 *   cpus?: string | null, timeoutSeconds?: number, onInterval?: (qps: number) => void }} o
 * @returns {Promise<PerfRun>}
 */
export async function dnsperf(o) {
  const args = ["-s", "127.0.0.1", "-p", String(o.port), "-d", o.file, "-c", String(o.clients), "-q", String(o.outstanding)];
  if (o.seconds !== undefined) args.push("-l", String(o.seconds));
  if (o.maxRuns !== undefined) args.push("-n", String(o.maxRuns));
  if (o.threads !== undefined && o.threads > 1) args.push("-T", String(o.threads));
  if (o.qps !== undefined) args.push("-Q", String(o.qps));
  // DoH: HTTP/2 GET of https://<-s>:<-p>/dns-query (dnsperf's defaults); dnsperf does not check certificates.
  if (o.mode && o.mode !== "udp") args.push("-m", o.mode);
  if (o.verbose) args.push("-v");
  if (o.statsInterval !== undefined) args.push("-S", String(o.statsInterval));
  // dnsperf gives up on an unanswered query after -t seconds (default 5); keep the tail of a run short.
  args.push("-t", "2");
  const command = `dnsperf ${args.join(" ")}`;

  const fd = openSync(o.outFile, "w");
  let p;
  try {
    p = start("dnsperf", "dnsperf", args, { cpus: o.cpus ?? null, stdoutFd: fd });
  } finally {
    closeSync(fd);
  }
  /** @type {number[]} */
  const intervalQps = [];
  let polled = 0;
  const poll = async () => {
    const text = await readFile(o.outFile, "utf8").catch(() => "");
    const lines = text.slice(polled).split("\n");
    const rest = lines.pop() ?? "";
    polled = text.length - rest.length;
    for (const line of lines) {
      const m = INTERVAL.exec(line);
      if (m) {
        intervalQps.push(Number(m[1]));
        o.onInterval?.(Number(m[1]));
      }
    }
  };
  const poller = o.onInterval ? setInterval(() => void poll(), 1000) : null;
  const limit = (o.timeoutSeconds ?? (o.seconds ?? 60) + 20) * 1000;
  const timer = deadline(limit);
  const timedOut = await Promise.race([p.exited.then(() => false), timer.expired.then(() => true)]);
  timer.cancel();
  if (poller) clearInterval(poller);
  if (timedOut) {
    await stop(p);
    throw new Error(`${command}: no result within ${limit / 1000} s`);
  }
  const code = await p.exited;
  const out = await readFile(o.outFile, "utf8");
  if (o.onInterval) {
    await poll();
  } else {
    for (const m of out.matchAll(/^\d+\.\d+: ([\d.]+)$/gm)) intervalQps.push(Number(m[1]));
  }
  if (code !== 0) {
    const said = [...out.split("\n"), ...p.output().split("\n")].filter((l) => l.trim() && !l.startsWith("> ") && !l.startsWith("[Timeout]"));
    throw new Error(`dnsperf exited with ${code}: ${said.slice(-3).join(" / ")} (${command})`);
  }
  return { stats: parseStats(out, command), latencies: o.verbose ? readLatencies(out) : new Float64Array(0), intervalQps };
}

const INTERVAL = /^\d+\.\d+: ([\d.]+)$/;

/**
 * The seconds of every `> RCODE name TYPE seconds` line.
 * @param {string} out
 */
function readLatencies(out) {
  let latencies = new Float64Array(1 << 16);
  let count = 0;
  let at = 0;
  for (;;) {
    const nl = out.indexOf("\n", at);
    const end = nl < 0 ? out.length : nl;
    if (out.startsWith("> ", at)) {
      const v = Number(out.slice(out.lastIndexOf(" ", end) + 1, end));
      if (Number.isFinite(v)) {
        if (count === latencies.length) {
          const bigger = new Float64Array(latencies.length * 2);
          bigger.set(latencies);
          latencies = bigger;
        }
        latencies[count++] = v;
      }
    }
    if (nl < 0) break;
    at = nl + 1;
  }
  return latencies.subarray(0, count);
}

/**
 * Average and 99th percentile in ms. Lost queries count as slower than every answer, so a run that lost
 * more than 1% has no finite p99 (reported as null).
 * @param {Float64Array} seconds @param {number} lost
 */
export function latencySummary(seconds, lost) {
  if (seconds.length === 0) return { avgMs: null, p99Ms: null, samples: 0 };
  const sorted = Float64Array.from(seconds).sort();
  let sum = 0;
  for (const v of sorted) sum += v;
  const total = sorted.length + lost;
  const rank = Math.ceil(total * 0.99) - 1;
  return {
    avgMs: (sum / sorted.length) * 1000,
    p99Ms: rank < sorted.length ? sorted[rank] * 1000 : null,
    samples: sorted.length,
  };
}

/**
 * p99 (ms) of the answers after the first `skipMs` of a round at `qps`: dnsperf prints answers as they come, so
 * their order is the order in time. Lost queries count as the slowest, as in latencySummary.
 * @param {Float64Array} seconds @param {number} lost @param {number} qps @param {number} skipMs
 */
export function laterP99(seconds, lost, qps, skipMs) {
  const skip = Math.min(seconds.length, Math.round((qps * skipMs) / 1000));
  return latencySummary(seconds.subarray(skip), lost).p99Ms;
}
