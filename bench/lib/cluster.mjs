// @ts-check
// The optional `cluster` scenario (`npm run bench -- --only cluster`): three Sluice instances behind
// dnsdist (chashed, PROXY protocol v2, no packet cache) sharing one redis-server, in front of the local
// upstream. Measured: cache-hit QPS through dnsdist against one instance asked directly (interleaved
// rounds, best counts), and the latency of answers a fresh instance finds in Redis (its local cache
// empty) against the same answers from its local cache, at a fixed rate. Needs redis-server and dnsdist.
import { execFileSync } from "node:child_process";
import { writeFile } from "node:fs/promises";
import net from "node:net";
import { join } from "node:path";
import { latencySummary } from "./dnsperf.mjs";
import { load } from "./h2load.mjs";
import { sleep, start, stop, waitReady } from "./procs.mjs";

const PORTS = { dnsdist: 35310, a: 35311, b: 35312, c: 35313, fresh: 35314, redis: 35315 };
/** Fixed rate of the Redis-hit latency runs: each name is a Redis hit once, so it must not outrun the name list. */
const LATENCY_QPS = 2000;

/** @param {string} cmd */
function have(cmd) {
  try {
    execFileSync(cmd, ["--version"], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
}

/** @param {number} port */
async function tcpOpen(port) {
  return new Promise((resolve) => {
    const c = net.connect(port, "127.0.0.1");
    c.once("connect", () => (c.destroy(), resolve(true)));
    c.once("error", () => resolve(false));
  });
}

/**
 * @typedef {object} ClusterResult
 * @property {string | null} skipped
 * @property {{ dnsdist: number[], direct: number[], lostDnsdist: number, lostDirect: number }} [qps]
 * @property {{ redisHit: { avgMs: number | null, p99Ms: number | null, samples: number }, localHit: { avgMs: number | null, p99Ms: number | null, samples: number }, lost: number }} [latency]
 */

/**
 * @param {{ tmp: string, cli: string, file: string, probe: string, upstreamPort: number, serverCpus: string | null, loadCpus: string | null,
 *   satRounds: number, satSeconds: number, saturation: { clients: number, outstanding: number, threads: number }, log: (m: string) => void }} o
 * @returns {Promise<ClusterResult>}
 */
export async function runCluster(o) {
  const missing = ["redis-server", "dnsdist"].filter((c) => !have(c));
  if (missing.length > 0) {
    const why = `not run: ${missing.join(" and ")} missing (apt-get install ${missing.join(" ")})`;
    o.log(`  cluster: ${why}`);
    return { skipped: why };
  }
  /** @type {import("./procs.mjs").Started[]} */
  const procs = [];
  try {
    const redis = start("redis", "redis-server", ["--port", String(PORTS.redis), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", o.tmp], { cpus: o.loadCpus });
    procs.push(redis);
    for (let i = 0; i < 100 && !(await tcpOpen(PORTS.redis)); i++) await sleep(50);
    const sluice = async (/** @type {string} */ name, /** @type {number} */ port, loadAtStart = true) => {
      const env = { ...process.env, PORT: String(port), UPSTREAM: `127.0.0.1:${o.upstreamPort}`, REDIS_URL: `redis://127.0.0.1:${PORTS.redis}`, INSTANCE: name, LOAD_AT_START: String(loadAtStart) };
      const p = start(`sluice-${name}`, process.execPath, [o.cli, "start", "-c", join(import.meta.dirname, "..", "configs", "cluster.yaml"), "-d", o.tmp], { env, cwd: o.tmp, cpus: o.serverCpus });
      procs.push(p);
      await waitReady(p, port, o.probe, 30_000);
      return p;
    };
    await sluice("a", PORTS.a);
    await sluice("b", PORTS.b);
    await sluice("c", PORTS.c);
    const conf = join(o.tmp, "dnsdist.conf");
    await writeFile(
      conf,
      [
        `setLocal("127.0.0.1:${PORTS.dnsdist}")`,
        `setSecurityPollSuffix("")`,
        ...["a", "b", "c"].map((n) => `newServer({address="127.0.0.1:${PORTS[/** @type {"a"|"b"|"c"} */ (n)]}", name="${n}", useProxyProtocol=true, checkName="${o.probe}."})`),
        "setServerPolicy(chashed)",
        "",
      ].join("\n"),
    );
    const dnsdist = start("dnsdist", "dnsdist", ["--supervised", "--disable-syslog", "-C", conf], { cpus: o.serverCpus });
    procs.push(dnsdist);
    await waitReady(dnsdist, PORTS.dnsdist, o.probe, 20_000);

    const base = { file: o.file, outFile: join(o.tmp, "dnsperf-cluster.out"), mode: /** @type {const} */ ("udp"), cpus: o.loadCpus };
    // Warm-up through dnsdist: every name is then in its instance's cache and in Redis.
    await load({ ...base, port: PORTS.dnsdist, maxRuns: 1, seconds: 30, clients: 4, outstanding: 100, timeoutSeconds: 60 });
    await load({ ...base, port: PORTS.a, maxRuns: 1, seconds: 30, clients: 4, outstanding: 100, timeoutSeconds: 60 });
    for (const port of [PORTS.dnsdist, PORTS.a]) await load({ ...base, port, seconds: 3, ...o.saturation });
    /** @type {NonNullable<ClusterResult["qps"]>} */
    const qps = { dnsdist: [], direct: [], lostDnsdist: 0, lostDirect: 0 };
    for (let round = 0; round < o.satRounds; round++) {
      for (const [key, port] of round % 2 === 0 ? /** @type {const} */ ([["dnsdist", PORTS.dnsdist], ["direct", PORTS.a]]) : /** @type {const} */ ([["direct", PORTS.a], ["dnsdist", PORTS.dnsdist]])) {
        const r = await load({ ...base, port, seconds: o.satSeconds, ...o.saturation });
        qps[key].push(r.stats.qps);
        if (key === "dnsdist") qps.lostDnsdist += r.stats.lost;
        else qps.lostDirect += r.stats.lost;
        o.log(`  cluster        ${key.padEnd(8)} round ${round + 1}: ${Math.round(r.stats.qps).toLocaleString("en-US").padStart(8)} QPS, ${r.stats.lost} lost`);
      }
    }
    // Redis hits: a fourth instance that does not load at start asks Redis for every name once.
    await sluice("fresh", PORTS.fresh, false);
    const fromRedis = await load({ ...base, port: PORTS.fresh, maxRuns: 1, qps: LATENCY_QPS, clients: 1, outstanding: 100, verbose: true, seconds: 60, timeoutSeconds: 90 });
    const fromLocal = await load({ ...base, port: PORTS.fresh, maxRuns: 1, qps: LATENCY_QPS, clients: 1, outstanding: 100, verbose: true, seconds: 60, timeoutSeconds: 90 });
    const latency = {
      redisHit: latencySummary(fromRedis.latencies, fromRedis.stats.lost),
      localHit: latencySummary(fromLocal.latencies, fromLocal.stats.lost),
      lost: fromRedis.stats.lost + fromLocal.stats.lost,
    };
    const best = (/** @type {number[]} */ xs) => Math.round(Math.max(...xs)).toLocaleString("en-US");
    o.log(`  cluster: cache hits through dnsdist (3 instances) ${best(qps.dnsdist)} QPS, one instance asked directly ${best(qps.direct)} QPS`);
    const ms = (/** @type {number | null} */ v) => (v === null ? "—" : `${v.toFixed(2)} ms`);
    o.log(`  cluster: Redis hit avg ${ms(latency.redisHit.avgMs)} p99 ${ms(latency.redisHit.p99Ms)}; local hit avg ${ms(latency.localHit.avgMs)} p99 ${ms(latency.localHit.p99Ms)} (${LATENCY_QPS} QPS, ${latency.redisHit.samples} names)`);
    return { skipped: null, qps, latency };
  } finally {
    for (const p of procs.reverse()) await stop(p);
  }
}

/**
 * The results section of the scenario.
 * @param {ClusterResult} c
 */
export function clusterLines(c) {
  if (c.skipped || !c.qps || !c.latency) return `Cluster: ${c.skipped ?? "no result"}.`;
  const best = (/** @type {number[]} */ xs) => Math.round(Math.max(...xs)).toLocaleString("en-US");
  const ms = (/** @type {number | null} */ v) => (v === null ? "—" : `${v.toFixed(2)} ms`);
  const l = c.latency;
  return [
    "Cluster (three instances behind dnsdist, chashed, PROXY protocol; `cache` with a Redis level):",
    "",
    "| measure | value |",
    "|---|---|",
    `| cache hits through dnsdist, QPS (best round; lost) | ${best(c.qps.dnsdist)} (${c.qps.lostDnsdist}) |`,
    `| cache hits from one instance asked directly, QPS (best round; lost) | ${best(c.qps.direct)} (${c.qps.lostDirect}) |`,
    `| answer found in Redis (local miss), avg / p99 | ${ms(l.redisHit.avgMs)} / ${ms(l.redisHit.p99Ms)} |`,
    `| the same answers from the local cache, avg / p99 | ${ms(l.localHit.avgMs)} / ${ms(l.localHit.p99Ms)} |`,
  ].join("\n");
}
