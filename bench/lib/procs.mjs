// @ts-check
// Every process the harness starts, each in its own session, tracked by PID so each is stopped at the
// end (SIGTERM, then SIGKILL after 2 s), on error, and when the harness itself is interrupted.
import { spawn } from "node:child_process";
import dgram from "node:dgram";
import net from "node:net";

/** @typedef {import("node:child_process").ChildProcess} ChildProcess */

/**
 * @typedef {object} Started
 * @property {string} name
 * @property {number} pid
 * @property {ChildProcess} child
 * @property {() => string} output  the last few KB of stdout and stderr
 * @property {Promise<number | null>} exited  resolves with the exit code (null when killed by a signal)
 */

/** @type {Map<number, Started>} */
const running = new Map();

/**
 * Starts `cmd args`, optionally pinned to CPUs with taskset (which execs, so the PID is the command's).
 * @param {string} name @param {string} cmd @param {string[]} args
 * `stdoutFd` sends stdout straight to a file, so a chatty child never waits on the harness.
 * `user` runs it as another OS user (PostgreSQL refuses to run as root).
 * @param {{ cwd?: string, env?: NodeJS.ProcessEnv, cpus?: string | null, stdoutFd?: number, user?: { uid: number, gid: number } | null }} [opts]
 * @returns {Started}
 */
export function start(name, cmd, args, opts = {}) {
  const [file, argv] = opts.cpus ? ["taskset", ["-c", opts.cpus, cmd, ...args]] : [cmd, args];
  const stdout = opts.stdoutFd ?? "pipe";
  // Each in a session of its own, as services are: Linux schedules a session's processes as one group
  // (autogroup), so a server keeps its share of its core against the others started here, as it would
  // against other services (Sluice's recorder runs under SCHED_IDLE within Sluice's group).
  const child = spawn(file, argv, { cwd: opts.cwd, env: opts.env ?? process.env, stdio: ["ignore", stdout, "pipe"], detached: true, ...(opts.user ?? {}) });
  if (child.pid === undefined) throw new Error(`${name}: could not start ${cmd}`);
  let tail = "";
  /** @param {Buffer} chunk */
  const keep = (chunk) => {
    tail = (tail + chunk.toString("utf8")).slice(-4096);
  };
  child.stdout?.on("data", keep);
  child.stderr?.on("data", keep);
  const pid = child.pid;
  /** @type {Promise<number | null>} */
  const exited = new Promise((resolve) => {
    child.on("exit", (code) => {
      running.delete(pid);
      resolve(code);
    });
    child.on("error", (err) => {
      keep(Buffer.from(`\n${err.message}`));
      running.delete(pid);
      resolve(-1);
    });
  });
  const started = { name, pid, child, output: () => tail, exited };
  running.set(pid, started);
  return started;
}

/** @param {number} ms */
export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * A promise that resolves after `ms` unless cancelled first; its timer never keeps the harness alive.
 * @param {number} ms
 */
export function deadline(ms) {
  /** @type {NodeJS.Timeout | undefined} */
  let timer;
  /** @type {Promise<void>} */
  const expired = new Promise((resolve) => {
    timer = setTimeout(resolve, ms);
    timer.unref();
  });
  return { expired, cancel: () => clearTimeout(timer) };
}

/**
 * Stops one process by PID: SIGTERM, then SIGKILL if it is still there after 2 s.
 * @param {Started} p
 */
export async function stop(p) {
  if (!running.has(p.pid)) return;
  try {
    process.kill(p.pid, "SIGTERM");
  } catch {
    return;
  }
  const grace = deadline(2000);
  const done = await Promise.race([p.exited.then(() => true), grace.expired.then(() => false)]);
  grace.cancel();
  if (!done) {
    try {
      process.kill(p.pid, "SIGKILL");
    } catch {
      /* already gone */
    }
    const last = deadline(1000);
    await Promise.race([p.exited, last.expired]);
    last.cancel();
  }
}

/** Stops everything still running, one by one. */
export async function stopAll() {
  await Promise.all([...running.values()].map((p) => stop(p)));
}

/** Last resort on process exit: SIGKILL whatever is left (synchronous). */
function killLeft() {
  for (const pid of running.keys()) {
    try {
      process.kill(pid, "SIGKILL");
    } catch {
      /* gone */
    }
  }
}

/** @type {(() => Promise<void>)[]} */
const cleanups = [];

/** Work to do after the processes are stopped when the harness is interrupted (e.g. removing the temp dir). @param {() => Promise<void>} fn */
export function onInterrupt(fn) {
  cleanups.push(fn);
}

