// Priorities of the recorder's writer and readers. Linux sets a scheduling policy and a nice value per
// thread, and a thread starts with those of the thread that starts it; V8's helper threads (garbage
// collection, compilers) are started before any of our code runs, so a process changes them one by one.
//
// The writer thread runs under SCHED_IDLE where it can: when DNS's thread wakes (a packet came) on a core
// where the writer runs, the kernel switches to DNS at once. At nice 10 or 19 it let the writer finish its
// turn, up to a scheduler tick later (4 ms with HZ=250): measured on a core shared with the writer at
// 20 000 QPS, DNS's p99 was 2.2–3.3 ms at nice 10, 1.5–2.3 ms at nice 19 and 0.80–1.22 ms under
// SCHED_IDLE, against 0.39–0.60 ms without a recorder (docs/operations.md, "Priorities"). Under a load
// that leaves it no CPU the writer drops records (counted); that is what it is for.
// The reader processes run under SCHED_IDLE too (nice 19 below it), so that the writer and the reads
// share what DNS leaves as equals; readers at nice 19 over an idle writer starved it (the bench: 132 432
// records dropped during statistics back to back, against 39 355). A SCHED_IDLE thread gets nothing while
// anything else of its scheduling group (Sluice's session) wants the core, so a reader or writer that
// waits that way while DNS leaves the core to others moves up: a reader is replaced by one at nice 19
// (readers.ts), the writer returns to the normal policy at nice 10 (writer-link.ts, starvedSince).
// A thread may move itself (and its process's threads) to SCHED_IDLE without privilege; Node has no
// call for it, so util-linux's `chrt` does it. Where `chrt` is missing or refused, the nice value stays.

import { execFile, execFileSync } from "node:child_process";
import { readdirSync, readFileSync, readlinkSync } from "node:fs";
import { setPriority } from "node:os";

/** The kernel ids of this process's threads (Linux); elsewhere only the process's own id. */
export function threadIds(): number[] {
  try {
    return readdirSync("/proc/self/task").map(Number);
  } catch {
    return [process.pid];
  }
}

/** The kernel id of the calling thread (Linux), or null. */
export function ownThreadId(): number | null {
  try {
    const tid = Number(readlinkSync("/proc/thread-self").split("/").pop());
    return Number.isInteger(tid) && tid > 0 ? tid : null;
  } catch {
    return null;
  }
}

/**
 * Lowers every thread of this process to `nice` (elsewhere than Linux: the process). Never fails:
 * a thread that may not be lowered keeps its priority. Returns how many were lowered.
 */
export function lowerEveryThread(nice: number): number {
  let lowered = 0;
  for (const tid of threadIds()) {
    try {
      setPriority(tid, nice);
      lowered++;
    } catch {
      // Not permitted here (or the thread just ended).
    }
  }
  return lowered;
}

/**
 * Moves to SCHED_IDLE the thread `tid`, or with `wholeProcess` every thread of process `tid`. Threads
 * they start later inherit it. Returns whether it was done; never throws. Blocks its caller for the
 * few milliseconds `chrt` takes: call it where that waits for nothing else (a writer or reader starting).
 */
export function idlePolicy(tid: number, wholeProcess: boolean): boolean {
  if (process.platform !== "linux") return false;
  try {
    execFileSync("chrt", [...(wholeProcess ? ["--all-tasks"] : []), "--idle", "--pid", "0", String(tid)], { stdio: "ignore", timeout: 5000 });
    return true;
  } catch {
    return false;
  }
}

/** Field `i` of /proc/<tid>/schedstat in milliseconds (0: time run, 1: time runnable and not run), or null. */
function schedstatMs(tid: number, i: 0 | 1): number | null {
  try {
    return Number(readFileSync(`/proc/${tid}/schedstat`, "utf8").split(" ")[i]) / 1e6;
  } catch {
    return null;
  }
}

/**
 * How a SCHED_IDLE thread is seen to starve, in milliseconds (or null): how long thread `tid` waited
 * runnable, and how long this process's main thread (DNS) ran. Injected by tests.
 */
export interface StarvationWatch {
  windowMs: number;
  runnableWaitMs(tid: number): number | null;
  dnsRunMs(): number | null;
}

export const LINUX_WATCH: StarvationWatch | null =
  process.platform === "linux" ? { windowMs: 2000, runnableWaitMs: (tid) => schedstatMs(tid, 1), dnsRunMs: () => schedstatMs(process.pid, 0) } : null;

/**
 * Calls `starved` at the end of a window in which thread `tid` waited runnable for 95 % of it while
 * DNS ran less than half of it: other programs took the core, not DNS (under a flood the recorder is
 * meant to wait). Clear the returned timer to stop.
 */
export function starvedSince(watch: StarvationWatch, tid: number, starved: () => void): NodeJS.Timeout {
  let waited = watch.runnableWaitMs(tid);
  let dns = watch.dnsRunMs();
  const timer = setInterval(() => {
    const w = watch.runnableWaitMs(tid);
    const d = watch.dnsRunMs();
    if (waited !== null && w !== null && dns !== null && d !== null && w - waited >= watch.windowMs * 0.95 && d - dns < watch.windowMs / 2) starved();
    waited = w;
    dns = d;
  }, watch.windowMs);
  timer.unref();
  return timer;
}

/** Moves thread `tid` from SCHED_IDLE back to the normal policy (keeping its nice value); rejects when refused. */
export function normalPolicy(tid: number): Promise<void> {
  return new Promise((resolve, reject) => {
    execFile("chrt", ["--other", "--pid", "0", String(tid)], { timeout: 5000 }, (err, _out, stderr) => (err ? reject(new Error(stderr.trim() || err.message)) : resolve()));
  });
}
