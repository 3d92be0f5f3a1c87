// When a cron job next runs: the next match of the 5-field schedule in the plugin's time zone
// (croner), or one interval after the previous run (the first interval run comes one full interval
// after start). Runs missed while the process was busy are not replayed: the next run is always
// after now. The job's timer (machines/cron-timer.machine.ts) waits for it.

import type { Cron } from "croner";
import { MAX_WAIT_MS } from "../../../../machines/cron-timer.machine.js";

export interface Timing {
  /** A compiled schedule, or null for an interval job. */
  cron: Cron | null;
  interval_ms: number | null;
}

/** The first run after `now` that follows `previous` (null: a schedule that never comes round again). */
export function nextRun(t: Timing, now: number, previous: number | null): number | null {
  if (t.cron) {
    const next = t.cron.nextRun(new Date(Math.max(now, previous ?? now)));
    return next ? next.getTime() : null;
  }
  const every = t.interval_ms ?? MAX_WAIT_MS;
  if (previous === null) return now + every;
  const behind = Math.max(0, now - previous);
  return previous + every * (Math.floor(behind / every) + 1);
}
