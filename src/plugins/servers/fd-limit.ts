// The process's open-file limit, to warn when DNS connections could use up the descriptors the
// management API and upstream sockets need.

import { readFileSync } from "node:fs";

let cached: number | null | undefined;

/** Soft "Max open files" from /proc/self/limits; null where that is not readable (not Linux). */
export function openFileLimit(): number | null {
  if (cached !== undefined) return cached;
  cached = null;
  try {
    const m = /^Max open files\s+(\d+)/m.exec(readFileSync("/proc/self/limits", "utf8"));
    if (m) cached = Number(m[1]);
  } catch {
    // not Linux: no warning
  }
  return cached;
}
