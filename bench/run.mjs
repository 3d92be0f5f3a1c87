// @ts-check
// `npm run bench`: dnsperf against Sluice and, in the same run on the same machine, a bare Node responder
// (the ceiling), unbound and dnsmasq; prints QPS, lost queries and latency per scenario, the ratios, the
// targets (PASS/MISS), and writes bench/results/<timestamp>.json and latest.json. See bench/README.md.
//   node bench/run.mjs [--quick] [--only local,cache-hot,...] [--record]
import { execFileSync } from "node:child_process";
import { mkdtemp, mkdir, rm, stat, writeFile } from "node:fs/promises";
import os from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { clusterLines, runCluster } from "./lib/cluster.mjs";
import { dnsperf, latencySummary } from "./lib/dnsperf.mjs";
import { dohRcodes, load, writeDohUris } from "./lib/h2load.mjs";
import { measureServers } from "./lib/measure.mjs";
import { MEMORY_NAMES, writeMemoryQueries } from "./lib/data.mjs";
import { installSignalHandlers, onInterrupt, portFree, rssMiB, start, stop, stopAll, waitReady } from "./lib/procs.mjs";
import { dnsmasqArgs, unboundConfig } from "./lib/refs.mjs";
import { cacheCounters, cachePhase, cacheTable } from "./lib/cache-metrics.mjs";
import { bestPostgresRun, postgresBin, postgresWriterRate, postgresWriterTable, postgresWriterTarget, serverCpuSeconds, startPostgres } from "./lib/postgres.mjs";
import { cpuByPriority, generateRecords, recorderMetrics, timeRoute, waitDrained } from "./lib/recorder.mjs";
import { startSink, webhookAt20k } from "./lib/webhook.mjs";
import { rssPair } from "./lib/clients.mjs";
import { runWorkers, workersLines } from "./lib/workers.mjs";
import { judgeTargets, memoryTable, providerLines, purposes, recordReadme, recorderStatsSummary, recorderStatsTable, resultsTable, rssLines, tailLine, targetsTable } from "./lib/report.mjs";
import { checkPrerequisites, cpuReading, cpuShares, machineInfo, prepareData } from "./lib/setup.mjs";

/** @typedef {import("./lib/report.mjs").ScenarioResult} ScenarioResult */
/** @typedef {import("./lib/report.mjs").MemoryResult} MemoryResult */
/** @typedef {import("./lib/procs.mjs").Started} Started */
/** @typedef {import("./lib/refs.mjs").RefMode} RefMode */

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const BENCH = join(ROOT, "bench");

/**
 * @typedef {object} Scenario
 * @property {string} name
 * @property {string} purpose
 * @property {string} config         bench/configs/<config>.yaml
 * @property {"local" | "domainSet" | "adguard" | "prefetch"} queries
 * @property {RefMode} ref           what unbound and dnsmasq do
 * @property {"udp" | "tcp" | "dot" | "doh"} mode  dnsperf's transport
 * @property {string[]} [servers]    the servers measured (default: all); the ceiling and dnsmasq speak neither DoT nor DoH
 * @property {string} [provider]     tag of a provider whose build time and memory are measured too
 * @property {Record<string, number>} expect  share of each rcode in the answers (checked on the warm-up pass)
 * @property {string} [plain]        a second Sluice measured alongside (config name), for a ratio to Sluice without the scenario's addition
 * @property {string} [plainLabel]   what the second Sluice is called in the tables (default "Sluice, no recorder")
 * @property {boolean} [cacheMetrics] both Sluice instances serve their API (PORTS.api, PORTS.plainApi): their cache hit rates per phase are reported
 * @property {boolean} [recorder]    Sluice runs a query recorder (its API on PORTS.api): dropped records are measured at 20 000 QPS
 * @property {boolean} [webhook]     Sluice sends a webhook per query to the HTTP sink (PORTS.sink): measured at 20 000 QPS beside `plain`
 * @property {boolean} [rss]         Sluice's RSS is read beside `plain`'s at start, after the steady state, the saturation rounds and the 20 000 QPS rounds
 */

