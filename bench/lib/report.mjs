// @ts-check
// Turns measurements into the results table, the targets with PASS/MISS, and the README section.
import { readFile, writeFile } from "node:fs/promises";

/**
 * @typedef {object} Latency
 * @property {number | null} avgMs
 * @property {number | null} p99Ms
 * @property {number | null} [p99LaterMs]  p99 of the answers after the round's first 100 ms (each round starts from idle)
 * @property {number} qps       achieved rate (the target is 20 000)
 * @property {number} lost
 * @property {number} samples
 */

/**
 * @typedef {object} ServerResult
 * @property {number} qps          best saturation round
 * @property {number[]} rounds     QPS of every saturation round
 * @property {number} lost         lost in the saturation rounds
 * @property {number | null} cpu   the server's CPU use during saturation (1 = one core)
 * @property {Latency | null} latency     the latency round with the lowest p99 (its `lost` is over all rounds)
 * @property {Latency[]} [latencyRounds]
 * @property {string} [error]  the server could not be measured
 * @property {string} [note]   a measurement that failed (e.g. dnsperf gave up on the latency run)
 */

/**
 * @typedef {object} ProviderResult
 * @property {string} type
 * @property {number} rules          rules in force after the build
 * @property {number} skipped        unsupported lines skipped
 * @property {number} buildMs        the build at start, from the provider's "loaded" log line
 * @property {number} rssMiB         Sluice's RSS after the warm-up pass and the steady-state run
 * @property {number} baselineRssMiB the same, with an empty list
 */

/**
 * @typedef {object} ScenarioResult
 * @property {string} name
 * @property {string} purpose
 * @property {"udp" | "tcp" | "dot" | "doh"} transport
 * @property {string} queries
 * @property {Record<string, ServerResult>} servers
 * @property {ProviderResult} [provider]
 * @property {RecorderAt20k} [recorder]  records written and dropped at 20 000 QPS (scenarios with a recorder)
 * @property {import("./webhook.mjs").WebhookRound[]} [webhook]  20 000 QPS rounds with and without the webhook (http-request)
 * @property {Record<string, string>} [labels]  names of servers in this scenario's rows (the second Sluice: what it lacks)
 * @property {import("./cache-metrics.mjs").CacheResult} [cache]  cache hit rates per server and phase (prefetch)
 * @property {RssSample[]} [rss]  Sluice's RSS beside the plain Sluice's at the same moments (clients)
 */

/**
 * @typedef {object} RssSample
 * @property {string} phase       when: "start", "steady state", "saturation", "20k QPS"
 * @property {number} sluiceMiB
 * @property {number} plainMiB
 */

/**
 * @typedef {object} RecorderAt20k
 * @property {{ sent: number, lost: number, written: number, dropped: number }[]} rounds
 * @property {boolean} drained  the recorder's queue emptied after each round (within 60 s)
 * @property {{ written: number, dropped: number } | null} [saturation]  records of the saturation rounds
 */

/**
 * @typedef {object} RouteTiming
 * @property {string} route
 * @property {"stats" | "page" | "filtered stats"} group
 * @property {boolean} target  counted for the ≤ 300 ms target
 * @property {number} p50Ms
 * @property {number} p95Ms
 * @property {number} maxMs
 * @property {number} status
 * @property {number} bytes
 */

/**
 * @typedef {object} RecorderStatsResult
 * @property {number} records
 * @property {number} generateSeconds  writing them through the writer thread
 * @property {number} dbBytes
 * @property {RouteTiming[]} routes
 * @property {{ idle: Latency | null, busy: Latency | null, statsRequests: number, rounds?: { idle: Latency[], busy: Latency[] }, cpuPerRequest?: CpuPerRequest | null, dropped?: { idle: number, busy: number } }} dns
 *   20 000 QPS without and with stats requests running (lower p99 of the rounds; every round in `rounds`)
 */

