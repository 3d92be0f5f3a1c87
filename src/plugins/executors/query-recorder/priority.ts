// The recorder's worker threads give way to DNS. A nice value alone is not enough on a busy core: a
// niced thread that is running keeps the CPU until its time slice ends (milliseconds), so a DNS
// packet that wakes the main thread meanwhile waits that long. Under Linux's SCHED_IDLE policy a
// thread is preempted as soon as any normal thread wakes, so a long statistics query no longer adds
// to DNS latency; it only runs on time DNS leaves idle. Linux applies both per thread.

import { execFile } from "node:child_process";
import { readlinkSync } from "node:fs";
import { setPriority } from "node:os";

/** This thread's kernel id (Linux), from /proc/thread-self → "<pid>/task/<tid>"; null elsewhere. */
function threadId(): string | null {
  try {
    const tid = readlinkSync("/proc/thread-self").split("/").pop() ?? "";
    return /^\d+$/.test(tid) ? tid : null;
  } catch {
    return null;
  }
}

/**
 * Lowers the calling thread to nice `nice`, and with `idle` to SCHED_IDLE (through util-linux's chrt,
 * asynchronously; Node has no call for it). Either may be refused or missing: the thread then runs
 * at what it got, never fails.
 */
export function lowerThisThread(nice: number, idle: boolean): void {
  try {
    setPriority(nice);
  } catch {
    // Not permitted here: the thread competes with DNS at equal priority.
  }
  const tid = idle && process.platform === "linux" ? threadId() : null;
  if (tid !== null) execFile("chrt", ["--idle", "--pid", "0", tid], { timeout: 5000 }, () => undefined);
}
