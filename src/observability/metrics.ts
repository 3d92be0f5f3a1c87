// Prometheus metrics. Plugins count into plain number cells (`cell.value++` on the hot path);
// prom-client reads the cells at scrape time. Cells are keyed by name and labels, so a plugin
// rebuilt by a reload with the same tag keeps counting where the old one stopped. Histograms are
// our own typed-array series (./histogram.ts), appended to prom-client's exposition. Every name
// passes `promtool check metrics` (test/integration/metrics-promtool.test.ts).

import { AggregatorRegistry, Counter, Gauge, Registry } from "prom-client";
import { HistogramFamily, type HistogramSeries } from "./histogram.js";
import { collectProcessMetrics } from "./process-metrics.js";

/**
 * One process's metrics as they travel to the primary of several (src/app/workers/): prom-client's
 * JSON of its registry and the histograms' raw series, so the primary can show one process's view.
 */
export interface MetricsSnapshot {
  /** prom-client's registry as JSON, plain data (what AggregatorRegistry.aggregate takes). */
  prom: PromMetric[];
  histograms: HistogramSnapshot[];
}

interface PromMetric {
  name: string;
  help: string;
  type: string;
  aggregator: string;
  values: { value: number; labels: Record<string, string | number>; metricName?: string }[];
}

/** A data-plane worker's snapshot and its number (`worker:<n>` in /api/actors). */
export interface WorkerMetrics {
  worker: number;
  snapshot: MetricsSnapshot;
}

export interface HistogramSnapshot {
  name: string;
  help: string;
  labelNames: string[];
  bounds: number[];
  series: { labels: Labels; counts: number[]; sum: number; count: number }[];
}

export { DNS_DURATION_BUCKETS, type Observer } from "./histogram.js";

export interface Cell {
  value: number;
}

type Labels = Record<string, string>;

/**
 * prom-client's default gauges named `*_total` (promtool: only counters end in `_total`); each is
 * the sum over the `type` label of the same family without the suffix, e.g. `nodejs_active_handles`.
 */
const GAUGES_NAMED_TOTAL = ["nodejs_active_handles_total", "nodejs_active_requests_total", "nodejs_active_resources_total"];

interface Family {
  type: "counter" | "gauge";
  labelNames: readonly string[];
  cells: Map<string, { labels: Labels; cell: Cell }>;
}

/** How often the event loop delay histogram (`nodejs_eventloop_lag_*`) takes a sample. */
const EVENT_LOOP_SAMPLE_MS = 100;

export class MetricsHub {
  /** prom-client's part (process metrics, counters, gauges); `text()` is the whole exposition. */
  readonly registry = new Registry();
  private readonly families = new Map<string, Family>();
  private readonly histograms = new Map<string, HistogramFamily>();
  /** Run before each scrape: owners of cells kept up to date elsewhere (another thread) refresh them. */
  private readonly refreshers = new Set<() => void>();

  constructor(options: { processMetrics?: boolean } = {}) {
    if (options.processMetrics !== false) {
      // The event loop delay histogram samples every 100 ms, not prom-client's 10: its timer alone woke an idle
      // Sluice 100 times a second (~1 % of a core), and 10 samples a second still fill its percentiles.
      // prom-client's defaults but its GC histogram (./process-metrics.ts says why).
      collectProcessMetrics(this.registry, EVENT_LOOP_SAMPLE_MS);
      for (const name of GAUGES_NAMED_TOTAL) this.registry.removeSingleMetric(name);
    }
  }

  private family(name: string, help: string, type: "counter" | "gauge", labelNames: readonly string[]): Family {
    const existing = this.families.get(name);
    if (existing) {
      if (existing.type !== type || existing.labelNames.join() !== labelNames.join()) {
        throw new Error(`metric '${name}' declared twice with different shapes`);
      }
      return existing;
    }
    if (this.histograms.has(name)) throw new Error(`metric '${name}' declared twice with different shapes`);
    const fam: Family = { type, labelNames, cells: new Map() };
    this.families.set(name, fam);
    const config = {
      name,
      help,
      labelNames: [...labelNames],
      registers: [this.registry],
    };
    if (type === "counter") {
      new Counter({
        ...config,
        collect(this: Counter) {
          this.reset();
          for (const { labels, cell } of fam.cells.values()) this.inc(labels, cell.value);
        },
      });
    } else {
      new Gauge({
        ...config,
        collect(this: Gauge) {
          this.reset();
          for (const { labels, cell } of fam.cells.values()) this.set(labels, cell.value);
        },
      });
    }
    return fam;
  }

  private cell(fam: Family, labels: Labels): Cell {
    const key = fam.labelNames.map((n) => labels[n] ?? "").join("\u0000");
    let entry = fam.cells.get(key);
    if (!entry) {
      entry = { labels, cell: { value: 0 } };
      fam.cells.set(key, entry);
    }
    return entry.cell;
  }

  /** Declares a counter family; returns a function that hands out its cells. */
  counter(name: string, help: string, labelNames: readonly string[]): (labels: Labels) => Cell {
    const fam = this.family(name, help, "counter", labelNames);
    return (labels) => this.cell(fam, labels);
  }

  gauge(name: string, help: string, labelNames: readonly string[]): (labels: Labels) => Cell {
    const fam = this.family(name, help, "gauge", labelNames);
    return (labels) => this.cell(fam, labels);
  }

