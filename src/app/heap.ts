// Garbage-collector policy for a long-running server. After each full collection V8 lets the heap
// grow to up to 4x what survived before it collects again; it picks the high factor exactly when a
// server is busy (fast collections, steady allocation). A cache of 100 000 answers is ~40 MB live,
// so the process swung between 150 and 380 MB RSS under a stream of new names. Capping the growth
// at 1.5x keeps it under 210 MB; the collector's pauses over that 50 s run went from 1.70 s to
// 1.81 s (bench/README.md, "Memory"). An operator who passes their own --heap-growing-percent to
// node keeps it.

import { setFlagsFromString } from "node:v8";

export const HEAP_GROWING_PERCENT = 50;

export function tuneHeapGrowth(execArgv: readonly string[] = process.execArgv): boolean {
  if (execArgv.some((a) => a.startsWith("--heap-growing-percent") || a.startsWith("--heap_growing_percent"))) return false;
  // Read by the collector each time it sizes the heap, so setting it at start-up takes effect.
  setFlagsFromString(`--heap-growing-percent=${String(HEAP_GROWING_PERCENT)}`);
  return true;
}
