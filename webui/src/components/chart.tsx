// A time-series chart on uPlot (~22 KB gzipped, canvas-drawn, fast with many points). The caller
// passes aligned data ([x seconds[], ...series values[]]); the chart follows its container's width.

import { useEffect, useRef } from "preact/hooks";
import uPlot from "uplot";
import "uplot/dist/uPlot.min.css";

export interface ChartSeries {
  label: string;
  /** CSS colour of the line. */
  stroke: string;
  /** Scale name (two scales give the chart a left and a right axis). */
  scale?: string;
  /** Formats a value for the legend and axis. */
  format?: (value: number) => string;
}

export interface ChartProps {
  /** Accessible name: what the chart shows. */
  label: string;
  data: uPlot.AlignedData;
  series: ChartSeries[];
  height?: number;
}

const cssVar = (name: string, fallback: string): string => getComputedStyle(document.documentElement).getPropertyValue(name).trim() || fallback;

/** The data's own span, at least a minute wide (uPlot widens a single point to 1000 days). */
function timeRange(u: uPlot, min: number, max: number): uPlot.Range.MinMax {
  const xs = u.data[0];
  if (xs.length === 0) return [min, max];
  const last = xs[xs.length - 1] ?? max;
  return [Math.min(xs[0] ?? min, last - 60), last];
}

function options(series: ChartSeries[], width: number, height: number): uPlot.Options {
  const text = cssVar("--fg-muted", "#555");
  const grid = cssVar("--border", "#ddd");
  const scales = [...new Set(series.map((s) => s.scale ?? "y"))];
  return {
    width,
    height,
    legend: { live: true },
    cursor: { drag: { x: false, y: false } },
    scales: { x: { time: true, range: timeRange } },
    series: [
      {},
      ...series.map((s) => ({
        label: s.label,
        stroke: s.stroke,
        width: 2,
        scale: s.scale ?? "y",
        ...(s.format ? { value: (_u: uPlot, v: number | null) => (v === null ? "—" : s.format!(v)) } : {}),
      })),
    ],
    axes: [
      { stroke: text, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid } },
      ...scales.map((scale, i) => {
        const first = series.find((s) => (s.scale ?? "y") === scale);
        return {
          scale,
          side: i === 0 ? 3 : 1,
          stroke: text,
          grid: { show: i === 0, stroke: grid, width: 1 },
          ticks: { stroke: grid },
          size: 60,
          ...(first?.format ? { values: (_u: uPlot, vals: number[]) => vals.map((v) => first.format!(v)) } : {}),
        };
      }),
    ],
  };
}

export function Chart({ label, data, series, height = 220 }: ChartProps) {
  const host = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | null>(null);
  const shape = series.map((s) => `${s.label}:${s.scale ?? "y"}`).join("|");

  useEffect(() => {
    const el = host.current;
    if (el === null) return;
    const u = new uPlot(options(series, Math.max(200, el.clientWidth), height), data, el);
    plot.current = u;
    const resize = new ResizeObserver(() => u.setSize({ width: Math.max(200, el.clientWidth), height }));
    resize.observe(el);
    return () => {
      resize.disconnect();
      u.destroy();
      plot.current = null;
    };
    // Rebuilt only when the series change; new data goes through setData below.
  }, [shape, height]);

  useEffect(() => {
    plot.current?.setData(data);
  }, [data]);

  return <div class="chart" role="img" aria-label={label} ref={host} />;
}
