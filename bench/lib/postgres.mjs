// @ts-check
// The postgres-writer benchmark: the query recorder's writer thread into PostgreSQL. A throwaway server,
// made the way the tests make theirs (test/helpers/postgres.ts): initdb into a temp directory of its own,
// the newest installed version, listening only on a unix socket there, fsync off, as the `postgres` OS
// user when the harness runs as root; it runs in the foreground under the harness (procs.mjs), so it is
// stopped with everything else. Records of the recorder-stats mix are built into batches beforehand and
// handed to a writer thread started as the executor starts it (WriterLink).
import { execFileSync } from "node:child_process";
import { chmodSync, chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir, userInfo } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import pg from "pg";
import { sleep, start, stop } from "./procs.mjs";
import { load, recordMaker, rng, STATS_CLIENTS as CLIENTS } from "./records.mjs";

/** The directory of initdb and postgres (newest version installed), or null. */
export function postgresBin() {
  const root = "/usr/lib/postgresql";
  if (!existsSync(root)) return null;
  const versions = readdirSync(root).filter((v) => /^\d+$/.test(v)).sort((a, b) => Number(b) - Number(a));
  for (const v of versions) {
    const bin = join(root, v, "bin");
    if (existsSync(join(bin, "initdb")) && existsSync(join(bin, "postgres"))) return bin;
  }
  return null;
}

/** @returns {{ uid: number, gid: number } | null} */
function owner() {
  if (userInfo().uid !== 0) return null;
  const id = (/** @type {string} */ flag) => Number(execFileSync("id", [flag, "postgres"], { encoding: "utf8" }).trim());
  return { uid: id("-u"), gid: id("-g") };
}

/**
 * Starts a server on `cpus`; resolves once it accepts connections. `close()` stops it and removes its files.
 * @param {{ cpus: string | null }} o
 */
export async function startPostgres(o) {
  const bin = postgresBin();
  if (bin === null) throw new Error("postgres-writer needs PostgreSQL: apt-get install postgresql");
  const user = owner();
  // Its own directory: the server's user must own it (the harness's temp directory is the harness user's alone).
  const dir = mkdtempSync(join(tmpdir(), "sluice-bench-pg-"));
  if (user) chownSync(dir, user.uid, user.gid);
  chmodSync(dir, 0o700);
  const data = join(dir, "data");
  execFileSync(join(bin, "initdb"), ["-D", data, "-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8", "--locale=C"], { stdio: "ignore", ...(user ?? {}) });
  const server = start("postgres", join(bin, "postgres"), ["-D", data, "-c", "listen_addresses=", "-c", `unix_socket_directories=${dir}`, "-c", "fsync=off", "-c", "max_connections=20"], { cpus: o.cpus, user });
  const version = execFileSync(join(bin, "postgres"), ["--version"], { encoding: "utf8" }).trim();
  const url = `postgres://postgres@/postgres?host=${encodeURIComponent(dir)}`;
  const end = Date.now() + 30_000;
  for (;;) {
    const c = new pg.Client({ connectionString: url });
    try {
      await c.connect();
      await c.end();
      break;
    } catch (err) {
      await c.end().catch(() => undefined);
      if (Date.now() > end) throw new Error(`PostgreSQL did not start: ${err instanceof Error ? err.message : err}\n${server.output()}`);
      await sleep(100);
    }
  }
  const close = async () => {
    await stop(server);
    rmSync(dir, { recursive: true, force: true });
  };
  return { server, url, version, close };
}

const TICKS = Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim()) || 100;

/**
 * CPU seconds used so far by the server `pid` and its processes (backends, WAL writer, autovacuum, …;
 * those that ended are in the server's cutime/cstime once it has reaped them); Linux /proc.
 * @param {number} pid
 */
export function serverCpuSeconds(pid) {
  let ticks = 0;
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    let stat;
    try {
      stat = readFileSync(`/proc/${entry}/stat`, "utf8");
    } catch {
      continue;
    }
    // The fields after the command (which may hold spaces) in parentheses: state, ppid, …, utime (14th), stime (15th), cutime, cstime.
    const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    if (Number(entry) === pid) ticks += Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14]);
    else if (Number(f[1]) === pid) ticks += Number(f[11]) + Number(f[12]);
  }
  return ticks / TICKS;
}