/** @type {Scenario[]} */
const SCENARIOS = [
  { name: "local", purpose: "1 000 names answered from `hosts` and `arbitrary`; references answer from local data.", config: "local", queries: "local", ref: "local", mode: "udp", expect: { NOERROR: 1 } },
  { name: "cache-hot", purpose: "`cache` in front of `forward`, every query a hit after a warm-up pass; references are caching forwarders to the same upstream.", config: "cache-hot", queries: "local", ref: "cache", mode: "udp", expect: { NOERROR: 1 } },
  { name: "forward", purpose: "no cache, every query forwarded to one local upstream (unbound); dnsmasq and unbound forward with their caches off.", config: "forward", queries: "local", ref: "forward", mode: "udp", expect: { NOERROR: 1 } },
  { name: "domain-set", purpose: "`qname $set` against 100 000 rules (full/domain/keyword); half the names match (NXDOMAIN), half get an address from `hosts`.", config: "domain-set", queries: "domainSet", ref: "domain-set", mode: "udp", expect: { NOERROR: 0.5, NXDOMAIN: 0.5 } },
  { name: "sequence-heavy", purpose: "20 sequence rules with mixed matchers before the local answer; references answer locally.", config: "sequence-heavy", queries: "local", ref: "local", mode: "udp", expect: { NOERROR: 1 } },
  { name: "tcp", purpose: "cache-hot over TCP (4 connections); references and ceiling over TCP too.", config: "cache-hot", queries: "local", ref: "cache", mode: "tcp", expect: { NOERROR: 1 } },
  { name: "adguard", purpose: "`qname $ads` against a 150 000-rule AdGuard DNS filter-shaped list (`adguard_rule`); half the names blocked (NXDOMAIN) by rules of every kind, half answered; unbound and dnsmasq have no equivalent and are not run.", config: "adguard", queries: "adguard", ref: "local", mode: "udp", servers: ["sluice", "ceiling"], expect: { NOERROR: 0.5, NXDOMAIN: 0.5 }, provider: "adguard_rule" },
  { name: "tls", purpose: "cache-hot over DNS over TLS (4 connections, `tcp_server` with cert and key); unbound caching and serving DoT (`tls-port`).", config: "cache-hot-dot", queries: "local", ref: "cache", mode: "dot", servers: ["sluice", "unbound"], expect: { NOERROR: 1 } },
  { name: "doh", purpose: "cache-hot over DNS over HTTPS (HTTP/2, GET, 4 connections, `http_server`); unbound caching and serving DoH (`https-port`).", config: "cache-hot-doh", queries: "local", ref: "cache", mode: "doh", servers: ["sluice", "unbound"], expect: { NOERROR: 1 } },
  {
    name: "recorded",
    purpose: "cache-hot with a `query_recorder` in front (every query written to SQLite), against cache-hot without it (`Sluice, no recorder`) in the same rounds.",
    config: "recorded",
    queries: "local",
    ref: "cache",
    mode: "udp",
    servers: ["sluice", "plain", "ceiling"],
    expect: { NOERROR: 1 },
    plain: "cache-hot",
    recorder: true,
  },
  {
    name: "http-request",
    purpose: "cache-hot with an asynchronous `http_request` per query (a JSON POST to a local HTTP sink, `bench/http-sink.mjs`), against cache-hot without it (`Sluice, no webhook`) in the same rounds.",
    config: "http-request",
    queries: "local",
    ref: "cache",
    mode: "udp",
    servers: ["sluice", "plain", "ceiling"],
    expect: { NOERROR: 1 },
    plain: "cache-hot",
    plainLabel: "Sluice, no webhook",
    webhook: true,
  },
  {
    name: "clients",
    purpose:
      "cache-hot behind a `clients` provider (1 000 clients with addresses, CIDRs and MACs; 20 groups) and a sequence that branches on the client's groups and a `schedule` before the cache; dnsperf's 127.0.0.1 is a declared client in two groups. Against cache-hot without them (`Sluice, no clients`) in the same rounds, QPS and RSS.",
    config: "clients",
    queries: "local",
    ref: "cache",
    mode: "udp",
    servers: ["sluice", "plain", "ceiling"],
    expect: { NOERROR: 1 },
    plain: "cache-hot",
    plainLabel: "Sluice, no clients",
    rss: true,
  },
  {
    name: "prefetch",
    purpose:
      "`cache` with `prefetch` in front of `forward`, over a popular-name mix (1 000 names asked in Zipf proportions, 20 000 queries a pass) whose upstream answers carry TTL 2 s, against the same cache without prefetch (`Sluice, no prefetch`) in the same rounds; hit rates from each cache's metrics.",
    config: "prefetch",
    queries: "prefetch",
    ref: "cache",
    mode: "udp",
    servers: ["sluice", "plain"],
    expect: { NOERROR: 1 },
    plain: "prefetch-off",
    plainLabel: "Sluice, no prefetch",
    cacheMetrics: true,
  },
];
// `cluster` (three instances behind dnsdist, Redis) runs only when asked for: --only cluster.
const ALL_NAMES = [...SCENARIOS.map((s) => s.name), "memory", "recorder-stats", "postgres-writer", "cluster", "workers"];

const PORTS = { ceiling: 35300, upstream: 35301, sluice: 35302, unbound: 35303, dnsmasq: 35304, plain: 35305, api: 35306, plainApi: 35307, sink: 35308 };
const PROBE_NAME = { local: "host-0.lan.bench.test", domainSet: "www.s00000000.net", adguard: "probe.adguard.bench.test", prefetch: "pop-0.ttl.bench.test" };

// Saturation: 4 sockets, at most 200 queries outstanding, one dnsperf thread pinned to its own core while
// the server has the other (see bench/README.md, "Flags").
const SATURATION = { clients: 4, outstanding: 200, threads: 1 };
const LATENCY = { qps: 20_000, clients: 4, outstanding: 500 };
const WARM_SECONDS = 3;

/** @returns {{ quick: boolean, only: string[] | null, record: boolean }} */
function parseArgs() {
  const argv = process.argv.slice(2);
  const opts = { quick: false, only: /** @type {string[] | null} */ (null), record: false };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === "--quick") opts.quick = true;
    else if (a === "--record") opts.record = true;
    else if (a === "--only" || a.startsWith("--only=")) {
      const v = a === "--only" ? argv[++i] : a.slice("--only=".length);
      opts.only = (v ?? "").split(",").map((x) => x.trim()).filter(Boolean);
      const bad = opts.only.filter((x) => !ALL_NAMES.includes(x));
      if (bad.length > 0 || opts.only.length === 0) usage(`unknown scenario '${bad.join(",") || v}'`);
    } else if (a === "--help" || a === "-h") usage(null);
    else usage(`unknown option '${a}'`);
  }
  return opts;
}

/** @param {string | null} problem @returns {never} */
function usage(problem) {
  if (problem) console.error(problem);
  console.error(`usage: node bench/run.mjs [--quick] [--only <${ALL_NAMES.join("|")}>[,...]] [--record]`);
  process.exit(problem ? 2 : 0);
}

const opts = parseArgs();
// Saturation: 5 interleaved rounds × 2 s per server, the best round counts. Latency at 20 000 QPS: 2 interleaved
// rounds × 3 s (60 000 samples each), the round with the lower p99 counts. See bench/README.md, "Flags".
/** @type {import("./lib/measure.mjs").Plan} */
const PLAN = {
  satRounds: opts.quick ? 1 : 5,
  satSeconds: 2,
  saturation: SATURATION,
  latRounds: opts.quick ? 1 : 2,
  latSeconds: opts.quick ? 2 : 3,
  latency: LATENCY,
};

installSignalHandlers();
const { tools, cli, taskset } = checkPrerequisites(ROOT);
const machine = machineInfo(tools);
// Each server gets one core to itself, dnsperf (and the upstream) the other.
const pin = taskset !== null && machine.cores >= 2;
const SERVER_CPUS = pin ? "1" : null;
const LOAD_CPUS = pin ? "0" : null;
// The harness itself stays off the server's core too.
if (pin) execFileSync(/** @type {string} */ (taskset), ["-a", "-p", "-c", "0", String(process.pid)], { stdio: "ignore" });

/** @param {string} msg */
const log = (msg) => console.log(msg);

/**
 * Starts a process and waits until it answers DNS on `port`.
 * @param {string} name @param {string} cmd @param {string[]} args @param {number} port @param {string} probe
 * @param {{ env?: NodeJS.ProcessEnv, cwd?: string, cpus?: string | null }} [o]
 */
