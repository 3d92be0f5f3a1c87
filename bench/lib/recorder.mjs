// @ts-check
// The query recorder's benchmarks: a database of 1 000 000 records written through the recorder's own
// writer thread (the same batches the DNS thread hands over, not hand-made SQL), the time of every stats
// route and of filtered pages over it, and DNS latency at 20 000 QPS while stats queries run.
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { sleep } from "./procs.mjs";

import { load, recordMaker, rng } from "./records.mjs";

export { STATS_CLIENTS, STATS_NAMES } from "./records.mjs";

/**
 * Writes `count` records spread over the last `spanMs` into a new database at `path`, through the
 * recorder's writer thread. Returns how long it took.
 * @param {{ dist: string, path: string, count: number, spanMs: number, log: (m: string) => void }} o
 */
export async function generateRecords(o) {
  const { BatchBuilder, NO_CLIENT, StringTable } = await load(o.dist, "src/plugins/executors/query-recorder/batch.js");
  const { WriterLink } = await load(o.dist, "src/plugins/executors/query-recorder/writer-link.js");
  const next = await recordMaker(o.dist, rng(11));
  const strings = new StringTable();
  const link = new WriterLink(
    {
      role: "query-recorder-writer",
      sqlite: { path: o.path, instance: "bench", memoryTail: 1024, maxRecords: 0, retentionMs: 30 * 86_400_000, cacheMb: 16 },
      postgres: null,
      memoryTail: 1024,
    },
    {
      records: () => undefined,
      replay: () => undefined,
      log: (/** @type {{ msg: string, err: string }} */ m) => o.log(`  writer: ${m.msg}: ${m.err}`),
      exit: () => undefined,
    },
  );
  await link.ready;
  // What the writer has committed, from its shared totals (progress.ts): waits for its next commit while `busy`.
  const progress = link.progress;
  /** @param {() => boolean} busy */
  const waitWhile = async (busy) => {
    for (let v = progress.version(); busy(); v = progress.version()) await progress.changed(v, 1000);
  };
  const started = performance.now();
  const t0 = Date.now() - o.spanMs;
  const BATCH = 2048;
  let sent = 0;
  let stringsSent = 0;
  let batch = new BatchBuilder(BATCH * 300);
  for (let i = 0; i < o.count; i++) {
    const { ip, query, response, elapsedUs, error, path } = next();
    const createdAt = t0 + Math.floor((i / o.count) * o.spanMs);
    batch.append(createdAt, elapsedUs, query, response, ip, NO_CLIENT, error, path, 0, strings);
    if (batch.count === BATCH || i === o.count - 1) {
      const count = batch.count;
      const ips = batch.ips;
      const data = batch.take();
      // No client names or groups: every record is an unnamed client (NO_CLIENT).
      link.post({ t: "batch", stringsFrom: stringsSent, strings: strings.list.slice(stringsSent), clientNamesFrom: 0, clientNames: [], groupSetsFrom: 0, groupSets: [], ips, data, count }, [data]);
      stringsSent = strings.list.length;
      sent += count;
      batch = new BatchBuilder(BATCH * 300);
      // At most 8 batches in flight: the generator must not outrun the writer's memory.
      await waitWhile(() => sent - progress.answered() > BATCH * 8);
      if (sent % 200_000 < BATCH) o.log(`  recorder-stats: ${sent.toLocaleString("en-US")} records handed to the writer`);
    }
  }
  await waitWhile(() => progress.answered() < sent);
  const seconds = (performance.now() - started) / 1000;
  await link.close();
  return { seconds, rate: o.count / seconds, lost: progress.read().lost };
}

/** @param {number} apiPort */
export async function recorderMetrics(apiPort) {
  const text = await (await fetch(`http://127.0.0.1:${apiPort}/api/metrics`)).text();
  /** @param {string} name */
  const v = (name) => Number(new RegExp(`^${name}\\{[^}]*\\} ([0-9.e+-]+)$`, "m").exec(text)?.[1] ?? NaN);
  return { written: v("query_recorder_records_written_total"), dropped: v("query_recorder_dropped_total"), queue: v("query_recorder_queue_records"), records: v("query_recorder_records") };
}

/** Waits until the recorder has written everything it was handed. @param {number} apiPort @param {number} timeoutMs */
export async function waitDrained(apiPort, timeoutMs) {
  const end = Date.now() + timeoutMs;
  while (Date.now() < end) {
    if ((await recorderMetrics(apiPort)).queue === 0) return true;
    await sleep(200);
  }
  return false;
}

/**
 * Times `reps` sequential GETs of `url` (after two that do not count).
 * @param {string} url @param {number} reps
 */
export async function timeRoute(url, reps) {
  /** @type {number[]} */
  const ms = [];
  let status = 0;
  let size = 0;
  for (let i = 0; i < reps + 2; i++) {
    const t = performance.now();
    const res = await fetch(url);
    const body = await res.text();
    const took = performance.now() - t;
    status = res.status;
    size = body.length;
    if (i >= 2) ms.push(took);
  }
  ms.sort((a, b) => a - b);
  const at = (/** @type {number} */ q) => ms[Math.min(ms.length - 1, Math.ceil(q * ms.length) - 1)];
  return { p50Ms: Number(at(0.5).toFixed(1)), p95Ms: Number(at(0.95).toFixed(1)), maxMs: Number(ms[ms.length - 1].toFixed(1)), status, bytes: size };
}

/**
 * CPU time (ms, from /proc/<pid>/task/<tid>/schedstat) of a process and its descendants by who spent it:
 * Sluice's main thread (DNS), its other threads below nice 19 (V8's helpers at 0, the writer at 10), and
 * every thread at nice 19 (the readers). Linux only; null elsewhere. Unlike latency, CPU time barely
 * moves with other load on the machine, so it says where a read's work runs even on a shared host.
 * @param {number} pid
 * @returns {{ main: number, nice0: number, niceOther: number, nice19: number } | null}
 */
export function cpuByPriority(pid) {
  const out = { main: 0, nice0: 0, niceOther: 0, nice19: 0 };
  /** @param {number} p */
  const visit = (p) => {
    /** @type {string[]} */
    let tids;
    try {
      tids = readdirSync(`/proc/${p}/task`);
    } catch {
      return;
    }
    for (const tid of tids) {
      try {
        const stat = readFileSync(`/proc/${p}/task/${tid}/stat`, "utf8");
        const nice = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[16]);
        const ms = Number(readFileSync(`/proc/${p}/task/${tid}/schedstat`, "utf8").split(" ")[0]) / 1e6;
        if (p === pid && Number(tid) === pid) out.main += ms;
        else if (nice >= 19) out.nice19 += ms;
        else if (nice === 0) out.nice0 += ms;
        else out.niceOther += ms;
        for (const c of readFileSync(`/proc/${p}/task/${tid}/children`, "utf8").split(" ").filter(Boolean)) visit(Number(c));
      } catch {
        // The thread ended meanwhile.
      }
    }
  };
  if (!existsSync(`/proc/${pid}/task`)) return null;
  visit(pid);
  return out;
}