/**
 * CPU ms per stats request, by who spent it (busy rounds minus idle rounds, from /proc schedstat): Sluice's
 * main thread, its other threads at nice 0 (V8's helpers), at other nice values (the writer, 10), and
 * threads at nice 19 anywhere (the readers). `nice0` is work of the reads at DNS's own priority.
 * @typedef {{ main: number, nice0: number, niceOther: number, nice19: number }} CpuPerRequest
 */

/** Stats targets: every stats route's p95 over 1 000 000 records, and DNS p99 with stats / without. */
export const STATS_P95_TARGET_MS = 300;
export const STATS_P99_RATIO_TARGET = 1.2;

/** DNS p99 with stats / without, of the calmest round of each kind (null: a kind not run or >1 % lost). @param {RecorderStatsResult} r */
export function statsP99Ratio(r) {
  const { idle, busy } = r.dns;
  return idle?.p99Ms && busy?.p99Ms ? busy.p99Ms / idle.p99Ms : null;
}

/** The slowest counted route by p95. @param {RecorderStatsResult} r */
function worstRoute(r) {
  const counted = r.routes.filter((x) => x.target);
  return counted.reduce((m, x) => (x.p95Ms > m.p95Ms ? x : m), counted[0]);
}

/**
 * The recorder-stats verdict in a few lines: the p99 ratio and the worst stats p95 against their targets,
 * the ratio of each pair of rounds (how much the machine's other load moved it), and where the reads' CPU went.
 * @param {RecorderStatsResult} r
 */
export function recorderStatsSummary(r) {
  const ratio = statsP99Ratio(r);
  const worst = worstRoute(r);
  const rounds = r.dns.rounds;
  const pairs = rounds ? rounds.busy.map((b, i) => (b.p99Ms !== null && rounds.idle[i]?.p99Ms ? (b.p99Ms / rounds.idle[i].p99Ms).toFixed(2) : "—")) : [];
  const c = r.dns.cpuPerRequest;
  return [
    `DNS p99 with stats / without: ${ratio === null ? "—" : `${ratio.toFixed(2)} ×`} (target ≤ ${STATS_P99_RATIO_TARGET} ×: ${ratio !== null && ratio <= STATS_P99_RATIO_TARGET ? "PASS" : "MISS"}; calmest round of each kind${pairs.length > 0 ? `; round by round ${pairs.join(", ")}` : ""})`,
    `Stats p95, worst route: ${worst ? `${worst.p95Ms} ms (${worst.route})` : "—"} (target ≤ ${STATS_P95_TARGET_MS} ms: ${worst && r.routes.filter((x) => x.target).every((x) => x.p95Ms <= STATS_P95_TARGET_MS && x.status === 200) ? "PASS" : "MISS"})`,
    c
      ? `CPU per stats request (busy rounds minus idle ones): readers at nice 19 ${fmt(c.nice19, 1)} ms; at DNS's priority: Sluice's other threads at nice 0 ${fmt(c.nice0, 1)} ms, its main thread ${fmt(c.main, 1)} ms (with DNS's own variation); writer (nice 10) ${fmt(c.niceOther, 1)} ms`
      : "CPU per stats request: — (no /proc)",
  ];
}

/**
 * @typedef {object} MemoryResult
 * @property {number} names
 * @property {number} cacheSize
 * @property {number} rate
 * @property {{ names: number, rssMiB: number }[]} samples
 * @property {Record<string, number | null>} milestones  names → RSS MiB
 * @property {number} maxMiB
 * @property {number} idleMiB
 * @property {number} peakEarly  highest RSS (MiB) while the 2nd quarter of the names went through
 * @property {number} peakLate   highest RSS (MiB) over the 2nd half
 * @property {boolean | null} flat  peakLate ≤ 1.10 × peakEarly
 * @property {number} lost
 * @property {boolean} scaled    quick mode: a fifth of the names
 */