async function startServer(name, cmd, args, port, probe, o = {}) {
  const p = start(name, cmd, args, { cpus: o.cpus === undefined ? SERVER_CPUS : o.cpus, env: o.env, cwd: o.cwd });
  try {
    await waitReady(p, port, probe, 30_000);
  } catch (err) {
    await stop(p);
    throw err;
  }
  return p;
}

/** @typedef {{ tmp: string, rules: string, clients: string, adguardRules: string, cert: { cert: string, key: string } }} SluiceFiles  what the configurations read */

/**
 * @param {string} config @param {number} port @param {string} probe
 * @param {SluiceFiles} ctx @param {Record<string, string>} [extraEnv]
 */
function startSluice(config, port, probe, ctx, extraEnv = {}) {
  const env = { ...process.env, PORT: String(port), UPSTREAM: `127.0.0.1:${PORTS.upstream}`, RULES: ctx.rules, CLIENTS: ctx.clients, ADGUARD_RULES: ctx.adguardRules, CERT: ctx.cert.cert, KEY: ctx.cert.key, API_PORT: String(PORTS.api), SINK_PORT: String(PORTS.sink), ...extraEnv };
  // Through the launcher, as installed releases and the Debian package run it: the node options it adds count
  // (the young generation's size: bench/README.md, "Latency"). It runs dist/bundle/cli.js on this node.
  const args = ["start", "-c", join(BENCH, "configs", `${config}.yaml`), "-d", ctx.tmp];
  return startServer("sluice", join(ROOT, "bin", "sluice"), args, port, probe, { env: { ...env, SLUICE_NODE: process.execPath }, cwd: ctx.tmp });
}

/**
 * Runs one scenario: starts Sluice, unbound and dnsmasq for it (the ceiling runs throughout), checks
 * their answers on a warm-up pass, then measures saturation (interleaved rounds) and latency at 20 000 QPS.
 * @param {Scenario} sc @param {{ tmp: string, rules: string, clients: string, adguardRules: string, adguardEmpty: string, cert: { cert: string, key: string }, queries: Record<string, string>, refData: import("./lib/refs.mjs").RefData, ceiling: Started }} ctx
 * @returns {Promise<ScenarioResult>}
 */
