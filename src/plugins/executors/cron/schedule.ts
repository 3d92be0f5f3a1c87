// The timer behind one cron job: computes each next run (the next match of the 5-field schedule in
// the plugin's time zone, or one interval after the previous one; the first interval run comes one
// full interval after start) and reports it, then reports the trigger when it is due. Runs missed
// while the process was busy are not replayed: the next run is always after now.

import type { Cron } from "croner";

export interface Timing {
  /** A compiled schedule, or null for an interval job. */
  cron: Cron | null;
  interval_ms: number | null;
}

export interface ScheduleEvents {
  next(at: number | null): void;
  due(trigger: "schedule" | "interval", scheduledAt: number): void;
}

/** Node timers overflow past 2^31 ms; longer waits are taken in steps. */
const MAX_WAIT_MS = 2 ** 31 - 1;

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

/** Starts the timer; returns the function that stops it. */
export function startSchedule(t: Timing, events: ScheduleEvents, clock: () => number = Date.now): () => void {
  const trigger = t.cron ? "schedule" : "interval";
  let timer: NodeJS.Timeout | null = null;
  let stopped = false;
  let next = nextRun(t, clock(), null);
  const arm = (): void => {
    if (stopped || next === null) return;
    timer = setTimeout(fire, Math.min(MAX_WAIT_MS, Math.max(0, next - clock())));
  };
  const fire = (): void => {
    timer = null;
    const now = clock();
    if (next === null || now < next) return arm();
    const at = next;
    next = nextRun(t, now, at);
    events.due(trigger, at);
    events.next(next);
    arm();
  };
  events.next(next);
  arm();
  return () => {
    stopped = true;
    if (timer) clearTimeout(timer);
  };
}
