// The process and runtime metrics: prom-client's defaults, all but the GC histogram, whose
// PerformanceObserver made every collection leave garbage in the old generation.

import { execFileSync } from "node:child_process";
import { join } from "node:path";
import { collectDefaultMetrics, Registry } from "prom-client";
import { expect, test } from "vitest";
import { MetricsHub } from "../../src/observability/metrics.js";

const root = join(import.meta.dirname, "..", "..");

test("every default metric of prom-client is there but nodejs_gc_duration_seconds", async () => {
  const defaults = new Registry();
  collectDefaultMetrics({ register: defaults });
  const expected = (await defaults.getMetricsAsJSON())
    .map((m) => m.name)
    .filter((n) => n !== "nodejs_gc_duration_seconds" && !["nodejs_active_handles_total", "nodejs_active_requests_total", "nodejs_active_resources_total"].includes(n));
  const hub = new MetricsHub();
  const names = (await hub.registry.getMetricsAsJSON()).map((m) => m.name);
  expect(names.sort()).toEqual(expected.sort());
  expect(await hub.text()).not.toContain("nodejs_gc_duration_seconds");
});

/** Bytes each scavenge moved to the old generation, in a child process that makes garbage for 0.3 s (V8's own trace). */
function promotedPerScavenge(setup: string): number[] {
  const script = `${setup}
let keep;
const end = Date.now() + 300;
const churn = () => { for (let i = 0; i < 20000; i++) keep = { a: i, b: [i, i] }; if (Date.now() < end) setImmediate(churn); else process.exit(0); };
churn();`;
  const out = execFileSync(process.execPath, ["--trace-gc-nvp", "--input-type=module", "-e", script], { encoding: "utf8", cwd: root, maxBuffer: 64 * 1024 * 1024 });
  return out
    .split("\n")
    .filter((l) => l.includes(" gc=s "))
    .map((l) => Number(/ promoted=(\d+)/.exec(l)?.[1]))
    .slice(-10);
}

test("the metrics leave nothing in the old generation at each collection, where a GC observer leaves kilobytes", () => {
  const hub = `import { MetricsHub } from ${JSON.stringify(join(root, "dist", "src", "observability", "metrics.js"))}; const hub = new MetricsHub();`;
  const withHub = promotedPerScavenge(hub);
  expect(withHub).toHaveLength(10);
  expect(Math.max(...withHub)).toBeLessThan(500);
  // The control: the same process with the observer prom-client's GC histogram registers.
  const observed = promotedPerScavenge(`${hub} import { PerformanceObserver } from "node:perf_hooks"; new PerformanceObserver((l) => l.getEntries()).observe({ entryTypes: ["gc"] });`);
  expect(Math.min(...observed)).toBeGreaterThan(2000);
});
