// The primary's /api/metrics with data-plane workers: its own and the workers' snapshots as one process's view.

import { expect, test } from "vitest";
import { MetricsHub } from "../../src/observability/metrics.js";

test("counters, gauges and histograms of several processes add up; help and labels stay", async () => {
  const hubs = [new MetricsHub({ processMetrics: false }), new MetricsHub({ processMetrics: false }), new MetricsHub({ processMetrics: false })];
  hubs.forEach((hub, i) => {
    hub.counter("server_request_total", "Requests", ["plugin_tag"])({ plugin_tag: "udp" }).value = 10 * (i + 1);
    hub.gauge("cache_size", "Entries", ["plugin_tag"])({ plugin_tag: "c" }).value = i;
    const h = hub.histogram("server_request_duration_seconds", "Duration", ["plugin_tag"], [0.001, 0.01])({ plugin_tag: "udp" });
    for (let k = 0; k <= i; k++) h.observe(0.005);
  });
  // The primary's own only exist there.
  hubs[0].counter("api_requests_total", "API requests", [])({}).value = 3;
  const text = await hubs[0].textWith([
    { worker: 1, snapshot: await hubs[1].snapshot() },
    { worker: 2, snapshot: await hubs[2].snapshot() },
  ]);
  expect(text).toContain('server_request_total{plugin_tag="udp"} 60');
  expect(text).toContain('cache_size{plugin_tag="c"} 3');
  expect(text).toContain("api_requests_total 3");
  expect(text).toContain('server_request_duration_seconds_bucket{le="0.001",plugin_tag="udp"} 0');
  expect(text).toContain('server_request_duration_seconds_bucket{le="0.01",plugin_tag="udp"} 6');
  expect(text).toContain('server_request_duration_seconds_count{plugin_tag="udp"} 6');
  expect(text).toContain("# HELP server_request_total Requests");
  // Each worker's own share, beside the sum (the primary's 10 are not a worker's).
  expect(text).toContain('worker_request_total{worker="1"} 20');
  expect(text).toContain('worker_request_total{worker="2"} 30');
  expect(text).toContain("# TYPE worker_request_total counter");
  // A snapshot is plain data (it crosses the cluster channel by structured clone).
  expect(structuredClone(await hubs[1].snapshot())).toEqual(await hubs[1].snapshot());
});

test("each worker's CPU time is its own process's", async () => {
  const primary = new MetricsHub({ processMetrics: false });
  const worker = new MetricsHub();
  const snapshot = await worker.snapshot();
  const cpu = snapshot.prom.find((m) => m.name === "process_cpu_seconds_total")?.values[0]?.value;
  expect(cpu).toBeGreaterThan(0);
  const text = await primary.textWith([{ worker: 3, snapshot }]);
  expect(text).toContain(`worker_cpu_seconds_total{worker="3"} ${String(cpu)}`);
  // No DNS server in that worker: it received nothing.
  expect(text).toContain('worker_request_total{worker="3"} 0');
});