/**
 * @typedef {object} PostgresWriterRun
 * @property {number} batchSize
 * @property {number} records
 * @property {number} seconds
 * @property {number} rate  records/s
 * @property {number} transactions
 * @property {number} lost
 * @property {number} writerCpuSeconds  CPU time of the harness process (the writer thread; the harness itself waits)
 * @property {number} serverCpuSeconds  CPU time of the PostgreSQL server's processes
 */

/**
 * @typedef {object} PostgresWriterResult
 * @property {string} version  the server's `postgres --version`
 * @property {PostgresWriterRun[]} runs  every round of every batch size
 */

/** @typedef {{ count: number, ips: string[], take(): ArrayBuffer, append(...args: unknown[]): void }} Builder  batch.ts's BatchBuilder */



/**
 * `count` records of the recorder-stats mix (bench/lib/recorder.mjs: 20 000 names of skewed popularity, 200
 * clients, a home resolver's rcodes, latencies and paths), a third of them from named clients in one to three
 * of six groups, in batch messages of `batchSize` as the DNS thread sends them.
 * @param {string} dist @param {number} count @param {number} batchSize
 */
async function batchMessages(dist, count, batchSize) {
  const { BatchBuilder, ClientTable, NO_CLIENT, StringTable } = await load(dist, "src/plugins/executors/query-recorder/batch.js");
  const next = await recordMaker(dist, rng(11));
  const strings = new StringTable();
  const clients = new ClientTable();
  const groups = ["kids", "adults", "iot", "guests", "cameras", "family"];
  const identities = Array.from({ length: CLIENTS }, (_, c) => {
    const g = groups.filter((_, k) => (c >> k) % 3 === 0).slice(0, 3);
    return { name: `host-${c}`, groups: g, memberOf: new Set([`host-${c}`, ...g]), paused: false };
  });
  const t0 = Date.now() - 86_400_000;
  let stringsSent = 0;
  let namesSent = 0;
  let setsSent = 0;
  const messages = [];
  /** @type {Builder} */
  let batch = new BatchBuilder(batchSize * 300);
  for (let i = 0; i < count; i++) {
    const { client, ip, query, response, elapsedUs, error, path } = next();
    const ref = client % 3 === 0 ? clients.of(identities[client]) : NO_CLIENT;
    batch.append(t0 + Math.floor((i / count) * 86_400_000), elapsedUs, query, response, ip, ref, error, path, 0, strings);
    if (batch.count === batchSize || i === count - 1) {
      const data = batch.take();
      messages.push({
        t: "batch",
        stringsFrom: stringsSent,
        strings: strings.list.slice(stringsSent),
        clientNamesFrom: namesSent,
        clientNames: clients.names.list.slice(namesSent),
        groupSetsFrom: setsSent,
        groupSets: clients.sets.slice(setsSent),
        ips: batch.ips,
        data,
        count: batch.count,
      });
      stringsSent = strings.list.length;
      namesSent = clients.names.list.length;
      setsSent = clients.sets.length;
      batch = new BatchBuilder(batchSize * 300);
    }
  }
  return messages;
}

/**
 * The writer's rate: `count` records, built beforehand into batches of `batchSize`, handed to a new writer
 * thread of the recorder (the PostgreSQL store only, schema `schema`) one batch at a time — the next once the
 * previous is committed, so every transaction is one batch of `batchSize` (the writer merges batches that
 * wait behind a slow one; that would measure bigger ones). Besides the wall time, the CPU time of this
 * process (the writer thread; the harness only waits) and of the server (`serverCpu`), which a busy machine
 * does not inflate the way it slows the wall clock.
 * @param {{ dist: string, url: string, schema: string, count: number, batchSize: number, serverCpu: () => number, log: (m: string) => void }} o
 * @returns {Promise<PostgresWriterRun>}
 */