export const SERVER_ORDER = ["sluice", "plain", "ceiling", "unbound", "dnsmasq"];
const LABEL = /** @type {Record<string, string>} */ ({ sluice: "Sluice", plain: "Sluice, no recorder", ceiling: "ceiling", unbound: "unbound", dnsmasq: "dnsmasq" });

const TRANSPORT_LABEL = /** @type {Record<string, string>} */ ({ tcp: " (TCP)", dot: " (DoT)", doh: " (DoH)" });

/** @param {number | null | undefined} v @param {number} [digits] */
const fmt = (v, digits = 0) => (v === null || v === undefined || Number.isNaN(v) ? "—" : v.toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: digits }));

/** @param {number[]} xs */
const median = (xs) => {
  if (xs.length === 0) return null;
  const sorted = [...xs].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
};

/** @param {ScenarioResult} s @param {string} other */
export function ratio(s, other) {
  const a = s.servers.sluice;
  const b = s.servers[other];
  if (!a || !b || a.error || b.error || !(b.qps > 0)) return null;
  return a.qps / b.qps;
}

/**
 * The results table (markdown).
 * @param {ScenarioResult[]} scenarios
 */
export function resultsTable(scenarios) {
  const lines = [
    "| scenario | server | QPS (best) | QPS (median) | lost | server CPU | avg ms @20k | p99 ms @20k | lost @20k | Sluice ÷ server |",
    "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
  ];
  for (const s of scenarios) {
    for (const name of SERVER_ORDER) {
      const r = s.servers[name];
      if (!r) continue;
      const label = `${s.name}${TRANSPORT_LABEL[s.transport] ?? ""}`;
      const server = s.labels?.[name] ?? LABEL[name];
      if (r.error) {
        lines.push(`| ${label} | ${server} | failed: ${r.error.split("\n")[0].slice(0, 80)} | | | | | | | |`);
        continue;
      }
      const l = r.latency;
      const short = l && l.qps < 19_000 ? ` (${fmt(l.qps)} QPS)` : "";
      const rt = name === "sluice" ? "—" : fmt(ratio(s, name), 2);
      lines.push(
        `| ${label} | ${server} | ${fmt(r.qps)} | ${fmt(median(r.rounds))} | ${fmt(r.lost)} | ${r.cpu === null ? "—" : `${Math.round(r.cpu * 100)}%`} | ` +
          `${fmt(l?.avgMs, 3)}${short} | ${l ? (l.p99Ms === null ? ">1% lost" : fmt(l.p99Ms, 3)) : "—"} | ${fmt(l?.lost)} | ${rt} |`,
      );
    }
  }
  const notes = scenarios.flatMap((s) => SERVER_ORDER.filter((n) => s.servers[n]?.note).map((n) => `- ${s.name} / ${s.labels?.[n] ?? LABEL[n]}: ${s.servers[n].note}`));
  if (notes.length > 0) lines.push("", "Measurements that failed:", ...notes);
  return lines.join("\n");
}

/** One line per measured provider (build time, memory against an empty list). @param {ScenarioResult[]} scenarios */
export function providerLines(scenarios) {
  return scenarios
    .filter((s) => s.provider)
    .map((s) => {
      const p = /** @type {ProviderResult} */ (s.provider);
      return `Provider (${s.name}): \`${p.type}\` with ${fmt(p.rules)} rules in force (${fmt(p.skipped)} unsupported lines skipped) built in ${fmt(p.buildMs)} ms at start; Sluice's RSS after the warm-up and steady-state load was ${fmt(p.rssMiB, 1)} MiB, ${fmt(p.baselineRssMiB, 1)} MiB with an empty list.`;
    })
    .join("\n\n");
}

/** @param {ScenarioResult[]} scenarios */
export function purposes(scenarios) {
  return scenarios.map((s) => `- **${s.name}** — ${s.purpose}`).join("\n");
}

/**
 * @typedef {object} Target
 * @property {string} target
 * @property {string} measured
 * @property {"PASS" | "MISS" | "not run"} result
 */