async function runScenario(sc, ctx) {
  const file = ctx.queries[sc.queries];
  const probe = PROBE_NAME[sc.queries];
  /** @type {ScenarioResult} */
  const result = { name: sc.name, purpose: sc.purpose, transport: sc.mode, queries: file.slice(ROOT.length + 1), servers: {} };
  if (sc.plainLabel) result.labels = { plain: sc.plainLabel };
  const wanted = (/** @type {string} */ name) => !sc.servers || sc.servers.includes(name);
  /** @type {Record<string, { port: number, proc: Started }>} */
  const live = wanted("ceiling") ? { ceiling: { port: PORTS.ceiling, proc: ctx.ceiling } } : {};
  /** @type {Started[]} */
  const own = [];
  /** @param {string} name @param {unknown} err */
  const fail = (name, err) => {
    const msg = err instanceof Error ? err.message : String(err);
    log(`  ${name}: FAILED — ${msg.split("\n").slice(0, 6).join("\n    ")}`);
    result.servers[name] = { qps: 0, rounds: [], lost: 0, cpu: null, latency: null, error: msg };
  };
  try {
    const encrypted = sc.mode === "dot" || sc.mode === "doh" ? { mode: sc.mode, ...ctx.cert } : undefined;
    const refOpts = { dir: ctx.tmp, mode: sc.ref, upstreamPort: PORTS.upstream, data: ctx.refData, encrypted };
    // The webhooks' receiver runs beside dnsperf, off the server's core.
    if (sc.webhook) own.push(await startSink(BENCH, PORTS.sink, LOAD_CPUS));
    /** @type {[string, number, () => Promise<Started>][]} */
    const starters = [
      ["sluice", PORTS.sluice, () => startSluice(sc.config, PORTS.sluice, probe, ctx)],
      ...(sc.plain ? [/** @type {[string, number, () => Promise<Started>]} */ (["plain", PORTS.plain, () => startSluice(/** @type {string} */ (sc.plain), PORTS.plain, probe, ctx, { API_PORT: String(PORTS.plainApi) })])] : []),
      ["unbound", PORTS.unbound, async () => startServer("unbound", tools.unbound, ["-c", await unboundConfig({ name: `unbound-${sc.name}`, port: PORTS.unbound, ...refOpts })], PORTS.unbound, probe)],
      ["dnsmasq", PORTS.dnsmasq, async () => startServer("dnsmasq", tools.dnsmasq, await dnsmasqArgs({ name: `dnsmasq-${sc.name}`, port: PORTS.dnsmasq, ...refOpts }), PORTS.dnsmasq, probe)],
    ];
    for (const [name, port, begin] of starters) {
      if (!wanted(name)) continue;
      try {
        const proc = await begin();
        own.push(proc);
        live[name] = { port, proc };
      } catch (err) {
        fail(name, err);
      }
    }
    // Memory beside the plain Sluice: read at the same moments, after the same load.
    const pids = sc.rss && live.sluice && live.plain ? { sluice: live.sluice.proc.pid, plain: live.plain.proc.pid } : null;
    /** @type {import("./lib/report.mjs").RssSample[]} */
    const rss = [];
    /** @param {string} phase */
    const readRss = async (phase) => {
      if (pids) rss.push({ phase, ...(await rssPair(pids.sluice, pids.plain)) });
    };
    await readRss("start");
    /** @type {Record<number, { path: string, count: number }>} */
    const uris = {};
    if (sc.mode === "doh") {
      for (const name of Object.keys(live)) {
        const path = join(ctx.tmp, `uris-${name}.txt`);
        uris[live[name].port] = { path, count: await writeDohUris(file, live[name].port, path) };
      }
    }
    const base = { file, outFile: join(ctx.tmp, "dnsperf.out"), mode: sc.mode, cpus: LOAD_CPUS, uris };
    // Warm-up pass: fills the caches and checks that every server answers as the scenario expects.
    for (const name of Object.keys(live)) {
      try {
        const w = await load({ ...base, port: live[name].port, maxRuns: 1, seconds: sc.mode === "doh" ? undefined : 30, clients: 4, outstanding: 100, timeoutSeconds: 60 });
        // h2load sees HTTP statuses only: the DNS answers of a sample are checked on their own.
        if (name !== "ceiling") checkAnswers(sc, sc.mode === "doh" ? await dohRcodes(live[name].port, file, 50) : w.stats, name);
      } catch (err) {
        fail(name, err);
        delete live[name];
      }
    }
    // Steady state: 3 s at full load per server before anything counts. The C servers need none; Sluice and
    // the ceiling run in V8, whose optimising compiler is still at work after the 1 000-query pass above
    // (without this, Sluice's first measured round was ~40 % below its later ones).
    for (const name of Object.keys(live)) {
      try {
        await load({ ...base, port: live[name].port, seconds: WARM_SECONDS, ...SATURATION });
      } catch (err) {
        fail(name, err);
        delete live[name];
      }
    }
    const targets = Object.fromEntries(Object.entries(live).map(([n, v]) => [n, { port: v.port, pid: v.proc.pid }]));
    await readRss("steady state");
    const apis = sc.cacheMetrics ? Object.entries({ sluice: PORTS.api, plain: PORTS.plainApi }).filter(([n]) => live[n]) : [];
    const read = async () => Object.fromEntries(await Promise.all(apis.map(async ([n, port]) => [n, await cacheCounters(port)])));
    /** @type {Record<string, import("./lib/cache-metrics.mjs").CacheCounters>[]} */
    const counters = [await read()];
    // Records of the saturation rounds: at full load the writer gets only the CPU DNS leaves (SCHED_IDLE).
    const recorded = sc.recorder && live.sluice;
    const recBefore = recorded ? await recorderMetrics(PORTS.api) : null;
    /** @type {{ written: number, dropped: number } | null} */
    let atSaturation = null;
    Object.assign(result.servers, await measureServers(sc.name, targets, base, PLAN, log, {
      afterSaturation: async () => {
        counters.push(await read());
        await readRss("saturation");
        if (recBefore) {
          await waitDrained(PORTS.api, 60_000);
          const after = await recorderMetrics(PORTS.api);
          atSaturation = { written: after.written - recBefore.written, dropped: after.dropped - recBefore.dropped };
          const share = (100 * atSaturation.written) / Math.max(1, atSaturation.written + atSaturation.dropped);
          log(`  recorded       records  saturation rounds: ${atSaturation.written} written, ${atSaturation.dropped} dropped (${share.toFixed(1)} % recorded)`);
        }
      },
    }));
    await readRss("20k QPS");
    if (rss.length > 0) {
      result.rss = rss;
      log(`  ${sc.name.padEnd(14)} RSS ${rss.map((r) => `${r.phase}: ${r.sluiceMiB} vs ${r.plainMiB} MiB`).join(", ")}`);
    }
    if (apis.length > 0) {
      counters.push(await read());
      result.cache = Object.fromEntries(apis.map(([n]) => [n, { saturation: cachePhase(counters[0][n], counters[1][n]), latency: cachePhase(counters[1][n], counters[2][n]) }]));
      for (const [n, c] of Object.entries(result.cache)) {
        const rate = (/** @type {number | null} */ r) => (r === null ? "—" : `${(r * 100).toFixed(3)} %`);
        log(`  ${sc.name.padEnd(14)} ${n.padEnd(8)} hit rate: ${rate(c.saturation.hitRate)} at saturation, ${rate(c.latency.hitRate)} @20k (${c.latency.misses} misses, ${c.latency.prefetches} prefetches)`);
      }
    }
    // The provider's build time (from its "loaded" log line) and Sluice's memory once it has served the load.
    const loaded = sc.provider && live.sluice ? await providerLoaded(live.sluice.proc, sc.provider) : null;
    if (loaded) result.provider = loaded;
    if (recorded) result.recorder = { ...(await recorderAt20k(base, PLAN.latRounds)), saturation: atSaturation };
    if (sc.webhook && live.sluice) {
      const ports = { sluice: PORTS.sluice, plain: live.plain ? PORTS.plain : null, api: PORTS.api };
      result.webhook = await webhookAt20k(base, ports, { rounds: Math.max(2, PLAN.latRounds), seconds: PLAN.latSeconds, latency: LATENCY }, log);
    }
  } finally {
    for (const p of own) await stop(p);
  }
  if (result.provider) {
    // Baseline: the same configuration with an empty list, through the same warm-up and steady state.
    const empty = await startSluice(sc.config, PORTS.sluice, probe, { ...ctx, adguardRules: ctx.adguardEmpty });
    try {
      const base = { file, outFile: join(ctx.tmp, "dnsperf.out"), mode: sc.mode, cpus: LOAD_CPUS, uris: {}, port: PORTS.sluice };
      await load({ ...base, maxRuns: 1, seconds: 30, clients: 4, outstanding: 100, timeoutSeconds: 60 });
      await load({ ...base, seconds: WARM_SECONDS, ...SATURATION });
      result.provider.baselineRssMiB = Number(((await rssMiB(empty.pid)) ?? 0).toFixed(1));
    } finally {
      await stop(empty);
    }
    const p = result.provider;
    log(`  ${sc.provider}: ${p.rules.toLocaleString("en-US")} rules (${p.skipped} skipped) built in ${p.buildMs} ms; Sluice RSS ${p.rssMiB} MiB, ${p.baselineRssMiB} MiB with an empty list`);
  }
  return result;
}

/**
 * Reads a provider's "<type> loaded" line from Sluice's output (rules, skipped, ms) and Sluice's RSS now.
 * @param {Started} sluice @param {string} type
 * @returns {Promise<import("./lib/report.mjs").ProviderResult>}
 */
async function providerLoaded(sluice, type) {
  const line = sluice
    .output()
    .split("\n")
    .map((l) => {
      try {
        return /** @type {Record<string, unknown>} */ (JSON.parse(l));
      } catch {
        return null;
      }
    })
    .find((l) => l?.msg === `${type} loaded`);
  if (!line) throw new Error(`Sluice did not log "${type} loaded":\n${sluice.output()}`);
  return { type, rules: Number(line.rules), skipped: Number(line.skipped ?? 0), buildMs: Number(line.ms), rssMiB: Number(((await rssMiB(sluice.pid)) ?? 0).toFixed(1)), baselineRssMiB: 0 };
}