  /**
   * Declares a histogram family (`_bucket`, `_sum`, `_count`); returns a function that hands out
   * the series for a label set. Keep the series and call `observe` on the hot path.
   */
  histogram(name: string, help: string, labelNames: readonly string[], buckets: readonly number[]): (labels: Labels) => HistogramSeries {
    let fam = this.histograms.get(name);
    if (fam) {
      if (fam.labelNames.join() !== labelNames.join() || fam.bounds.join() !== [...buckets].sort((a, b) => a - b).join()) {
        throw new Error(`metric '${name}' declared twice with different shapes`);
      }
    } else {
      if (this.families.has(name) || this.registry.getSingleMetric(name)) throw new Error(`metric '${name}' declared twice with different shapes`);
      fam = new HistogramFamily(name, help, labelNames, buckets);
      this.histograms.set(name, fam);
    }
    const f = fam;
    return (labels) => f.get(labels);
  }

  /** Drops the cells of plugins that no longer exist (after a reload). */
  retainTags(live: ReadonlySet<string>): void {
    for (const fam of this.families.values()) {
      for (const [key, { labels }] of fam.cells) {
        if (labels.plugin_tag !== undefined && !live.has(labels.plugin_tag)) fam.cells.delete(key);
      }
    }
    for (const fam of this.histograms.values()) {
      for (const [key, { labels }] of fam.series) {
        if (labels.plugin_tag !== undefined && !live.has(labels.plugin_tag)) fam.series.delete(key);
      }
    }
  }

  /** Calls `refresh` before every scrape (text and snapshot); returns the call that stops it. */
  beforeCollect(refresh: () => void): () => void {
    this.refreshers.add(refresh);
    return () => this.refreshers.delete(refresh);
  }

  private refresh(): void {
    for (const r of this.refreshers) r();
  }

  /** The whole exposition: prom-client's families, then the histograms. */
  async text(): Promise<string> {
    this.refresh();
    return render(await this.registry.metrics(), [...this.histograms.values()]);
  }

  /** This process's metrics for the primary's aggregation. */
  async snapshot(): Promise<MetricsSnapshot> {
    this.refresh();
    const histograms = [...this.histograms.values()].map((h) => ({
      name: h.name,
      help: h.help,
      labelNames: [...h.labelNames],
      bounds: [...h.bounds],
      series: [...h.series.values()].map((s) => ({ labels: s.labels, counts: [...s.counts], sum: s.sum, count: s.count })),
    }));
    const prom = (await this.registry.getMetricsAsJSON()).map((m) => ({
      name: m.name,
      help: m.help,
      type: String(m.type),
      aggregator: String(m.aggregator),
      values: m.values.map((v) => ({ value: v.value, labels: { ...v.labels } as Record<string, string | number>, ...("metricName" in v && typeof v.metricName === "string" ? { metricName: v.metricName } : {}) })),
    }));
    return { prom, histograms };
  }

  /**
   * The exposition of this process and the workers' as one: counters and histograms added, gauges
   * added unless prom-client's own metric says otherwise (its cluster aggregation); plus, per worker,
   * what it received and the CPU it spent, so an uneven spread (flow hashing) shows.
   */
  async textWith(workers: readonly WorkerMetrics[]): Promise<string> {
    const all = [await this.snapshot(), ...workers.map((w) => w.snapshot)];
    const merged = new Map<string, HistogramFamily>();
    for (const h of all.flatMap((a) => a.histograms)) {
      let fam = merged.get(h.name);
      if (!fam) merged.set(h.name, (fam = new HistogramFamily(h.name, h.help, h.labelNames, h.bounds)));
      if (fam.bounds.length !== h.bounds.length) continue;
      for (const s of h.series) {
        const into = fam.get(s.labels);
        for (let i = 0; i < into.counts.length && i < s.counts.length; i++) into.counts[i] += s.counts[i];
        into.sum += s.sum;
        into.count += s.count;
      }
    }
    const prom = AggregatorRegistry.aggregate([...all.map((a) => a.prom), perWorker(workers)]);
    return render(await prom.metrics(), [...merged.values()]);
  }
}

/** Every value of the metric `name` in one process's prom-client JSON, added. */
function total(prom: readonly PromMetric[], name: string): number {
  return prom.find((m) => m.name === name)?.values.reduce((sum, v) => sum + v.value, 0) ?? 0;
}

/** `worker_request_total` and `worker_cpu_seconds_total`, one series per worker, from each one's own snapshot. */
function perWorker(workers: readonly WorkerMetrics[]): PromMetric[] {
  const counter = (name: string, help: string, of: (w: WorkerMetrics) => number): PromMetric => ({
    name,
    help,
    type: "counter",
    aggregator: "sum",
    values: workers.map((w) => ({ value: of(w), labels: { worker: String(w.worker) } })),
  });
  return [
    counter("worker_request_total", "DNS requests received by each data-plane worker", (w) => total(w.snapshot.prom, "server_request_total")),
    counter("worker_cpu_seconds_total", "CPU time of each data-plane worker's process, seconds", (w) => total(w.snapshot.prom, "process_cpu_seconds_total")),
  ];
}

function render(base: string, histograms: readonly HistogramFamily[]): string {
  if (histograms.length === 0) return base;
  return `${base}\n${histograms.map((h) => h.render()).join("\n\n")}\n`;
}
