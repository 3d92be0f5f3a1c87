// Durations in configuration: an integer (seconds) or "<n><unit>" with unit ms, s, m, h or d.

const UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

export const durationSchema = { type: ["integer", "string"], minimum: 0 } as const;

/** Milliseconds; throws with a readable message on anything else. */
export function parseDuration(value: number | string): number {
  if (typeof value === "number") {
    if (!Number.isInteger(value) || value < 0) throw new Error(`duration ${value} must be a non-negative integer of seconds`);
    return value * 1000;
  }
  const m = /^\s*(\d+)\s*(ms|s|m|h|d)?\s*$/i.exec(value);
  if (!m) throw new Error(`'${value}' is not a duration (examples: 30, 500ms, 5s, 10m, 1h, 1d)`);
  return Number(m[1]) * UNITS[(m[2] ?? "s").toLowerCase()];
}
