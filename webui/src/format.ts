// Display formats: times in the browser's locale, durations and sizes in plain units.

const pad = (n: number, width = 2): string => String(n).padStart(width, "0");

/** HH:MM:SS.mmm of a Unix ms time (local time). */
export function clock(ms: number, withMs = false): string {
  const d = new Date(ms);
  const base = `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
  return withMs ? `${base}.${pad(d.getMilliseconds(), 3)}` : base;
}

/** A date and time, or "never" for null. */
export function when(ms: number | null | undefined): string {
  if (ms === null || ms === undefined) return "never";
  return new Date(ms).toLocaleString();
}

/** 3 d 4 h, 5 h 12 min, 4 min 10 s, 12 s. */
export function duration(ms: number): string {
  const s = Math.max(0, Math.round(ms / 1000));
  const d = Math.floor(s / 86400);
  const h = Math.floor((s % 86400) / 3600);
  const m = Math.floor((s % 3600) / 60);
  if (d > 0) return `${d} d ${h} h`;
  if (h > 0) return `${h} h ${m} min`;
  if (m > 0) return `${m} min ${s % 60} s`;
  return `${s} s`;
}

export const count = (n: number): string => n.toLocaleString();

/** The first 12 hex digits of a version digest. */
export const shortVersion = (v: string | null | undefined): string => (v ? v.slice(0, 12) : "—");

/** 512 B, 12.3 KiB, 4.0 MiB; "—" for null (no file). */
export function bytes(n: number | null | undefined): string {
  if (n === null || n === undefined) return "—";
  if (n < 1024) return `${n} B`;
  const units = ["KiB", "MiB", "GiB", "TiB"];
  let v = n / 1024;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${v.toFixed(1)} ${units[i]}`;
}

/** "in 4 min 10 s" or "4 min 10 s ago" relative to `now`. */
export function relative(ms: number, now: number): string {
  return ms >= now ? `in ${duration(ms - now)}` : `${duration(now - ms)} ago`;
}

/** A duration in milliseconds: 0.04 ms, 12.3 ms; "—" for null. */
export const millis = (v: number | null): string => (v === null ? "—" : `${v < 10 ? v.toFixed(2) : v.toFixed(1)} ms`);

/** A datetime-local input's value as Unix ms (local time), or null when empty or not a time. */
export function localMs(value: string): number | null {
  if (value === "") return null;
  const ms = new Date(value).getTime();
  return Number.isFinite(ms) ? ms : null;
}

/** Unix ms as a datetime-local value (local time, to the minute). */
export function localInput(ms: number): string {
  const d = new Date(ms - new Date(ms).getTimezoneOffset() * 60_000);
  return d.toISOString().slice(0, 16);
}

/** "1 rule", "2 rules", "1,234 rules". */
export const plural = (n: number, word: string): string => `${count(n)} ${word}${n === 1 ? "" : "s"}`;