/**
 * The targets from bench/README.md, judged on this run.
 * @param {ScenarioResult[]} scenarios @param {MemoryResult | null} memory @param {RecorderStatsResult | null} [stats]
 * @returns {Target[]}
 */
export function judgeTargets(scenarios, memory, stats = null) {
  const by = Object.fromEntries(scenarios.map((s) => [s.name, s]));
  /** @type {Target[]} */
  const out = [];
  /** @param {string} name @param {string} other @param {number} min @param {boolean} zeroLost @param {string} [otherLabel] what `other` is called in the target */
  const qpsTarget = (name, other, min, zeroLost, otherLabel = other) => {
    const s = by[name];
    const target = `${name}: Sluice ≥ ${min.toFixed(2)} × ${otherLabel} QPS${zeroLost ? ", 0 lost" : ""}`;
    const r = s ? ratio(s, other) : null;
    if (!s || r === null) return out.push({ target, measured: "—", result: "not run" });
    const lost = s.servers.sluice.lost;
    const ok = r >= min && (!zeroLost || lost === 0);
    out.push({ target, measured: `${r.toFixed(3)} ×${zeroLost ? `, ${lost} lost` : ""}`, result: ok ? "PASS" : "MISS" });
  };
  qpsTarget("cache-hot", "ceiling", 0.8, true);
  qpsTarget("local", "ceiling", 0.8, true);
  qpsTarget("domain-set", "ceiling", 0.7, false);
  qpsTarget("sequence-heavy", "ceiling", 0.7, false);
  qpsTarget("forward", "dnsmasq", 0.8, false);
  qpsTarget("adguard", "ceiling", 0.65, false);
  {
    const target = "adguard: the 150 000-rule list builds in < 1.5 s and adds < 60 MB RSS";
    const p = by.adguard?.provider;
    if (!p || !(p.baselineRssMiB > 0)) out.push({ target, measured: "—", result: "not run" });
    else {
      const addedMB = ((p.rssMiB - p.baselineRssMiB) * 2 ** 20) / 1e6;
      out.push({ target, measured: `${p.buildMs} ms, +${addedMB.toFixed(0)} MB (${p.rssMiB} vs ${p.baselineRssMiB} MiB)`, result: p.buildMs < 1500 && addedMB < 60 ? "PASS" : "MISS" });
    }
  }
  qpsTarget("tls", "unbound", 0.5, false);
  qpsTarget("doh", "unbound", 0.5, false);
  {
    const target = "recorded: Sluice ≥ 0.75 × Sluice without the recorder (cache-hot) QPS, 0 lost; 0 dropped records and 0 lost queries at 20 000 QPS (calmest round)";
    const s = by.recorded;
    const r = s ? ratio(s, "plain") : null;
    const rounds = s?.recorder?.rounds ?? [];
    if (!s || r === null || rounds.length === 0) out.push({ target, measured: "—", result: "not run" });
    else {
      // As for latency, the calmest round counts: another process taking the writer's CPU only ever adds drops.
      const best = rounds.reduce((m, x) => (x.dropped + x.lost < m.dropped + m.lost ? x : m), rounds[0]);
      const lost = s.servers.sluice.lost;
      const all = rounds.map((x) => `${x.dropped}`).join("/");
      const sat = s.recorder?.saturation;
      const satShare = sat ? `; at saturation ${((100 * sat.written) / Math.max(1, sat.written + sat.dropped)).toFixed(1)} % of queries recorded` : "";
      out.push({ target, measured: `${r.toFixed(3)} ×, ${lost} lost; @20k: ${best.dropped} dropped, ${best.lost} lost (dropped per round ${all})${satShare}`, result: r >= 0.75 && lost === 0 && best.dropped === 0 && best.lost === 0 ? "PASS" : "MISS" });
    }
  }
  {
    const target = "http-request: at 20 000 QPS, Sluice with an asynchronous webhook per query answers ≥ 0.90 × the rate of Sluice without it (cache-hot), best round";
    const s = by["http-request"];
    const rounds = (s?.webhook ?? []).filter((x) => x.plain !== null && x.plain.qps > 0);
    if (!s || rounds.length === 0) out.push({ target, measured: "—", result: "not run" });
    else {
      // As for latency, the best round counts: another process on the machine only ever lowers a round.
      const share = (/** @type {import("./webhook.mjs").WebhookRound} */ x) => x.sluice.qps / (x.plain?.qps ?? 1);
      const best = rounds.reduce((m, x) => (share(x) > share(m) ? x : m), rounds[0]);
      const sat = ratio(s, "plain");
      const measured =
        `${share(best).toFixed(3)} × (${fmt(best.sluice.qps)} vs ${fmt(best.plain?.qps)} QPS, ${fmt(best.sluice.lost)} lost; ${fmt(best.dispatched)} webhooks sent, ${fmt(best.dropped)} dropped, ${fmt(best.errors)} failed); ` +
        `per round ${rounds.map((x) => share(x).toFixed(3)).join("/")}; saturation ${sat === null ? "—" : `${sat.toFixed(3)} ×`}`;
      out.push({ target, measured, result: share(best) >= 0.9 ? "PASS" : "MISS" });
    }
  }
  {
    const s = by.clients;
    qpsTarget("clients", "plain", 0.9, false, "Sluice without clients (cache-hot)");
    const target = "clients: ≤ 5 MB more RSS than Sluice without clients (cache-hot), peaks under the same load";
    const d = s?.rss ? rssDelta(s.rss) : null;
    if (!d) out.push({ target, measured: "—", result: "not run" });
    else out.push({ target, measured: `${d.deltaMB >= 0 ? "+" : ""}${d.deltaMB.toFixed(1)} MB (${fmt(d.sluiceMiB, 1)} vs ${fmt(d.plainMiB, 1)} MiB${d.startMiB.length === 2 ? `; at start ${fmt(d.startMiB[0], 1)} vs ${fmt(d.startMiB[1], 1)} MiB` : ""})`, result: d.deltaMB <= 5 ? "PASS" : "MISS" });
  }
  if (stats) {
    const counted = stats.routes.filter((x) => x.target);
    const worst = worstRoute(stats);
    out.push({ target: `recorder-stats: every stats route and a filtered page p95 ≤ ${STATS_P95_TARGET_MS} ms over ${stats.records.toLocaleString("en-US")} records`, measured: `worst ${worst.route}: ${worst.p95Ms} ms`, result: counted.every((x) => x.p95Ms <= STATS_P95_TARGET_MS && x.status === 200) ? "PASS" : "MISS" });
    const { idle, busy } = stats.dns;
    const target = `recorder-stats: DNS p99 at 20 000 QPS while stats queries run ≤ ${STATS_P99_RATIO_TARGET} × without`;
    const ratio = statsP99Ratio(stats);
    if (!idle?.p99Ms || !busy) out.push({ target, measured: "—", result: "not run" });
    else out.push({ target, measured: busy.p99Ms === null || ratio === null ? `>1% lost vs ${idle.p99Ms.toFixed(3)} ms` : `${busy.p99Ms.toFixed(3)} ms vs ${idle.p99Ms.toFixed(3)} ms (${ratio.toFixed(2)} ×, ${stats.dns.statsRequests} stats requests)`, result: ratio !== null && ratio <= STATS_P99_RATIO_TARGET ? "PASS" : "MISS" });
  }
  {
    const target = "cache-hot: Sluice p99 @20k QPS ≤ 2 × unbound's";
    const s = by["cache-hot"];
    const mine = s?.servers.sluice?.latency;
    const theirs = s?.servers.unbound?.latency;
    const floor = s?.servers.ceiling?.latency?.p99Ms;
    const ceilingNote = floor ? `; ceiling ${floor.toFixed(3)} ms` : "";
    if (!mine || !theirs || theirs.p99Ms === null) out.push({ target, measured: "—", result: "not run" });
    else if (mine.p99Ms === null) out.push({ target, measured: `>1% lost vs ${theirs.p99Ms.toFixed(3)} ms`, result: "MISS" });
    else
      out.push({
        target,
        measured: `${mine.p99Ms.toFixed(3)} ms vs ${theirs.p99Ms.toFixed(3)} ms (${(mine.p99Ms / theirs.p99Ms).toFixed(2)} ×${ceilingNote})`,
        result: mine.p99Ms <= 2 * theirs.p99Ms ? "PASS" : "MISS",
      });
  }
  if (!memory) {
    out.push({ target: "memory: max RSS < 300 MB", measured: "—", result: "not run" });
    out.push({ target: "memory: flat once the cache is full", measured: "—", result: "not run" });
  } else {
    const maxMB = (memory.maxMiB * 2 ** 20) / 1e6;
    out.push({ target: "memory: max RSS < 300 MB", measured: `${maxMB.toFixed(0)} MB`, result: memory.scaled ? "not run" : maxMB < 300 ? "PASS" : "MISS" });
    out.push({
      target: "memory: flat once the cache is full (peak RSS over the 2nd half of the names ≤ 1.10 × peak over the 2nd quarter)",
      measured: memory.peakEarly > 0 ? `${memory.peakLate.toFixed(0)} MiB vs ${memory.peakEarly.toFixed(0)} MiB (${(memory.peakLate / memory.peakEarly).toFixed(2)} ×)` : "—",
      result: memory.scaled || memory.flat === null ? "not run" : memory.flat ? "PASS" : "MISS",
    });
  }
  return out;
}

