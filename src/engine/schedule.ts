// The text of a `schedule`: time windows by weekday and time of day, and the time zone they are read in.
//
//   schedule := window ( sep window )* [ zone ]
//   window   := [ days ] HH:MM-HH:MM          (no days: every day)
//   days     := item ( "," item )*            (a list: Sat,Sun)
//   item     := day | day-day | daily | *     (a range may wrap: Fri-Mon is Fri, Sat, Sun, Mon)
//   sep      := ";" | ","                     (a "," after a time range starts the next window)
//   zone     := an IANA name (Europe/Berlin) or UTC
//
// Days are Mon..Sun or their full names, in any case. "–" (en dash) may stand for "-", and spaces around a
// dash are allowed. A window whose end is not after its start runs past midnight and belongs to the day
// it starts on: `Fri 21:00-07:00` holds Saturday 03:00, not Friday 03:00. `24:00` ends a day.
// The grammar has no ambiguity: a "," after a day continues the day list (a window still needs its
// times), a "," after a time range ends the window.

import { ArgError } from "./plugin-args.js";

export const DAY_NAMES = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"] as const;
const FULL_NAMES = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"];

export const MINUTES_PER_DAY = 1440;
export const MINUTES_PER_WEEK = 7 * MINUTES_PER_DAY;

/** One window: the days it starts on (0 = Monday) and its minutes of the day; `end <= start` runs past midnight. */
export interface ScheduleWindow {
  days: number[];
  start: number;
  end: number;
  /** The window as it reads canonically (`Sat,Sun 22:00-09:00`). */
  text: string;
}

export interface Schedule {
  windows: ScheduleWindow[];
  /** The time zone named at the end, or null when none was (the caller's default applies). */
  zone: string | null;
}

const DAYS_HINT = "a day (Mon, Tue, Wed, Thu, Fri, Sat, Sun), a range such as Mon-Fri, a list such as Sat,Sun, or daily";
const TIME_RANGE = /^(\d{1,2}):(\d{2})-(\d{1,2}):(\d{2})$/;
const TIME_LIKE = /^\d/;

/** The day's index (0 = Monday), or null. */
function dayOf(word: string): number | null {
  const w = word.toLowerCase();
  const i = FULL_NAMES.findIndex((full) => full === w || full.slice(0, 3) === w);
  return i < 0 ? null : i;
}

/** The days of one list item (`Mon`, `Fri-Mon`, `daily`, `*`), or null when it is not one. */
function dayItem(word: string): number[] | null {
  if (word === "*" || word.toLowerCase() === "daily") return [0, 1, 2, 3, 4, 5, 6];
  const dash = word.indexOf("-");
  if (dash < 0) {
    const d = dayOf(word);
    return d === null ? null : [d];
  }
  const from = dayOf(word.slice(0, dash));
  const to = dayOf(word.slice(dash + 1));
  if (from === null || to === null) return null;
  const days: number[] = [];
  for (let d = from; ; d = (d + 1) % 7) {
    days.push(d);
    if (d === to) return days;
  }
}

function minutesOf(h: string, m: string, text: string, isEnd: boolean): number {
  const hours = Number(h);
  const minutes = Number(m);
  const value = hours * 60 + minutes;
  if (minutes > 59 || value > MINUTES_PER_DAY || (value === MINUTES_PER_DAY && !isEnd)) {
    throw new ArgError(`'${text}' is not a time of day (HH:MM from 00:00 to 23:59; 24:00 only as an end)`);
  }
  return value;
}

const pad = (n: number): string => String(n).padStart(2, "0");

/** `21:00` for minute 1260 of a day. */
export function formatMinutes(value: number): string {
  return `${pad(Math.floor(value / 60))}:${pad(value % 60)}`;
}

/** Whether this build's time zone data knows `zone` (an IANA name, or UTC). */
export function isTimeZone(zone: string): boolean {
  try {
    new Intl.DateTimeFormat("en-US", { timeZone: zone });
    return true;
  } catch {
    return false;
  }
}

/** Why `zone` cannot be a schedule's time zone, or null. */
export function timeZoneProblem(zone: string): string | null {
  return isTimeZone(zone) ? null : `'${zone}' is not a time zone (an IANA name such as Europe/Berlin, or UTC)`;
}

/** The process's own time zone (the TZ environment variable, else the system's). */
export function localTimeZone(): string {
  return new Intl.DateTimeFormat().resolvedOptions().timeZone;
}

/** Tokens: words, and `,` / `;` on their own; dashes (either kind) joined to their neighbours. */
function tokens(text: string): string[] {
  const joined = text.replaceAll("–", "-").replace(/\s*-\s*/g, "-");
  return joined.match(/[,;]|[^\s,;]+/g) ?? [];
}

