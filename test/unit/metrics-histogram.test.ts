// MetricsHub histograms: `le` is inclusive, buckets render cumulatively with +Inf, sum and count,
// label values are escaped, shapes are checked, and removed plugins' series are dropped.
import { expect, test } from "vitest";
import { MetricsHub } from "../../src/observability/metrics.js";

test("observations land in the first bucket whose bound they do not exceed; the text is cumulative", async () => {
  const hub = new MetricsHub({ processMetrics: false });
  const series = hub.histogram("t_duration_seconds", "test", ["plugin_tag"], [0.01, 0.001, 0.1])({ plugin_tag: 'a"b\\c' });
  for (const v of [0.001, 0.0005, 0.002, 0.5, Number.NaN]) series.observe(v);
  const text = await hub.text();
  const labels = 'plugin_tag="a\\"b\\\\c"';
  expect(text).toContain("# TYPE t_duration_seconds histogram");
  expect(text).toContain(`t_duration_seconds_bucket{le="0.001",${labels}} 2\n`);
  expect(text).toContain(`t_duration_seconds_bucket{le="0.01",${labels}} 3\n`);
  expect(text).toContain(`t_duration_seconds_bucket{le="0.1",${labels}} 3\n`);
  expect(text).toContain(`t_duration_seconds_bucket{le="+Inf",${labels}} 4\n`);
  expect(text).toContain(`t_duration_seconds_sum{${labels}} ${0.001 + 0.0005 + 0.002 + 0.5}\n`);
  expect(text).toContain(`t_duration_seconds_count{${labels}} 4\n`);
});

test("the same name with another shape is refused; the same shape shares the series", () => {
  const hub = new MetricsHub({ processMetrics: false });
  const a = hub.histogram("h_seconds", "h", ["plugin_tag"], [1, 2])({ plugin_tag: "x" });
  expect(hub.histogram("h_seconds", "h", ["plugin_tag"], [2, 1])({ plugin_tag: "x" })).toBe(a);
  expect(() => hub.histogram("h_seconds", "h", ["plugin_tag"], [1, 3])).toThrow(/declared twice/);
  expect(() => hub.counter("h_seconds", "h", ["plugin_tag"])).toThrow(/declared twice/);
});

test("retainTags drops the series of plugins that are gone", async () => {
  const hub = new MetricsHub({ processMetrics: false });
  const make = hub.histogram("r_seconds", "r", ["plugin_tag"], [1]);
  make({ plugin_tag: "kept" }).observe(0.5);
  make({ plugin_tag: "gone" }).observe(0.5);
  hub.retainTags(new Set(["kept"]));
  const text = await hub.text();
  expect(text).toContain('r_seconds_count{plugin_tag="kept"} 1');
  expect(text).not.toContain("gone");
});

test("process metrics carry no gauge named *_total (the per-type families stay)", async () => {
  const text = await new MetricsHub().text();
  expect(text).toMatch(/^# TYPE nodejs_active_handles gauge$/m);
  for (const m of text.matchAll(/^# TYPE (\S+) (\S+)$/gm)) {
    if (m[1].endsWith("_total")) expect(m[2], m[1]).toBe("counter");
  }
});