/**
 * Sluice's and the plain Sluice's peak RSS over the readings taken under load (every phase after "start"), and
 * how many MB (10^6 bytes) more Sluice's is. @param {RssSample[]} samples
 */
export function rssDelta(samples) {
  const loaded = samples.filter((x) => x.phase !== "start");
  if (loaded.length === 0) return null;
  const sluiceMiB = Math.max(...loaded.map((x) => x.sluiceMiB));
  const plainMiB = Math.max(...loaded.map((x) => x.plainMiB));
  const start = samples.find((x) => x.phase === "start");
  return { sluiceMiB, plainMiB, deltaMB: ((sluiceMiB - plainMiB) * 2 ** 20) / 1e6, startMiB: start ? [start.sluiceMiB, start.plainMiB] : [] };
}

/**
 * The cache-hot tail against its target: Sluice's p99 at 20 000 QPS over unbound's (the calmer round of each,
 * as in the table), then every round's p99, since a neighbour's burst can decide one round. Null without cache-hot.
 * @param {ScenarioResult[]} scenarios
 */
export function tailLine(scenarios) {
  const s = scenarios.find((x) => x.name === "cache-hot");
  if (!s) return null;
  /** @param {string} name */
  const p99 = (name) => s.servers[name]?.latency?.p99Ms ?? null;
  /** @param {string} name */
  const rounds = (name) => (s.servers[name]?.latencyRounds ?? []).map((l) => (l.p99Ms === null ? ">1% lost" : fmt(l.p99Ms, 3))).join(", ") || "—";
  /** @param {string} name */
  const later = (name) => (s.servers[name]?.latencyRounds ?? []).map((l) => (l.p99LaterMs === null || l.p99LaterMs === undefined ? "—" : fmt(l.p99LaterMs, 3))).join(", ") || "—";
  const mine = p99("sluice");
  const theirs = p99("unbound");
  const ratio = mine !== null && theirs !== null ? mine / theirs : null;
  const verdict = ratio === null ? "not judged" : ratio <= 2 ? "PASS" : "MISS";
  return (
    `**cache-hot tail** at 20 000 QPS: Sluice p99 ${fmt(mine, 3)} ms ÷ unbound's ${fmt(theirs, 3)} ms = **${fmt(ratio, 2)} ×** ` +
    `(target ≤ 2 ×: ${verdict}); the ceiling's ${fmt(p99("ceiling"), 3)} ms. p99 of every round (ms): Sluice ${rounds("sluice")}; ` +
    `unbound ${rounds("unbound")}; ceiling ${rounds("ceiling")}. The same after each round's first 100 ms (a round starts ` +
    `from idle): Sluice ${later("sluice")}; unbound ${later("unbound")}; ceiling ${later("ceiling")}.`
  );
}