/** Ctrl-C / SIGTERM of the harness: stop every child, clean up, then exit with 128+signal. */
export function installSignalHandlers() {
  let stopping = false;
  /** @param {NodeJS.Signals} sig @param {number} code */
  const onSignal = (sig, code) => {
    if (stopping) return;
    stopping = true;
    process.stderr.write(`\n${sig}: stopping ${running.size} process(es)\n`);
    stopAll()
      .then(() => Promise.allSettled(cleanups.map((fn) => fn())))
      .finally(() => process.exit(code));
  };
  process.on("SIGINT", () => onSignal("SIGINT", 130));
  process.on("SIGTERM", () => onSignal("SIGTERM", 143));
  process.on("exit", killLeft);
}

/**
 * Sends one DNS query for `name` A over UDP and resolves true when any answer (any rcode) comes back.
 * @param {number} port @param {string} name @param {number} timeoutMs
 */
export function probe(port, name, timeoutMs) {
  const labels = name.split(".").filter(Boolean);
  const parts = [Buffer.from([0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0])];
  for (const l of labels) parts.push(Buffer.from([l.length]), Buffer.from(l, "ascii"));
  parts.push(Buffer.from([0, 0, 1, 0, 1]));
  const query = Buffer.concat(parts);
  return new Promise((resolve) => {
    const sock = dgram.createSocket("udp4");
    const timer = setTimeout(() => finish(false), timeoutMs);
    /** @param {boolean} ok */
    const finish = (ok) => {
      clearTimeout(timer);
      sock.close();
      resolve(ok);
    };
    sock.on("error", () => finish(false));
    sock.on("message", (msg) => finish(msg.length >= 12 && msg[0] === 0x12 && msg[1] === 0x34));
    sock.send(query, port, "127.0.0.1");
  });
}

/**
 * Waits until the server on `port` answers a UDP query, failing early if the process exits.
 * @param {Started} p @param {number} port @param {string} name @param {number} timeoutMs
 */
export async function waitReady(p, port, name, timeoutMs) {
  const deadline = Date.now() + timeoutMs;
  let exited = false;
  void p.exited.then(() => (exited = true));
  while (Date.now() < deadline) {
    if (exited) throw new Error(`${p.name} exited during start-up:\n${p.output()}`);
    if (await probe(port, name, 250)) return;
    await sleep(100);
  }
  throw new Error(`${p.name} did not answer on 127.0.0.1:${port} within ${timeoutMs / 1000} s:\n${p.output()}`);
}

/**
 * True when nothing listens on 127.0.0.1:port, UDP or TCP.
 * @param {number} port
 */
export async function portFree(port) {
  const udp = await new Promise((resolve) => {
    const s = dgram.createSocket("udp4");
    s.once("error", () => resolve(false));
    s.bind(port, "127.0.0.1", () => s.close(() => resolve(true)));
  });
  const tcp = await new Promise((resolve) => {
    const s = net.createServer();
    s.once("error", () => resolve(false));
    s.listen(port, "127.0.0.1", () => s.close(() => resolve(true)));
  });
  return udp && tcp;
}

/**
 * CPU time (user + system, seconds) used so far by a process and its children (live ones, and those it has
 * reaped: dnsmasq forks one per TCP connection), from /proc; null if the process is gone.
 * @param {number} pid
 */
export async function cpuSeconds(pid) {
  const { readFile, readdir } = await import("node:fs/promises");
  /** @param {string} stat */
  const fields = (stat) => stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  const ticks = 100; // USER_HZ on Linux
  try {
    const own = fields(await readFile(`/proc/${pid}/stat`, "utf8"));
    // utime, stime, cutime, cstime are fields 14-17 (indexes 11-14 after the state field).
    let total = Number(own[11]) + Number(own[12]) + Number(own[13]) + Number(own[14]);
    for (const entry of await readdir("/proc")) {
      if (!/^\d+$/.test(entry) || entry === String(pid)) continue;
      const stat = await readFile(`/proc/${entry}/stat`, "utf8").catch(() => null);
      if (!stat) continue;
      const f = fields(stat);
      if (Number(f[1]) === pid) total += Number(f[11]) + Number(f[12]);
    }
    return total / ticks;
  } catch {
    return null;
  }
}

/**
 * Resident memory of a process in MiB (VmRSS from /proc/<pid>/status); null if gone.
 * @param {number} pid
 */
export async function rssMiB(pid) {
  const { readFile } = await import("node:fs/promises");
  try {
    const status = await readFile(`/proc/${pid}/status`, "utf8");
    const m = /^VmRSS:\s+(\d+)\s+kB/m.exec(status);
    return m ? Number(m[1]) / 1024 : null;
  } catch {
    return null;
  }
}
