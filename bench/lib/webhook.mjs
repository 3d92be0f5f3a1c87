// @ts-check
// The `http-request` scenario's extras: its HTTP sink (bench/http-sink.mjs, on the load generator's
// CPU), the http_request plugin's counters read from Sluice's API, and the 20 000 QPS rounds that put
// Sluice with a webhook per query beside plain cache-hot.
import { join } from "node:path";
import { dnsperf } from "./dnsperf.mjs";
import { sleep, start, stop } from "./procs.mjs";

/** @typedef {import("./procs.mjs").Started} Started */

/**
 * @typedef {object} WebhookRound
 * @property {{ sent: number, lost: number, qps: number }} sluice  Sluice with the webhook at 20 000 QPS
 * @property {{ sent: number, lost: number, qps: number } | null} plain  cache-hot without it, the same round
 * @property {number} dispatched  webhooks sent during Sluice's run (and until its queue emptied)
 * @property {number} dropped     webhooks dropped (queue full)
 * @property {number} errors      webhooks that failed
 */

/**
 * Starts the sink on `port` and waits until it answers.
 * @param {string} bench @param {number} port @param {string | null} cpus
 * @returns {Promise<Started>}
 */
export async function startSink(bench, port, cpus) {
  const p = start("http-sink", process.execPath, [join(bench, "http-sink.mjs"), String(port)], { cpus });
  for (let i = 0; i < 100; i++) {
    try {
      if ((await fetch(`http://127.0.0.1:${port}/count`)).ok) return p;
    } catch {
      // not listening yet
    }
    await sleep(100);
  }
  await stop(p);
  throw new Error(`the HTTP sink did not start on port ${port}:\n${p.output()}`);
}

/** The http_request plugin's counters (summed over labels). @param {number} apiPort */
export async function webhookMetrics(apiPort) {
  const text = await (await fetch(`http://127.0.0.1:${apiPort}/api/metrics`)).text();
  /** @param {string} name */
  const sum = (name) => [...text.matchAll(new RegExp(`^${name}\\{[^}]*\\} ([0-9.e+-]+)$`, "gm"))].reduce((s, m) => s + Number(m[1]), 0);
  return { dispatched: sum("http_request_dispatch_total"), dropped: sum("http_request_dropped_total"), errors: sum("http_request_error_total"), queued: sum("http_request_queued") };
}

/** Waits until no webhook waits in the queue. @param {number} apiPort @param {number} timeoutMs */
async function waitQueueEmpty(apiPort, timeoutMs) {
  const end = Date.now() + timeoutMs;
  while (Date.now() < end) {
    if ((await webhookMetrics(apiPort)).queued === 0) return;
    await sleep(100);
  }
}

/**
 * Rounds at 20 000 QPS: Sluice with the webhook, then plain cache-hot, each round; the webhook counters
 * over Sluice's run.
 * @param {{ file: string, outFile: string, mode: "udp" | "tcp" | "dot" | "doh", cpus: string | null }} base
 * @param {{ sluice: number, plain: number | null, api: number }} ports
 * @param {{ rounds: number, seconds: number, latency: { qps: number, clients: number, outstanding: number } }} plan
 * @param {(msg: string) => void} log
 * @returns {Promise<WebhookRound[]>}
 */
export async function webhookAt20k(base, ports, plan, log) {
  /** @type {WebhookRound[]} */
  const rounds = [];
  for (let i = 0; i < plan.rounds; i++) {
    await waitQueueEmpty(ports.api, 30_000);
    const before = await webhookMetrics(ports.api);
    const s = await dnsperf({ ...base, port: ports.sluice, seconds: plan.seconds, ...plan.latency });
    await waitQueueEmpty(ports.api, 30_000);
    const after = await webhookMetrics(ports.api);
    const p = ports.plain === null ? null : await dnsperf({ ...base, port: ports.plain, seconds: plan.seconds, ...plan.latency });
    const round = {
      sluice: { sent: s.stats.sent, lost: s.stats.lost, qps: s.stats.qps },
      plain: p ? { sent: p.stats.sent, lost: p.stats.lost, qps: p.stats.qps } : null,
      dispatched: after.dispatched - before.dispatched,
      dropped: after.dropped - before.dropped,
      errors: after.errors - before.errors,
    };
    rounds.push(round);
    log(
      `  http-request   webhook @20k round ${i + 1}: ${round.sluice.sent} queries (${Math.round(round.sluice.qps)} QPS, ${round.sluice.lost} lost)` +
        `${p ? ` against ${Math.round(p.stats.qps)} QPS (${p.stats.lost} lost) without it` : ""}; ${round.dispatched} webhooks sent, ${round.dropped} dropped, ${round.errors} failed`,
    );
  }
  return rounds;
}