/** One line per scenario whose RSS was read beside the plain Sluice's. @param {ScenarioResult[]} scenarios */
export function rssLines(scenarios) {
  return scenarios
    .filter((s) => s.rss && s.rss.length > 0)
    .map((s) => {
      const plain = s.labels?.plain ?? LABEL.plain;
      const rows = (s.rss ?? []).map((x) => `${x.phase} ${fmt(x.sluiceMiB, 1)} vs ${fmt(x.plainMiB, 1)} MiB`).join("; ");
      return `RSS (${s.name}), Sluice vs ${plain}, read at the same moments: ${rows}.`;
    })
    .join("\n\n");
}

/** @param {RecorderStatsResult} r */
export function recorderStatsTable(r) {
  const lines = ["| route | kind | p50 ms | p95 ms | max ms | status | bytes |", "|---|---|---:|---:|---:|---:|---:|"];
  for (const x of r.routes) lines.push(`| \`${x.route}\` | ${x.group}${x.target ? "" : " (information)"} | ${fmt(x.p50Ms, 1)} | ${fmt(x.p95Ms, 1)} | ${fmt(x.maxMs, 1)} | ${x.status} | ${fmt(x.bytes)} |`);
  const d = r.dns;
  /** @param {Latency | null} l */
  const lat = (l) => (l ? `avg ${fmt(l.avgMs, 3)} ms, p99 ${l.p99Ms === null ? ">1% lost" : `${fmt(l.p99Ms, 3)} ms`}, ${fmt(l.lost)} lost` : "—");
  lines.push("", `DNS at 20 000 QPS: idle API ${lat(d.idle)}; with stats requests back to back (${fmt(d.statsRequests)} answered) ${lat(d.busy)}.`);
  lines.push("", ...recorderStatsSummary(r).map((l) => `- ${l}`));
  return lines.join("\n");
}

