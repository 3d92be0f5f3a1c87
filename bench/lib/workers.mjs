// The `workers` scenario: cache-hot with `workers: 1` and `workers: 2`. On a 2-core machine dnsperf needs
// one core, so scaling cannot be measured here; what can be measured honestly is the CPU the extra processes
// cost: Sluice's CPU microseconds per answered query at a fixed 20 000 QPS (primary and workers together),
// each setting pinned to the server's core, then the same at half that rate with one process and twice it
// with two (how the figure depends on each process's own rate), and the QPS of `workers: 2` unpinned (the
// workers and dnsperf then share both cores). bench/README.md says how to measure the scaling on a machine
// with >= 4 cores.

import { join } from "node:path";
import { dnsperf } from "./dnsperf.mjs";
import { cpuSeconds, sleep } from "./procs.mjs";

/**
 * @typedef {{ workers: number, rate: number, cpuUsPerQuery: number, qps: number, lost: number }} WorkersRound
 * @typedef {{ pinned: WorkersRound[], unpinnedQps: number | null, ratio: number | null, halfRateRatio?: number | null, sameShareRatio?: number | null }} WorkersResult
 */

/**
 * The settings measured, pinned to the server's core: the target's pair (1 and 2 workers at the same total
 * rate), and two that say where the difference comes from — one process at half the rate (what each of 2
 * workers then answers) and 2 workers at twice the rate (each answering what the single process did).
 */
const SETTINGS = [
  { workers: 1, share: 1 },
  { workers: 2, share: 1 },
  { workers: 1, share: 0.5 },
  { workers: 2, share: 2 },
];

/**
 * @param {{ startSluice: (env: Record<string, string>, cpus: string | null | undefined) => Promise<import("./procs.mjs").Started>, stop: (p: import("./procs.mjs").Started) => Promise<void>,
 *   port: number, file: string, tmp: string, loadCpus: string | null, seconds: number, rounds: number, warmSeconds: number,
 *   latency: { qps: number, clients: number, outstanding: number }, saturation: { clients: number, outstanding: number, threads: number }, log: (s: string) => void }} o
 * @returns {Promise<WorkersResult>}
 */
export async function runWorkers(o) {
  const outFile = join(o.tmp, "dnsperf.out");
  /** @type {WorkersRound[]} */
  const pinned = [];
  for (const { workers, share } of SETTINGS) {
    const rate = o.latency.qps * share;
    const sluice = await o.startSluice({ WORKERS: String(workers) }, undefined);
    try {
      await dnsperf({ port: o.port, file: o.file, outFile, mode: "udp", cpus: o.loadCpus, seconds: o.warmSeconds, ...o.saturation });
      await sleep(300);
      /** @type {WorkersRound | null} */
      let best = null;
      for (let round = 0; round < o.rounds; round++) {
        const before = await cpuSeconds(sluice.pid);
        const r = await dnsperf({ port: o.port, file: o.file, outFile, mode: "udp", cpus: o.loadCpus, seconds: o.seconds, ...o.latency, qps: rate });
        const after = await cpuSeconds(sluice.pid);
        const answered = r.stats.completed;
        const cpuUsPerQuery = before === null || after === null || answered === 0 ? NaN : ((after - before) * 1e6) / answered;
        o.log(`  workers: ${workers} @${rate / 1000}k QPS: ${cpuUsPerQuery.toFixed(1)} µs of CPU per answered query (${answered} answered, ${r.stats.lost} lost)`);
        // The calmest round: a neighbour's work only ever adds CPU time (cache misses, migrations).
        if (best === null || cpuUsPerQuery < best.cpuUsPerQuery) best = { workers, rate, cpuUsPerQuery, qps: r.stats.qps, lost: r.stats.lost };
      }
      if (best) pinned.push(best);
    } finally {
      await o.stop(sluice);
    }
  }
  let unpinnedQps = null;
  const sluice = await o.startSluice({ WORKERS: "2" }, null);
  try {
    await dnsperf({ port: o.port, file: o.file, outFile, mode: "udp", cpus: null, seconds: o.warmSeconds, ...o.saturation });
    for (let round = 0; round < o.rounds; round++) {
      const r = await dnsperf({ port: o.port, file: o.file, outFile, mode: "udp", cpus: null, seconds: o.seconds, ...o.saturation });
      o.log(`  workers: 2 unpinned, saturation: ${Math.round(r.stats.qps).toLocaleString("en-US")} QPS`);
      unpinnedQps = Math.max(unpinnedQps ?? 0, r.stats.qps);
    }
  } finally {
    await o.stop(sluice);
  }
  const [one, two, half, double] = pinned;
  const over = (/** @type {WorkersRound | undefined} */ a) => (a && one ? a.cpuUsPerQuery / one.cpuUsPerQuery : null);
  return { pinned, unpinnedQps, ratio: over(two), halfRateRatio: over(half), sameShareRatio: over(double) };
}

/** @param {WorkersResult} w */
export function workersLines(w) {
  const rows = w.pinned.map((p) => `| ${p.workers} | ${Math.round(p.rate ?? 20000).toLocaleString("en-US")} | ${p.cpuUsPerQuery.toFixed(1)} | ${Math.round(p.qps).toLocaleString("en-US")} | ${p.lost} |`);
  const verdict = w.ratio === null ? "not measured" : `${w.ratio.toFixed(2)} × (target ≤ 1.10 ×: ${w.ratio <= 1.1 ? "met" : "missed"})`;
  const x = (/** @type {number | null | undefined} */ r) => (r === null || r === undefined ? "—" : `${r.toFixed(2)} ×`);
  return [
    "Workers (cache-hot, Sluice pinned to the server's core; CPU of the primary and its workers together, the calmest round of each setting):",
    "",
    "| workers | QPS asked | CPU µs per answered query | QPS | lost |",
    "|---|---|---|---|---|",
    ...rows,
    "",
    `CPU per query, 2 workers ÷ 1 at the same total rate: ${verdict}. Each worker then answers half of it: one process alone at half the rate costs ${x(w.halfRateRatio)} its full-rate figure, and 2 workers at twice the rate (each answering what the single process did) cost ${x(w.sameShareRatio)}.`,
    `Saturation with 2 workers, unpinned (sharing both cores with dnsperf): ${w.unpinnedQps === null ? "—" : `${Math.round(w.unpinnedQps).toLocaleString("en-US")} QPS`}.`,
  ].join("\n");
}