/**
 * Records written and dropped while Sluice (with a recorder) answers 20 000 QPS, after the queue of the
 * saturation rounds has drained: the target is no record dropped.
 * @param {{ file: string, outFile: string, mode: "udp" | "tcp" | "dot" | "doh", cpus: string | null }} base @param {number} rounds
 * @returns {Promise<import("./lib/report.mjs").RecorderAt20k>}
 */
async function recorderAt20k(base, rounds) {
  /** @type {import("./lib/report.mjs").RecorderAt20k} */
  const out = { rounds: [], drained: true };
  for (let i = 0; i < rounds; i++) {
    out.drained &&= await waitDrained(PORTS.api, 60_000);
    const before = await recorderMetrics(PORTS.api);
    const r = await dnsperf({ ...base, port: PORTS.sluice, seconds: PLAN.latSeconds, ...LATENCY });
    out.drained &&= await waitDrained(PORTS.api, 60_000);
    const after = await recorderMetrics(PORTS.api);
    const round = { sent: r.stats.sent, lost: r.stats.lost, written: after.written - before.written, dropped: after.dropped - before.dropped };
    out.rounds.push(round);
    log(`  recorded       records  @20k round ${i + 1}: ${round.sent} queries, ${round.lost} lost, ${round.written} records written, ${round.dropped} dropped`);
  }
  return out;
}

/**
 * Throws unless the answers have the scenario's rcode mix (exactly, when every query was answered; within
 * 5 points when some were lost, which is reported and also shows in the measurements).
 * @param {Scenario} sc @param {import("./lib/dnsperf.mjs").PerfStats} st @param {string} server
 */
function checkAnswers(sc, st, server) {
  const answered = st.completed;
  if (answered < st.sent / 2) throw new Error(`warm-up: only ${answered} of ${st.sent} queries answered`);
  const unexpected = Object.keys(st.rcodes).filter((r) => !(r in sc.expect));
  if (unexpected.length > 0) throw new Error(`warm-up: unexpected answers ${JSON.stringify(st.rcodes)}`);
  for (const [rcode, share] of Object.entries(sc.expect)) {
    const got = st.rcodes[rcode] ?? 0;
    const ok = answered === st.sent ? got === Math.round(st.sent * share) : Math.abs(got / answered - share) <= 0.05;
    if (!ok) throw new Error(`warm-up: expected ${Math.round(share * 100)}% ${rcode}, got ${JSON.stringify(st.rcodes)}`);
  }
  if (answered < st.sent) log(`  ${sc.name.padEnd(14)} ${server.padEnd(8)} warm-up: ${st.sent - answered} of ${st.sent} queries unanswered`);
}

/**
 * The memory check: distinct names once through a 100 000-entry cache at a fixed rate, VmRSS sampled each second.
 * @param {SluiceFiles} ctx
 * @returns {Promise<MemoryResult>}
 */
async function runMemory(ctx) {
  const scale = opts.quick ? 0.2 : 1;
  const names = MEMORY_NAMES * scale;
  const rate = 20_000;
  const file = join(ctx.tmp, "memory-names.txt");
  await writeMemoryQueries(file, names);
  const sluice = await startSluice("memory", PORTS.sluice, "m0.mem.test", ctx);
  try {
    const idle = (await rssMiB(sluice.pid)) ?? 0;
    /** @type {{ names: number, rssMiB: number }[]} */
    const samples = [];
    let sent = 0;
    const sample = async () => {
      const rss = await rssMiB(sluice.pid);
      if (rss !== null) samples.push({ names: Math.round(Math.min(sent, names)), rssMiB: Number(rss.toFixed(1)) });
    };
    const run = await dnsperf({
      port: PORTS.sluice, file, outFile: join(ctx.tmp, "dnsperf.out"), maxRuns: 1, qps: rate, statsInterval: 1, ...SATURATION, outstanding: 500, cpus: LOAD_CPUS,
      seconds: names / rate + 30,
      timeoutSeconds: names / rate + 60,
      onInterval: (qps) => {
        sent += qps;
        void sample();
      },
    });
    sent = names;
    await sample();
    /** @type {Record<string, number | null>} */
    const milestones = {};
    for (const m of [100_000, 250_000, 500_000, 750_000, 1_000_000]) {
      const at = samples.find((s) => s.names >= m * scale);
      milestones[String(m * scale)] = at ? at.rssMiB : null;
    }
    const maxMiB = Math.max(idle, ...samples.map((s) => s.rssMiB));
    // RSS follows the garbage collector's sawtooth, so "stopped growing" compares peaks: the highest RSS over the
    // second half of the names against the highest over the second quarter (the cache is full from 10% on).
    /** @param {number} from @param {number} to */
    const peak = (from, to) => Math.max(0, ...samples.filter((s) => s.names >= from * names && s.names < to * names).map((s) => s.rssMiB));
    const peakEarly = peak(0.25, 0.5);
    const peakLate = peak(0.5, 1.01);
    const flat = peakEarly > 0 && peakLate > 0 ? peakLate <= peakEarly * 1.1 : null;
    log(`  memory: ${Object.entries(milestones).map(([k, v]) => `${Number(k) / 1000}k ${v?.toFixed(0)} MiB`).join(", ")}, max ${maxMiB.toFixed(0)} MiB, ${run.stats.lost} lost`);
    return { names, cacheSize: 100_000, rate, samples, milestones, maxMiB, idleMiB: Number(idle.toFixed(1)), peakEarly, peakLate, flat, lost: run.stats.lost, scaled: opts.quick };
  } finally {
    await stop(sluice);
  }
}

const STATS_REPS = 20;
/** @type {{ route: string, group: "stats" | "page" | "filtered stats", target: boolean }[]} */
const STATS_ROUTES = [
  ...["plugins", "top_clients", "top_qnames", "qtype", "rcode", "latency", "timeseries", "timeseries?bucket=hour&buckets=24"].map((r) => ({ route: `stats/${r}`, group: /** @type {const} */ ("stats"), target: true })),
  { route: "records?limit=100", group: "page", target: true },
  { route: "records?qname=site7.example&limit=100", group: "page", target: true },
  { route: "records?status=error&limit=100", group: "page", target: true },
  { route: "records?rcode=NXDOMAIN&client_ip=192.168.0.1&limit=100", group: "page", target: false },
  { route: "records?qname=w19999.site&limit=100", group: "page", target: false },
  ...["top_qnames?client_ip=192.168.0.7", "rcode?qname=site1", "latency?status=has_response", "plugins?matcher_tag=ads", "timeseries?bucket=hour&buckets=24&qtype=AAAA"].map((r) => ({ route: `stats/${r}`, group: /** @type {const} */ ("filtered stats"), target: false })),
];