export async function postgresWriterRate(o) {
  const messages = await batchMessages(o.dist, o.count, o.batchSize);
  const { WriterLink } = await load(o.dist, "src/plugins/executors/query-recorder/writer-link.js");
  const pgOptions = { url: o.url, schema: o.schema, statementTimeoutMs: 10_000, connectTimeoutMs: 5_000 };
  const link = new WriterLink(
    { role: "query-recorder-writer", memoryTail: 1024, sqlite: null, postgres: { pg: pgOptions, instance: "bench", maxRecords: 0, retentionMs: 30 * 86_400_000 } },
    {
      records: () => undefined,
      replay: () => undefined,
      frames: () => undefined,
      log: (/** @type {{ msg: string, err: string }} */ m) => o.log(`  writer: ${m.msg}: ${m.err}`),
      exit: () => undefined,
    },
  );
  await link.ready;
  const progress = link.progress;
  const started = performance.now();
  const cpu0 = process.cpuUsage();
  const server0 = o.serverCpu();
  let sent = 0;
  for (const m of messages) {
    link.post(m, [m.data]);
    sent += m.count;
    // Each batch waits for its commit (the writer's shared totals: progress.ts).
    for (let v = progress.version(); progress.answered() < sent; v = progress.version()) await progress.changed(v, 1000);
  }
  const seconds = (performance.now() - started) / 1000;
  const cpu = process.cpuUsage(cpu0);
  const serverCpuSeconds = o.serverCpu() - server0;
  await link.close();
  const done = progress.read();
  return { batchSize: o.batchSize, records: o.count, seconds, rate: o.count / seconds, transactions: done.commits, lost: done.lost, writerCpuSeconds: (cpu.user + cpu.system) / 1e6, serverCpuSeconds };
}

/** The fastest round of `batchSize` (another process on the machine only ever slows a round). @param {PostgresWriterResult} r @param {number} batchSize */
export function bestPostgresRun(r, batchSize) {
  return r.runs.filter((x) => x.batchSize === batchSize).reduce((/** @type {PostgresWriterRun | null} */ m, x) => (m === null || x.rate > m.rate ? x : m), null);
}

/** @param {number} v @param {number} [digits] */
const fmt = (v, digits = 0) => v.toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: digits });

/** @param {PostgresWriterResult} r */
export function postgresWriterTable(r) {
  const sizes = [...new Set(r.runs.map((x) => x.batchSize))];
  const lines = [
    "| batch_size | records | transactions | records/s (best) | every round | CPU µs/record: writer + PostgreSQL (lowest) | records per CPU-second of both | lost |",
    "|---:|---:|---:|---:|---|---|---:|---:|",
  ];
  for (const size of sizes) {
    const runs = r.runs.filter((x) => x.batchSize === size);
    const best = /** @type {PostgresWriterRun} */ (bestPostgresRun(r, size));
    const lowest = (/** @type {(x: PostgresWriterRun) => number} */ f) => Math.min(...runs.map((x) => (f(x) / x.records) * 1e6));
    const writer = lowest((x) => x.writerCpuSeconds);
    const server = lowest((x) => x.serverCpuSeconds);
    lines.push(`| ${fmt(size)} | ${fmt(best.records)} | ${fmt(best.transactions)} | ${fmt(best.rate)} | ${runs.map((x) => fmt(x.rate)).join(" / ")} | ${fmt(writer, 1)} + ${fmt(server, 1)} | ${fmt(1e6 / (writer + server))} | ${fmt(runs.reduce((n, x) => n + x.lost, 0))} |`);
  }
  return lines.join("\n");
}

/** The target of bench/README.md, judged (a row of the targets table). @param {PostgresWriterResult | null} r @returns {import("./report.mjs").Target} */
export function postgresWriterTarget(r) {
  const target = "postgres-writer: ≥ 50 000 records/s into PostgreSQL at batch_size 1 024 (best round)";
  const best = r ? bestPostgresRun(r, 1024) : null;
  if (!best) return { target, measured: "—", result: "not run" };
  return { target, measured: `${fmt(best.rate)} records/s, ${best.lost} lost`, result: best.rate >= 50_000 && best.lost === 0 ? "PASS" : "MISS" };
}
