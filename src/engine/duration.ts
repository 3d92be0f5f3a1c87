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

/** "500ms", "10s", "2m": a bound as it reads best in a message. */
function shown(ms: number): string {
  if (ms % 3_600_000 === 0) return `${ms / 3_600_000}h`;
  if (ms % 60_000 === 0) return `${ms / 60_000}m`;
  if (ms % 1000 === 0) return `${ms / 1000}s`;
  return `${ms}ms`;
}

/** Why the setting `key` is not a duration between `minMs` and `maxMs`, or null (also when unset). */
export function durationProblem(key: string, value: number | string | undefined, minMs: number, maxMs: number): string | null {
  if (value === undefined) return null;
  let ms: number;
  try {
    ms = parseDuration(value);
  } catch (err) {
    return `${key}: ${(err as Error).message}`;
  }
  return ms < minMs || ms > maxMs ? `${key} must be between ${shown(minMs)} and ${shown(maxMs)}` : null;
}