/**
 * The recorder's stats over 1 000 000 records: written through the writer thread, then every stats route and
 * some filtered pages timed over the API, and DNS at 20 000 QPS with and without stats requests running.
 * @param {SluiceFiles & { queries: Record<string, string> }} ctx
 * @returns {Promise<import("./lib/report.mjs").RecorderStatsResult>}
 */
async function runRecorderStats(ctx) {
  const records = opts.quick ? 200_000 : 1_000_000;
  const db = join(ctx.tmp, "recorder-stats.db");
  log(`recorder-stats: ${records.toLocaleString("en-US")} records through the recorder's writer, then the stats routes`);
  const gen = await generateRecords({ dist: join(ROOT, "dist"), path: db, count: records, spanMs: 86_400_000, log });
  log(`  recorder-stats: written in ${gen.seconds.toFixed(1)} s (${Math.round(gen.rate).toLocaleString("en-US")} records/s, ${gen.lost} lost)`);
  const sluice = await startSluice("recorder-stats", PORTS.sluice, PROBE_NAME.local, ctx, { RECORDER_DB: db });
  try {
    // Steady state first, as for the scenarios: V8 compiles the DNS path, SQLite warms its caches.
    await dnsperf({ port: PORTS.sluice, file: ctx.queries.local, outFile: join(ctx.tmp, "dnsperf.out"), mode: "udp", cpus: LOAD_CPUS, seconds: WARM_SECONDS, ...LATENCY });
    await waitDrained(PORTS.api, 60_000);
    const base = `http://127.0.0.1:${PORTS.api}/api/plugins/rec/`;
    /** @type {import("./lib/report.mjs").RouteTiming[]} */
    const routes = [];
    for (const r of STATS_ROUTES) {
      const t = await timeRoute(base + r.route, opts.quick ? 5 : STATS_REPS);
      routes.push({ ...r, ...t });
      log(`  recorder-stats ${r.route.padEnd(58)} p50 ${String(t.p50Ms).padStart(7)} ms  p95 ${String(t.p95Ms).padStart(7)} ms  (${t.status})`);
    }
    // DNS at 20 000 QPS, rounds alternating between an idle API and stats requests sent back to back.
    const file = ctx.queries.local;
    // The stats routes of the target, one after another (the filtered ones are timed above, for information).
    const busyRoutes = STATS_ROUTES.filter((r) => r.group === "stats").map((r) => base + r.route);
    /** @type {{ idle: import("./lib/report.mjs").Latency[], busy: import("./lib/report.mjs").Latency[] }} */
    const lat = { idle: [], busy: [] };
    // CPU time by priority over each kind of round: where the reads' work ran (contention-proof, unlike p99).
    const cpu = { idle: { main: 0, nice0: 0, niceOther: 0, nice19: 0 }, busy: { main: 0, nice0: 0, niceOther: 0, nice19: 0 } };
    let cpuKnown = true;
    let statsRequests = 0;
    // Records the writer dropped in each kind of round: the readers come before it on the shared core.
    const dropped = { idle: 0, busy: 0 };
    // Three rounds of each kind at least: on a shared machine one round's p99 is mostly its neighbours'.
    for (let round = 0; round < Math.max(3, PLAN.latRounds) * 2; round++) {
      const busy = round % 2 === 1;
      let running = true;
      const before = cpuByPriority(sluice.pid);
      const recBefore = await recorderMetrics(PORTS.api);
      const loop = (async () => {
        for (let i = 0; busy && running; i++) {
          await fetch(busyRoutes[i % busyRoutes.length]).then((r) => r.text());
          statsRequests++;
        }
      })();
      const r = await dnsperf({ port: PORTS.sluice, file, outFile: join(ctx.tmp, "dnsperf.out"), mode: "udp", cpus: LOAD_CPUS, seconds: PLAN.latSeconds, verbose: true, ...LATENCY });
      running = false;
      await loop;
      const after = cpuByPriority(sluice.pid);
      await waitDrained(PORTS.api, 60_000);
      dropped[busy ? "busy" : "idle"] += (await recorderMetrics(PORTS.api)).dropped - recBefore.dropped;
      if (before && after) for (const k of /** @type {const} */ (["main", "nice0", "niceOther", "nice19"])) cpu[busy ? "busy" : "idle"][k] += after[k] - before[k];
      else cpuKnown = false;
      const l = latencySummary(r.latencies, r.stats.lost);
      (busy ? lat.busy : lat.idle).push({ avgMs: l.avgMs, p99Ms: l.p99Ms, qps: r.stats.qps, lost: r.stats.lost, samples: l.samples });
      log(`  recorder-stats DNS @20k ${busy ? "with stats" : "idle API  "}: avg ${l.avgMs?.toFixed(3)} ms, p99 ${l.p99Ms === null ? ">1% lost" : `${l.p99Ms.toFixed(3)} ms`}, ${r.stats.lost} lost`);
    }
    /** @param {import("./lib/report.mjs").Latency[]} ls */
    const calmest = (ls) => ls.reduce((/** @type {import("./lib/report.mjs").Latency | null} */ m, l) => (m === null || (l.p99Ms !== null && (m.p99Ms === null || l.p99Ms < m.p99Ms)) ? l : m), null);
    const dbBytes = (await stat(db)).size;
    // Per stats request: what the busy rounds spent beyond the idle ones (same number and length of rounds).
    const perRequest = (/** @type {"main" | "nice0" | "niceOther" | "nice19"} */ k) => Number(((cpu.busy[k] - cpu.idle[k]) / Math.max(1, statsRequests)).toFixed(2));
    const cpuPerRequest = cpuKnown ? { main: perRequest("main"), nice0: perRequest("nice0"), niceOther: perRequest("niceOther"), nice19: perRequest("nice19") } : null;
    log(`  recorder-stats records dropped by the writer: ${dropped.idle} in the idle-API rounds, ${dropped.busy} in the rounds with stats`);
    const result = { records, generateSeconds: gen.seconds, dbBytes, routes, dns: { idle: calmest(lat.idle), busy: calmest(lat.busy), statsRequests, rounds: lat, cpuPerRequest, dropped } };
    for (const line of recorderStatsSummary(result)) log(`  ${line}`);
    return result;
  } finally {
    await stop(sluice);
  }
}

