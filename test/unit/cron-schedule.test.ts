// The cron job timer's arithmetic: next runs for schedules (in a time zone) and intervals (missed
// runs are not replayed). The timer actor itself: test/model/cron-timer.model.test.ts.
import { expect, test } from "vitest";
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