/** @param {Target[]} targets */
export function targetsTable(targets) {
  return ["| target | measured | result |", "|---|---|---|", ...targets.map((t) => `| ${t.target} | ${t.measured} | ${t.result} |`)].join("\n");
}

/** @param {MemoryResult} m */
export function memoryTable(m) {
  const keys = Object.keys(m.milestones);
  const head = keys.map((k) => `RSS @${Number(k) >= 1e6 ? `${Number(k) / 1e6}M` : `${Number(k) / 1e3}k`}`);
  return [
    `| idle | ${head.join(" | ")} | max | lost |`,
    `|${"---:|".repeat(keys.length + 3)}`,
    `| ${fmt(m.idleMiB)} MiB | ${keys.map((k) => `${fmt(m.milestones[k])} MiB`).join(" | ")} | ${fmt(m.maxMiB)} MiB | ${fmt(m.lost)} |`,
  ].join("\n");
}

/**
 * Replaces the text between the results markers of the README.
 * @param {string} path @param {string} section
 */
export async function recordReadme(path, section) {
  const text = await readFile(path, "utf8");
  const startMark = "<!-- results:start -->";
  const endMark = "<!-- results:end -->";
  const a = text.indexOf(startMark);
  const b = text.indexOf(endMark);
  if (a < 0 || b < a) throw new Error(`${path}: the ${startMark} / ${endMark} markers are missing`);
  await writeFile(path, `${text.slice(0, a + startMark.length)}\n${section}\n${text.slice(b)}`);
}
