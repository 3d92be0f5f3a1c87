// @ts-check
// The measurements of one scenario: saturation QPS and latency at a fixed rate, each in rounds interleaved
// across the servers, so a disturbance on the machine hits one round of one server, not a whole result.
import { cpuSeconds } from "./procs.mjs";
import { laterP99, latencySummary } from "./dnsperf.mjs";
import { load } from "./h2load.mjs";
import { SERVER_ORDER } from "./report.mjs";

/**
 * A latency round starts from idle (the other servers were measured meanwhile); on the bench VM its first ~100 ms
 * can hold stalls of a few ms (bench/README.md, "What a round's start costs"). Each round also reports its p99
 * without them, so a run tells the start apart from the steady state.
 */
const START_MS = 100;

/** @typedef {import("./report.mjs").ServerResult} ServerResult */
/** @typedef {import("./report.mjs").Latency} Latency */

/**
 * @typedef {object} Plan
 * @property {number} satRounds
 * @property {number} satSeconds
 * @property {{ clients: number, outstanding: number, threads: number }} saturation
 * @property {number} latRounds
 * @property {number} latSeconds
 * @property {{ qps: number, clients: number, outstanding: number }} latency
 */

/** @param {unknown} err */
const message = (err) => (err instanceof Error ? err.message : String(err));

/**
 * Each round visits every server; the order rotates by one per round.
 * @param {string[]} names @param {number} round
 */
const rotated = (names, round) => [...names.slice(round % names.length), ...names.slice(0, round % names.length)];

/**
 * @param {string} scenario
 * @param {Record<string, { port: number, pid: number }>} live  servers that started and passed the warm-up
 * @param {{ file: string, outFile: string, mode: "udp" | "tcp" | "dot" | "doh", cpus: string | null, uris?: Record<number, { path: string, count: number }> }} base  load options shared by all runs
 * @param {Plan} plan
 * @param {(msg: string) => void} log
 * @param {{ afterSaturation?: () => Promise<void> }} [hooks]  called between the saturation and the latency rounds
 * @returns {Promise<Record<string, ServerResult>>}
 */
export async function measureServers(scenario, live, base, plan, log, hooks = {}) {
  const names = SERVER_ORDER.filter((n) => live[n]);
  /** @param {string} name @param {string} what */
  const say = (name, what) => log(`  ${scenario.padEnd(14)} ${name.padEnd(8)} ${what}`);
  /** @type {Record<string, { qps: number[], lost: number, cpu: number[], lat: Latency[], latLost: number, error?: string, note?: string }>} */
  const acc = Object.fromEntries(names.map((n) => [n, { qps: [], lost: 0, cpu: [], lat: [], latLost: 0 }]));

  for (let round = 0; round < plan.satRounds; round++) {
    for (const name of rotated(names, round)) {
      const a = acc[name];
      try {
        const before = await cpuSeconds(live[name].pid);
        const r = await load({ ...base, port: live[name].port, seconds: plan.satSeconds, ...plan.saturation });
        const after = await cpuSeconds(live[name].pid);
        a.qps.push(r.stats.qps);
        a.lost += r.stats.lost;
        a.cpu.push(before !== null && after !== null ? (after - before) / r.stats.runSeconds : NaN);
        say(name, `round ${round + 1}: ${Math.round(r.stats.qps).toLocaleString("en-US").padStart(8)} QPS, ${r.stats.lost} lost`);
      } catch (err) {
        a.error = `saturation: ${message(err)}`;
        say(name, `round ${round + 1}: ${a.error}`);
      }
    }
  }

  if (hooks.afterSaturation) await hooks.afterSaturation();
  const measured = names.filter((n) => acc[n].qps.length > 0);
  // h2load (DoH) reports no percentiles: no latency rounds there.
  const latRounds = base.mode === "doh" ? 0 : plan.latRounds;
  for (let round = 0; round < latRounds; round++) {
    for (const name of rotated(measured, round)) {
      const a = acc[name];
      try {
        const r = await load({ ...base, port: live[name].port, seconds: plan.latSeconds, verbose: true, ...plan.latency });
        const l = latencySummary(r.latencies, r.stats.lost);
        const p99LaterMs = laterP99(r.latencies, r.stats.lost, plan.latency.qps, START_MS);
        a.lat.push({ avgMs: l.avgMs, p99Ms: l.p99Ms, p99LaterMs, qps: r.stats.qps, lost: r.stats.lost, samples: l.samples });
        a.latLost += r.stats.lost;
        say(name, `@${plan.latency.qps / 1000}k round ${round + 1}: avg ${l.avgMs?.toFixed(3)} ms, p99 ${l.p99Ms === null ? ">1% lost" : `${l.p99Ms.toFixed(3)} ms`}, ${r.stats.lost} lost; after the first ${START_MS} ms p99 ${p99LaterMs === null ? ">1% lost" : `${p99LaterMs.toFixed(3)} ms`}`);
      } catch (err) {
        a.note = `latency: ${message(err)}`;
        say(name, `@${plan.latency.qps / 1000}k round ${round + 1}: ${a.note}`);
      }
    }
  }

  /** @type {Record<string, ServerResult>} */
  const out = {};
  for (const name of names) {
    const a = acc[name];
    const best = a.qps.length > 0 ? a.qps.indexOf(Math.max(...a.qps)) : -1;
    // The calmest latency round: the lowest p99 (a round with no finite p99 only when there is no other).
    const lat = a.lat.reduce((/** @type {Latency | null} */ m, l) => (m === null || (l.p99Ms !== null && (m.p99Ms === null || l.p99Ms < m.p99Ms)) ? l : m), null);
    out[name] = {
      qps: best >= 0 ? a.qps[best] : 0,
      rounds: a.qps.map((q) => Math.round(q)),
      lost: a.lost,
      cpu: best >= 0 && Number.isFinite(a.cpu[best]) ? Number(a.cpu[best].toFixed(3)) : null,
      latency: lat ? { ...lat, lost: a.latLost } : null,
      latencyRounds: a.lat,
    };
    if (best < 0) out[name].error = a.error ?? "not measured";
    else if (a.error || a.note) out[name].note = [a.error, a.note].filter(Boolean).join("; ");
  }
  return out;
}