/** Parses a schedule's text; throws ArgError (at no path: the caller's) saying what is wrong. */
export function parseSchedule(text: string): Schedule {
  const toks = tokens(text);
  if (toks.length === 0) throw new ArgError(`a schedule needs at least one window, e.g. 'Mon-Fri 21:00-07:00'`);
  const windows: ScheduleWindow[] = [];
  let zone: string | null = null;
  let i = 0;
  while (i < toks.length) {
    // days (optional)
    const days = new Set<number>();
    const dayWords: string[] = [];
    while (i < toks.length && !TIME_LIKE.test(toks[i])) {
      const word = toks[i];
      if (word === "," || word === ";") throw new ArgError(dayWords.length === 0 ? `'${word}' where a window should start` : `'${dayWords.join(",")}${word}' ends without a day`);
      const items = dayItem(word);
      if (items === null) {
        if (dayWords.length === 0 && isTimeZone(word)) {
          throw new ArgError(windows.length === 0 ? `a schedule starts with a window, e.g. 'Mon-Fri 21:00-07:00 ${word}'` : `the time zone '${word}' follows the last window without a ',' or ';' before it`);
        }
        throw new ArgError(`'${word}' is not ${DAYS_HINT}`);
      }
      for (const d of items) days.add(d);
      dayWords.push(canonicalItem(word));
      i++;
      if (toks[i] === ",") {
        if (i + 1 >= toks.length || toks[i + 1] === "," || toks[i + 1] === ";" || TIME_LIKE.test(toks[i + 1])) throw new ArgError(`'${dayWords.join(",")},' ends without a day`);
        i++;
      }
    }
    if (i >= toks.length) throw new ArgError(`'${dayWords.join(",")}' needs a time range after it, e.g. '${dayWords.join(",")} 21:00-07:00'`);
    // times
    const range = toks[i];
    const m = TIME_RANGE.exec(range);
    if (!m) {
      const bad = /^\d{1,2}:\d{2}$/.test(range) ? `'${range}' is a time, not a time range: write start-end, e.g. '${range}-07:00'` : `'${range}' is not a time range (HH:MM-HH:MM, e.g. 21:00-07:00)`;
      throw new ArgError(bad);
    }
    const start = minutesOf(m[1], m[2], `${m[1]}:${m[2]}`, false);
    const end = minutesOf(m[3], m[4], `${m[3]}:${m[4]}`, true);
    const allDays = dayWords.length === 0;
    const dayText = allDays ? "daily" : dayWords.join(",");
    const times = `${formatMinutes(start)}-${formatMinutes(end)}`;
    if (start === end) throw new ArgError(`'${dayText} ${times}' is empty: its start and end are the same (a whole day is 00:00-24:00)`);
    windows.push({ days: allDays ? [0, 1, 2, 3, 4, 5, 6] : [...days].sort((a, b) => a - b), start, end, text: `${dayText} ${times}` });
    i++;
    // what follows: the end, a separator, or the zone (last)
    if (i >= toks.length) break;
    const next = toks[i];
    if (next === "," || next === ";") {
      if (i + 1 >= toks.length) throw new ArgError(`'${next}' at the end: another window should follow it`);
      i++;
      continue;
    }
    if (TIME_LIKE.test(next)) throw new ArgError(`one time range a window: repeat its days, e.g. '${dayText} ${times}; ${dayText} ${next}'`);
    if (dayItem(next) !== null) throw new ArgError(`windows are separated by ';' or ',': write '${dayText} ${times}; ${next} ...'`);
    if (i + 1 < toks.length) throw new ArgError(`'${toks.slice(i).join(" ")}': only the time zone may follow the last window (a day or a zone such as Europe/Berlin expected at '${next}')`);
    const problem = timeZoneProblem(next);
    if (problem !== null) throw new ArgError(problem);
    zone = next;
    i++;
  }
  return { windows, zone };
}

/** `mon-FRI` → `Mon-Fri`; `*` → `daily`. */
function canonicalItem(word: string): string {
  if (word === "*" || word.toLowerCase() === "daily") return "daily";
  return word
    .split("-")
    .map((w) => DAY_NAMES[dayOf(w) ?? 0])
    .join("-");
}

/**
 * The week as minutes from Monday 00:00 (index 0) to Sunday 23:59 (10079), 1 where a window holds it.
 * A window past midnight continues on the next day (Sunday's into Monday).
 */
export function weekMinutes(windows: readonly ScheduleWindow[]): Uint8Array {
  const week = new Uint8Array(MINUTES_PER_WEEK);
  for (const w of windows) {
    for (const d of w.days) {
      const base = d * MINUTES_PER_DAY;
      if (w.end > w.start) {
        week.fill(1, base + w.start, base + w.end);
      } else {
        week.fill(1, base + w.start, base + MINUTES_PER_DAY);
        const next = ((d + 1) % 7) * MINUTES_PER_DAY;
        week.fill(1, next, next + w.end);
      }
    }
  }
  return week;
}
