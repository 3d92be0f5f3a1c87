// Priorities of the recorder's readers. Linux sets a nice value per thread, and a thread starts with
// the nice value of the thread that starts it; V8's helper threads (garbage collection, compilers)
// are started before any of our code runs, so they are lowered one by one.

import { readdirSync } from "node:fs";
import { setPriority } from "node:os";

/** The kernel ids of this process's threads (Linux); elsewhere only the process's own id. */
export function threadIds(): number[] {
  try {
    return readdirSync("/proc/self/task").map(Number);
  } catch {
    return [process.pid];
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