/** Batch sizes of postgres-writer: the target's (1 024) and one each side. */
const PG_BATCH_SIZES = [1024, 256, 4096];
const PG_ROUNDS = 2;

/**
 * The recorder's writer into PostgreSQL: a local server (fsync off, on the servers' core), then for each
 * batch size, in interleaved rounds, records through a new writer thread into a new schema (so every
 * round starts from an empty table and its indexes); the best round of each size counts. The CPU time the
 * writer's process and the server spent per record is reported too: other programs on the machine slow
 * the wall clock far more than they inflate it.
 * @returns {Promise<import("./lib/postgres.mjs").PostgresWriterResult>}
 */
async function runPostgresWriter() {
  const records = opts.quick ? 50_000 : 200_000;
  const pg = await startPostgres({ cpus: SERVER_CPUS });
  log(`postgres-writer: ${records.toLocaleString("en-US")} records per round through the recorder's writer thread into ${pg.version}, batch_size ${PG_BATCH_SIZES.join(", ")}, ${PG_ROUNDS} rounds`);
  try {
    /** @type {import("./lib/postgres.mjs").PostgresWriterRun[]} */
    const runs = [];
    for (let round = 0; round < PG_ROUNDS; round++) {
      for (const batchSize of PG_BATCH_SIZES) {
        const serverCpu = () => serverCpuSeconds(pg.server.pid);
        const r = await postgresWriterRate({ dist: join(ROOT, "dist"), url: pg.url, schema: `bench_${batchSize}_${round}`, count: records, batchSize, serverCpu, log });
        runs.push(r);
        const us = (/** @type {number} */ sec) => ((sec / r.records) * 1e6).toFixed(1);
        log(
          `  postgres-writer batch_size ${String(batchSize).padStart(4)}: ${Math.round(r.rate).toLocaleString("en-US").padStart(7)} records/s (${r.transactions} transactions in ${r.seconds.toFixed(2)} s, ${r.lost} lost); ` +
            `CPU per record: writer ${us(r.writerCpuSeconds)} µs, PostgreSQL ${us(r.serverCpuSeconds)} µs`,
        );
      }
    }
    return { version: pg.version, runs };
  } finally {
    await pg.close();
  }
}

async function main() {
  const began = Date.now();
  const cpuAtStart = cpuReading();
  const selected = SCENARIOS.filter((s) => !opts.only || opts.only.includes(s.name));
  const withMemory = !opts.only || opts.only.includes("memory");
  const withStats = !opts.only || opts.only.includes("recorder-stats");
  // Without --only it runs where PostgreSQL is installed; asked for by name, it needs it.
  const withPgWriter = opts.only ? opts.only.includes("postgres-writer") : postgresBin() !== null;
  const withCluster = opts.only?.includes("cluster") ?? false;
  const withWorkers = !opts.only || opts.only.includes("workers");
  // postgres-writer alone listens on no port (its server on a unix socket in the temp directory).
  const listens = selected.length > 0 || withMemory || withStats || withCluster || withWorkers;
  for (const [name, port] of Object.entries(PORTS)) {
    if (listens && !(await portFree(port))) throw new Error(`port ${port} (for ${name}) is in use on 127.0.0.1; stop whatever holds it`);
  }
  const tmp = await mkdtemp(join(os.tmpdir(), "sluice-bench-"));
  onInterrupt(() => rm(tmp, { recursive: true, force: true }));
  try {
    const data = await prepareData(BENCH, tmp);
    const ctx = { tmp, rules: data.rules, clients: data.clients, adguardRules: data.adguardRules, adguardEmpty: data.adguardEmpty, cert: data.cert, queries: data.queries, refData: data.refData };
    const names = [...selected.map((s) => s.name), ...(withMemory ? ["memory"] : []), ...(withStats ? ["recorder-stats"] : []), ...(withPgWriter ? ["postgres-writer"] : []), ...(withWorkers ? ["workers"] : [])];
    log(`sluice bench: ${names.join(", ")}${opts.quick ? " (quick)" : ""}; ` +
      `${machine.cpuModel}, ${machine.cores} cores, Node ${machine.node}${pin ? "; servers on CPU 1, dnsperf on CPU 0" : ""}`);
    const ceiling = selected.length > 0 ? await startServer("ceiling", process.execPath, [join(BENCH, "ceiling.mjs"), String(PORTS.ceiling)], PORTS.ceiling, "ceiling.test") : /** @type {Started} */ (/** @type {unknown} */ (null));
    if (withCluster || withWorkers || selected.some((s) => s.ref === "cache" || s.ref === "forward")) {
      const conf = await unboundConfig({ name: "upstream", port: PORTS.upstream, dir: tmp, mode: "local" });
      await startServer("upstream", tools.unbound, ["-c", conf], PORTS.upstream, PROBE_NAME.local, { cpus: LOAD_CPUS });
    }
    /** @type {ScenarioResult[]} */
    const results = [];
    for (const sc of selected) {
      log(`${sc.name}: ${sc.purpose}`);
      results.push(await runScenario(sc, { ...ctx, ceiling }));
    }
    const cluster = withCluster
      ? (log("cluster: three instances behind dnsdist (chashed, PROXY protocol) with a Redis cache level; cache hits through dnsdist, and Redis-hit latency"),
        await runCluster({ tmp, cli, file: ctx.queries.local, probe: PROBE_NAME.local, upstreamPort: PORTS.upstream, serverCpus: SERVER_CPUS, loadCpus: LOAD_CPUS, satRounds: PLAN.satRounds, satSeconds: PLAN.satSeconds, saturation: SATURATION, log }))
      : null;
    const workers = withWorkers
      ? (log("workers: cache-hot with workers: 1 and workers: 2 (CPU per answered query, pinned; saturation unpinned)"),
        await runWorkers({
          // Through the launcher, as startSluice does (its node options are the workers' too).
          startSluice: (env, cpus) =>
            startServer("sluice", join(ROOT, "bin", "sluice"), ["start", "-c", join(BENCH, "configs", "workers.yaml"), "-d", tmp], PORTS.sluice, PROBE_NAME.local, {
              env: { ...process.env, PORT: String(PORTS.sluice), UPSTREAM: `127.0.0.1:${PORTS.upstream}`, SLUICE_NODE: process.execPath, ...env },
              cwd: tmp,
              cpus,
            }),
          stop,
          port: PORTS.sluice,
          file: ctx.queries.local,
          tmp,
          loadCpus: LOAD_CPUS,
          seconds: PLAN.latSeconds,
          rounds: Math.max(2, PLAN.latRounds),
          warmSeconds: WARM_SECONDS,
          latency: LATENCY,
          saturation: SATURATION,
          log,
        }))
      : null;
    await stopAll();
    const memory = withMemory ? (log(`memory: ${(MEMORY_NAMES * (opts.quick ? 0.2 : 1)).toLocaleString("en-US")} names through a 100 000-entry cache`), await runMemory(ctx)) : null;
    const stats = withStats ? await runRecorderStats(ctx) : null;
    const pgWriter = withPgWriter ? await runPostgresWriter() : null;
    await report(results, memory, stats, pgWriter, began, cpuShares(cpuAtStart, cpuReading()), cluster, workers);
    const failed = results.some((r) => Object.values(r.servers).some((s) => s.error));
    if (failed) process.exitCode = 1;
  } finally {
    await stopAll();
    await rm(tmp, { recursive: true, force: true });
  }
}

