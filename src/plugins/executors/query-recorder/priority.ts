// Priorities of the recorder's writer and readers. Linux sets a scheduling policy and a nice value per
// thread, and a thread starts with those of the thread that starts it; V8's helper threads (garbage
// collection, compilers) are started before any of our code runs, so a process changes them one by one.
//
// Where it can, each of them runs under SCHED_IDLE: when DNS's thread wakes (a packet came) on a core
// where one of them runs, the kernel switches to DNS at once. At nice 10 or 19 it let the running
// thread finish its turn, up to a scheduler tick later (4 ms with HZ=250): measured on a core shared with
// the writer at 20 000 QPS, DNS's p99 was 2.2–3.1 ms at nice 10, 1.5–2.3 ms at nice 19 and 0.87–1.06 ms
// under SCHED_IDLE, against 0.39–0.60 ms without a recorder (docs/operations.md, "Reads").
// A thread may move itself (and its own process's threads) to SCHED_IDLE without privilege; Node has no
// call for it, so util-linux's `chrt` does it. Where `chrt` is missing or refused, the nice value stays.

import { execFileSync } from "node:child_process";
import { readdirSync, readlinkSync } from "node:fs";
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
