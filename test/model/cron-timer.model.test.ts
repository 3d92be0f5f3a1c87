// The cron job timer (machines/cron-timer.machine.ts) against the real schedule arithmetic
// (src/plugins/executors/cron/schedule.ts) on xstate's simulated clock: every transition of the machine
// is taken — the first report, a wake-up before the run is due (a wait taken in steps), a due run with
// its trigger and the next report, and a schedule that never comes round (no timer at all) — and what
// the job actor would receive is checked against the times the schedule gives.
import { createActor, setup, SimulatedClock } from "xstate";
import { expect, test } from "vitest";
import { cronTimerMachine, MAX_WAIT_MS, type CronTimerReport, type NextRun } from "../../machines/cron-timer.machine.js";
import { nextRun } from "../../src/plugins/executors/cron/schedule.js";

/** A job-like parent of the timer on a simulated clock, recording each report with the (simulated) time it came. */
function timerOn(nextRun: NextRun) {
  const clock = new SimulatedClock();
  clock.set(START);
  const events: { kind: string; at: number | null; seen: number }[] = [];
  const parent = setup({ types: { events: {} as CronTimerReport }, actors: { timer: cronTimerMachine } }).createMachine({
    invoke: { src: "timer", input: { trigger: "interval", clock: () => clock.now(), nextRun } },
    on: {
      "JOB.NEXT": { actions: ({ event }) => events.push({ kind: "next", at: event.next_run_ms, seen: clock.now() }) },
      "JOB.TICK": { actions: ({ event }) => events.push({ kind: event.trigger, at: event.scheduled_at_ms, seen: clock.now() }) },
    },
  });
  const actor = createActor(parent, { clock }).start();
  return { clock, events, actor };
}

const START = 1_000_000;

test("the timer reports the next run, then each due trigger at the time it announced", () => {
  const t = { cron: null, interval_ms: 100 };
  const { clock, events, actor } = timerOn((now, previous) => nextRun(t, now, previous));
  // Small steps, as a busy process would see them: a trigger is never early, and a late one is not repeated.
  for (let i = 0; i < 100 && events.filter((e) => e.kind === "interval").length < 3; i++) clock.increment(i === 20 ? 250 : 7);
  actor.stop();
  const seen = events.length;
  clock.increment(1000);
  // Stopped: nothing more.
  expect(events.length).toBe(seen);
  expect(events[0]).toMatchObject({ kind: "next", seen: START });
  expect((events[0].at ?? 0) - START).toBeGreaterThanOrEqual(100);
  for (let i = 1; i + 1 < events.length; i += 2) {
    const due = events[i];
    const next = events[i + 1];
    // Each trigger is the run announced before it, never early; the next one is on the 100 ms grid, after now.
    expect(due).toMatchObject({ kind: "interval", at: events[i - 1].at });
    expect(due.seen).toBeGreaterThanOrEqual(due.at as number);
    expect(next.kind).toBe("next");
    expect(((next.at as number) - (events[0].at as number)) % 100).toBe(0);
    expect(next.at as number).toBeGreaterThan(due.seen);
  }
  expect(events.filter((e) => e.kind === "interval")).toHaveLength(3);
});

test("a wait longer than a Node timer can take is taken in steps; a schedule that never comes round sets no timer", () => {
  const far = START + 3 * MAX_WAIT_MS;
  const long = timerOn((_now, previous) => (previous === null ? far : null));
  long.clock.increment(2 * MAX_WAIT_MS);
  long.clock.increment(MAX_WAIT_MS - 1);
  expect(long.events.map((e) => e.kind)).toEqual(["next"]);
  long.clock.increment(1);
  expect(long.events).toEqual([
    { kind: "next", at: far, seen: START },
    { kind: "interval", at: far, seen: far },
    { kind: "next", at: null, seen: far },
  ]);
  const never = timerOn(() => null);
  expect(never.events).toEqual([{ kind: "next", at: null, seen: START }]);
  // No timer: the simulated clock has nothing to fire, however far it moves.
  never.clock.increment(10 * MAX_WAIT_MS);
  expect(never.events).toHaveLength(1);
});
