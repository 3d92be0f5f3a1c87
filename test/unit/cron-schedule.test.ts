// The cron job timer: next-run arithmetic for schedules (in a time zone) and intervals (missed runs
// are not replayed), and the timer actor (machines/cron-timer.machine.ts, on xstate's simulated
// clock) reporting each next run and each due trigger.
import { createActor, setup, SimulatedClock } from "xstate";
import { expect, test } from "vitest";
import { cronTimerMachine, MAX_WAIT_MS, type CronTimerReport, type NextRun } from "../../machines/cron-timer.machine.js";
import { compileSchedule, intervalMs, parseExecutor } from "../../src/plugins/executors/cron/args.js";
import { nextRun } from "../../src/plugins/executors/cron/schedule.js";

const at = (iso: string): number => Date.parse(iso);

test("a schedule's next run is the next match in its time zone", () => {
  const berlin = { cron: compileSchedule("30 3 * * *", "Europe/Berlin", []), interval_ms: null };
  // 03:30 in Berlin is 01:30 UTC in summer (CEST) and 02:30 UTC in winter (CET).
  expect(nextRun(berlin, at("2025-07-01T00:00:00Z"), null)).toBe(at("2025-07-01T01:30:00Z"));
  expect(nextRun(berlin, at("2025-12-01T05:00:00Z"), null)).toBe(at("2025-12-02T02:30:00Z"));
  const utc = { cron: compileSchedule("*/15 * * * *", "UTC", []), interval_ms: null };
  // Due at 10:15 but handled at 10:47: the next run is 11:00, the missed ones are not made up.
  expect(nextRun(utc, at("2025-01-01T10:47:00Z"), at("2025-01-01T10:15:00Z"))).toBe(at("2025-01-01T11:00:00Z"));
  expect(nextRun({ cron: compileSchedule("@daily", "UTC", []), interval_ms: null }, at("2025-01-01T10:00:00Z"), null)).toBe(at("2025-01-02T00:00:00Z"));
});

test("an interval's first run is one interval after start; a late run does not cause catch-up runs", () => {
  const t = { cron: null, interval_ms: 60_000 };
  expect(nextRun(t, 1_000_000, null)).toBe(1_060_000);
  expect(nextRun(t, 1_060_005, 1_060_000)).toBe(1_120_000);
  // Five minutes late: the next run is the first slot after now, not five in a row.
  expect(nextRun(t, 1_360_500, 1_060_000)).toBe(1_420_000);
});

test("arguments: intervals below 1 s, six fields and bad fields are refused; executors are $tag, quick setup or tag", () => {
  expect(intervalMs("1s", [])).toBe(1000);
  expect(intervalMs(2, [])).toBe(2000);
  expect(() => intervalMs("999ms", [])).toThrow(/shorter than the minimum of 1s/);
  expect(() => compileSchedule("0 0 3 * * *", undefined, [])).toThrow(/has 6 fields/);
  expect(() => compileSchedule("0 3 * *", undefined, [])).toThrow(/has 4 fields/);
  expect(() => compileSchedule("0 0 30 2 *", undefined, [])).toThrow(/never comes round/);
  const types = (w: string): boolean => ["sleep", "reload", "reload_provider"].includes(w);
  expect(parseExecutor("$dl", types, [])).toEqual({ tag: "dl" });
  expect(parseExecutor("reload_provider $ads", types, [])).toEqual({ quick: "reload_provider $ads", type: "reload_provider" });
  expect(parseExecutor("reload", types, [])).toEqual({ quick: "reload", type: "reload" });
  expect(parseExecutor("fetch_ads", types, [])).toEqual({ tag: "fetch_ads" });
  expect(() => parseExecutor("no such thing", types, [])).toThrow(/neither an executor type of this build nor a plugin tag/);
  expect(() => parseExecutor("cron x", types, [])).toThrow(/cannot run another cron/);
});

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
