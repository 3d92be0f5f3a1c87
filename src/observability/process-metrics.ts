// prom-client's default process and runtime metrics (CPU, memory, file descriptors, event loop
// lag, handles, heap, version), registered one collector at a time so that one is left out: its
// garbage collection histogram (`nodejs_gc_duration_seconds`). That collector watches every
// collection through a perf_hooks PerformanceObserver, and on Node 20 each observed collection
// leaves ~3.3 KB that outlive two scavenges and move to the old generation (`--trace-gc-nvp`,
// `promoted=`: 3 336 bytes a scavenge in a bare script with such an observer, 0 without). Sluice
// scavenges every ~0.6 s at 20 000 QPS (~20 MB an hour of that garbage), and with a 1 MB young
// generation (V8's size after an idle spell, without the launcher's floor) 20 times as often:
// full collections followed. The event loop lag metrics still show any pause a collection makes.
// bench/README.md, "Bursts and the young generation".

import type { Registry } from "prom-client";
import eventLoopLag from "prom-client/lib/metrics/eventLoopLag.js";
import heapSizeAndUsed from "prom-client/lib/metrics/heapSizeAndUsed.js";
import heapSpacesSizeAndUsed from "prom-client/lib/metrics/heapSpacesSizeAndUsed.js";
import osMemoryHeap from "prom-client/lib/metrics/osMemoryHeap.js";
import processCpuTotal from "prom-client/lib/metrics/processCpuTotal.js";
import processHandles from "prom-client/lib/metrics/processHandles.js";
import processMaxFileDescriptors from "prom-client/lib/metrics/processMaxFileDescriptors.js";
import processOpenFileDescriptors from "prom-client/lib/metrics/processOpenFileDescriptors.js";
import processRequests from "prom-client/lib/metrics/processRequests.js";
import processResources from "prom-client/lib/metrics/processResources.js";
import processStartTime from "prom-client/lib/metrics/processStartTime.js";
import version from "prom-client/lib/metrics/version.js";

const COLLECTORS = [
  processCpuTotal,
  processStartTime,
  osMemoryHeap,
  processOpenFileDescriptors,
  processMaxFileDescriptors,
  eventLoopLag,
  processResources,
  processHandles,
  processRequests,
  heapSizeAndUsed,
  heapSpacesSizeAndUsed,
  version,
];

/** Registers the process and runtime metrics in `registry`; the event loop delay is sampled every `eventLoopSampleMs`. */
export function collectProcessMetrics(registry: Registry, eventLoopSampleMs: number): void {
  for (const collect of COLLECTORS) collect(registry, { eventLoopMonitoringPrecision: eventLoopSampleMs });
}