/**
 * Prints the tables and writes the JSON (and the README section with --record).
 * @param {ScenarioResult[]} results @param {MemoryResult | null} memory @param {import("./lib/report.mjs").RecorderStatsResult | null} stats
 * @param {import("./lib/postgres.mjs").PostgresWriterResult | null} pgWriter
 * @param {number} began @param {{ otherProcesses: number, steal: number }} interference
 * @param {import("./lib/cluster.mjs").ClusterResult | null} cluster
 * @param {import("./lib/workers.mjs").WorkersResult | null} workers
 */
async function report(results, memory, stats, pgWriter, began, interference, cluster, workers) {
  const targets = judgeTargets(results, memory, stats);
  targets.push(postgresWriterTarget(pgWriter));
  const seconds = Math.round((Date.now() - began) / 1000);
  const when = new Date(began).toISOString();
  const flags = {
    saturation: `dnsperf -c ${SATURATION.clients} -q ${SATURATION.outstanding} -l ${PLAN.satSeconds} -t 2, best of ${PLAN.satRounds} round(s)`,
    latency: `dnsperf -Q ${LATENCY.qps} -c ${LATENCY.clients} -q ${LATENCY.outstanding} -l ${PLAN.latSeconds} -t 2 -v, lower p99 of ${PLAN.latRounds} round(s)`,
    pinning: pin ? "server under test on CPU 1 (taskset); dnsperf and the forward upstream on CPU 0" : "none",
  };
  const sections = [
    `Run ${when} (${opts.quick ? "--quick, " : ""}${Math.floor(seconds / 60)} min ${seconds % 60} s) on ${machine.cpuModel}, ${machine.cores} cores, ` +
      `Node ${machine.node}, ${machine.kernel}; dnsperf ${machine.dnsperf}, unbound ${machine.unbound}, ${machine.dnsmasq}, ${machine.h2load}; ` +
      `load average at start ${machine.loadAverageAtStart.join(" ")}, at the end ${os.loadavg().map((l) => l.toFixed(2)).join(" ")}; ` +
      `during the run other processes used ${Math.round(interference.otherProcesses * 100)}% of the machine's CPU time and the hypervisor stole ${Math.round(interference.steal * 100)}%.`,
    `Saturation: \`${flags.saturation}\`. Latency: \`${flags.latency}\`. Pinning: ${flags.pinning}.`,
  ];
  if (results.length > 0) sections.push(purposes(results), resultsTable(results));
  const tail = tailLine(results);
  if (tail) sections.push(tail);
  if (results.some((r) => r.cache)) sections.push("Cache hit rates (each Sluice's cache metrics over the saturation rounds and over the 20 000 QPS rounds):", cacheTable(results));
  if (results.some((r) => r.provider)) sections.push(providerLines(results));
  if (results.some((r) => r.rss)) sections.push(rssLines(results));
  if (memory) sections.push(`Memory (${memory.names.toLocaleString("en-US")} distinct names at ${memory.rate.toLocaleString("en-US")} QPS through \`cache\` size ${memory.cacheSize.toLocaleString("en-US")}):`, memoryTable(memory));
  if (stats)
    sections.push(
      `Query recorder over ${stats.records.toLocaleString("en-US")} records (${(stats.dbBytes / 2 ** 20).toFixed(0)} MiB, written through the writer thread in ${stats.generateSeconds.toFixed(0)} s), ${STATS_REPS} requests per route after 2 that do not count:`,
      recorderStatsTable(stats),
    );
  if (pgWriter) {
    const best = bestPostgresRun(pgWriter, 1024);
    sections.push(
      `PostgreSQL writer (${pgWriter.version}, local, unix socket, fsync off${pin ? ", on CPU 1" : ""}): records/s through the recorder's writer thread (COPY), one batch in flight, ${PG_ROUNDS} rounds per batch size` +
        `${best ? `; at batch_size 1 024: ${Math.round(best.rate).toLocaleString("en-US")} records/s` : ""}:`,
      postgresWriterTable(pgWriter),
    );
  }
  if (cluster) sections.push(clusterLines(cluster));
  if (workers) sections.push(workersLines(workers));
  sections.push(targetsTable(targets));
  const text = sections.join("\n\n");
  console.log(`\n${text}\n`);
  const json = { startedAt: when, seconds, quick: opts.quick, only: opts.only, machine, interference, flags, scenarios: results, memory, recorderStats: stats, postgresWriter: pgWriter, cluster, workers, targets };
  await mkdir(join(BENCH, "results"), { recursive: true });
  const body = JSON.stringify(json, null, 2) + "\n";
  await writeFile(join(BENCH, "results", `${when.replace(/:/g, "-")}.json`), body);
  await writeFile(join(BENCH, "results", "latest.json"), body);
  if (opts.record) {
    await recordReadme(join(BENCH, "README.md"), text);
    console.log("bench/README.md updated");
  }
}

main().catch(async (err) => {
  console.error(err instanceof Error ? err.message : err);
  await stopAll();
  process.exit(1);
});
