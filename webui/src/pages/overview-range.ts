// The Overview's time range: a preset (the last hour, day or week, ending now) or a custom span,
// turned into the since/until of every stats request and the bucket layout of stats/timeseries
// (minute buckets up to 12 hours, hour buckets beyond, at most the route's 720).

import { localMs } from "../format";

export type Preset = "1h" | "24h" | "7d" | "custom";

export const PRESETS: { id: Preset; label: string }[] = [
  { id: "1h", label: "1 h" },
  { id: "24h", label: "24 h" },
  { id: "7d", label: "7 d" },
  { id: "custom", label: "Custom" },
];

const MINUTE = 60_000;
const HOUR = 3_600_000;
const SPAN: Record<Exclude<Preset, "custom">, number> = { "1h": HOUR, "24h": 24 * HOUR, "7d": 7 * 24 * HOUR };
const MAX_BUCKETS = 720;

export interface Window {
  sinceMs: number;
  untilMs: number;
  bucket: "minute" | "hour";
  buckets: number;
  /** True when the span is longer than the chart's 720 buckets can show (the other panels still cover it all). */
  chartClipped: boolean;
}

function layout(sinceMs: number, untilMs: number): Window {
  const span = untilMs - sinceMs;
  const bucket = span <= 12 * HOUR ? "minute" : "hour";
  const size = bucket === "minute" ? MINUTE : HOUR;
  const needed = Math.max(1, Math.ceil(span / size));
  return { sinceMs, untilMs, bucket, buckets: Math.min(MAX_BUCKETS, needed), chartClipped: needed > MAX_BUCKETS };
}

/** The window of a preset ending at `now`, or of a custom span; a string says why a custom span is not usable. */
export function windowOf(preset: Preset, now: number, customSince: string, customUntil: string): Window | string {
  if (preset !== "custom") return layout(now - SPAN[preset], now);
  const since = localMs(customSince);
  const until = localMs(customUntil) ?? now;
  if (since === null) return "Choose when the custom range starts.";
  if (since >= until) return "The custom range must start before it ends.";
  return layout(since, until);
}
