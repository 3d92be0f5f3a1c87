// Whether an instant falls in a schedule's week, and until when that stays so, read in a time zone.
//
// A query must not pay for time zone arithmetic: `inside(t)` answers from a cached span [from, until)
// with two compares. Only when `t` leaves the span is the wall clock of the zone read again (one
// Intl formatToParts) and the next boundary found: the next minute of the week where the answer
// changes, turned back into an instant with the zone's current UTC offset. When the offset at that
// instant differs (a DST change lies between), the span ends at the change instead — found by
// bisection to the second — and is worked out again from there with the new offset. So the answer is
// computed once per boundary and once per offset change, never per query.
//
// Windows are wall-clock time: on the night clocks go forward a window over the skipped hour is an
// hour shorter (one lying wholly inside it does not happen), on the night they go back one over the
// repeated hour is an hour longer (it holds both passes of that hour).
// Assumed: a zone's offset changes at most once between two boundaries (at most a week apart), and
// offsets are whole seconds (every zone of the tz database since the 1970s).

import { MINUTES_PER_DAY, MINUTES_PER_WEEK } from "./schedule.js";

const MINUTE = 60_000;

/** The wall clock of `t` in the zone. */
interface Wall {
  /** The local date and time read as if it were UTC, ms (whole seconds). */
  local: number;
  /** `local` minus `t` rounded down to its second: the zone's UTC offset at `t`. */
  offset: number;
  /** Minutes since the local Monday 00:00. */
  minuteOfWeek: number;
}

export class ScheduleClock {
  private readonly format: Intl.DateTimeFormat;
  private from = 0;
  private until = -1;
  private state = false;
  /** How often the span was worked out (tests check a query does not). */
  refreshes = 0;
  /** Whether every minute of the week has the same answer (then it never changes). */
  private readonly constant: boolean;

  constructor(
    private readonly week: Uint8Array,
    readonly zone: string,
  ) {
    this.format = new Intl.DateTimeFormat("en-US", { timeZone: zone, hourCycle: "h23", year: "numeric", month: "numeric", day: "numeric", hour: "numeric", minute: "numeric", second: "numeric" });
    this.constant = week.every((v) => v === week[0]);
  }

  /** Whether Unix ms `t` lies in a window. */
  inside(t: number): boolean {
    if (t < this.until && t >= this.from) return this.state;
    const span = this.spanAt(t);
    this.from = t;
    this.until = span.until;
    this.state = span.inside;
    return span.inside;
  }

  /** The answer at Unix ms `t` and the instant it may next change (Infinity: never). */
  spanAt(t: number): { inside: boolean; until: number } {
    this.refreshes++;
    if (this.constant) return { inside: this.week[0] === 1, until: Infinity };
    const wall = this.wallAt(t);
    const inside = this.week[wall.minuteOfWeek] === 1;
    let k = 1;
    while (k < MINUTES_PER_WEEK && this.week[(wall.minuteOfWeek + k) % MINUTES_PER_WEEK] === this.week[wall.minuteOfWeek]) k++;
    // The start of the local minute as an instant, then k minutes on at the same offset.
    const second = t - mod(t, 1000);
    const minuteStart = second - mod(wall.local, MINUTE);
    const candidate = minuteStart + k * MINUTE;
    if (this.wallAt(candidate).offset === wall.offset) return { inside, until: candidate };
    return { inside, until: this.offsetChange(second, candidate, wall.offset) };
  }

  /** The first whole second in (lo, hi] where the offset is no longer `offset` (it is at lo, and not at hi). */
  private offsetChange(lo: number, hi: number, offset: number): number {
    while (hi - lo > 1000) {
      const mid = lo + Math.floor((hi - lo) / 2000) * 1000;
      if (this.wallAt(mid).offset === offset) lo = mid;
      else hi = mid;
    }
    return hi;
  }

  private wallAt(t: number): Wall {
    let year = 0;
    let month = 0;
    let day = 0;
    let hour = 0;
    let minute = 0;
    let second = 0;
    for (const part of this.format.formatToParts(t)) {
      const v = Number(part.value);
      if (part.type === "year") year = v;
      else if (part.type === "month") month = v;
      else if (part.type === "day") day = v;
      else if (part.type === "hour") hour = v;
      else if (part.type === "minute") minute = v;
      else if (part.type === "second") second = v;
    }
    const local = Date.UTC(year, month - 1, day, hour, minute, second);
    const weekday = (new Date(local).getUTCDay() + 6) % 7;
    return { local, offset: local - (t - mod(t, 1000)), minuteOfWeek: weekday * MINUTES_PER_DAY + hour * 60 + minute };
  }
}

function mod(a: number, n: number): number {
  return ((a % n) + n) % n;
}
