// The `schedule` matcher's arithmetic: its grammar (src/engine/schedule.ts) and the answer with its next
// boundary in a time zone (src/engine/schedule-clock.ts) across midnight, the week's end and DST changes,
// checked minute by minute against an evaluation that reads each instant's wall clock on its own.
// The matcher over real sockets: test/integration/schedule.test.ts.
import { expect, test } from "vitest";
import { ScheduleClock } from "../../src/engine/schedule-clock.js";
import { parseSchedule, weekMinutes, type ScheduleWindow } from "../../src/engine/schedule.js";

const at = (iso: string): number => Date.parse(iso);
const MINUTE = 60_000;

const texts = (s: string): string[] => parseSchedule(s).windows.map((w) => w.text);

function clockOf(text: string): ScheduleClock {
  const s = parseSchedule(text);
  return new ScheduleClock(weekMinutes(s.windows), s.zone ?? "UTC");
}

/** Every change of the answer from `from` to `to`, as `ISO in|out`, walking the clock's own spans. */
function flips(text: string, from: string, to: string): string[] {
  const clock = clockOf(text);
  const out: string[] = [];
  let t = at(from);
  let last = clock.spanAt(t).inside;
  while (t < at(to)) {
    const span = clock.spanAt(t);
    if (span.inside !== last) out.push(`${new Date(t).toISOString().slice(0, 16)}Z ${span.inside ? "in" : "out"}`);
    last = span.inside;
    if (span.until <= t) throw new Error(`span at ${new Date(t).toISOString()} does not move on`);
    t = span.until;
  }
  return out;
}

/** The answer at `t` from the wall clock alone (weekday name and time from Intl), window by window. */
const formats = new Map<string, Intl.DateTimeFormat>();
function expected(windows: readonly ScheduleWindow[], zone: string, t: number): boolean {
  let format = formats.get(zone);
  if (!format) formats.set(zone, (format = new Intl.DateTimeFormat("en-GB", { timeZone: zone, weekday: "short", hour: "2-digit", minute: "2-digit", hourCycle: "h23" })));
  const parts = format.formatToParts(t);
  const get = (type: string): string => parts.find((p) => p.type === type)?.value ?? "";
  const day = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"].indexOf(get("weekday"));
  const minute = Number(get("hour")) * 60 + Number(get("minute"));
  return windows.some((w) => {
    if (w.end > w.start) return w.days.includes(day) && minute >= w.start && minute < w.end;
    return (w.days.includes(day) && minute >= w.start) || (w.days.includes((day + 6) % 7) && minute < w.end);
  });
}

/** Asks the clock at every minute (and half minute) of [from, from + days) in order and compares. */
function agreesMinuteByMinute(text: string, from: string, days: number): number {
  const s = parseSchedule(text);
  const zone = s.zone ?? "UTC";
  const clock = new ScheduleClock(weekMinutes(s.windows), zone);
  const start = at(from);
  for (let t = start; t < start + days * 1440 * MINUTE; t += MINUTE / 2) {
    const want = expected(s.windows, zone, t);
    if (clock.inside(t) !== want) throw new Error(`${text}: at ${new Date(t).toISOString()} expected ${want ? "inside" : "outside"}`);
  }
  return clock.refreshes;
}

test("grammar: days, ranges that wrap, lists, daily, en dashes, separators and the zone", () => {
  expect(parseSchedule("Mon-Fri 21:00-07:00 Europe/Berlin")).toMatchObject({ windows: [{ days: [0, 1, 2, 3, 4], start: 1260, end: 420, text: "Mon-Fri 21:00-07:00" }], zone: "Europe/Berlin" });
  expect(parseSchedule("Mon–Fri 21:00–07:00 Europe/Berlin").windows[0].text).toBe("Mon-Fri 21:00-07:00");
  expect(parseSchedule("fri-mon 8:30-9:00").windows[0]).toMatchObject({ days: [0, 4, 5, 6], start: 510, end: 540, text: "Fri-Mon 08:30-09:00" });
  expect(parseSchedule("Mon-Fri 21:00-07:00; Sat,Sun 22:00-09:00 UTC")).toMatchObject({ windows: [{ text: "Mon-Fri 21:00-07:00" }, { days: [5, 6], text: "Sat,Sun 22:00-09:00" }], zone: "UTC" });
  expect(texts("Mon-Fri 21:00-07:00, Sat, Sun 22:00 - 09:00")).toEqual(["Mon-Fri 21:00-07:00", "Sat,Sun 22:00-09:00"]);
  expect(texts("Saturday,SUNDAY 10:00-12:00")).toEqual(["Sat,Sun 10:00-12:00"]);
  expect(texts("daily 00:00-24:00; * 01:00-02:00; 03:00-04:00")).toEqual(["daily 00:00-24:00", "daily 01:00-02:00", "daily 03:00-04:00"]);
  expect(parseSchedule("21:00-07:00").zone).toBeNull();
  expect(parseSchedule("Mon 22:00-00:00 America/Port-au-Prince").zone).toBe("America/Port-au-Prince");
});

test("grammar: what is refused says why", () => {
  const error = (s: string): string => {
    try {
      parseSchedule(s);
    } catch (err) {
      return (err as Error).message;
    }
    throw new Error(`'${s}' was accepted`);
  };
  expect(error("")).toMatch(/at least one window/);
  expect(error("Mox 21:00-07:00")).toBe("'Mox' is not a day (Mon, Tue, Wed, Thu, Fri, Sat, Sun), a range such as Mon-Fri, a list such as Sat,Sun, or daily");
  expect(error("Mon-Fro 21:00-07:00")).toMatch(/^'Mon-Fro' is not a day/);
  expect(error("Mon-Fri 25:00-07:00")).toBe("'25:00' is not a time of day (HH:MM from 00:00 to 23:59; 24:00 only as an end)");
  expect(error("Mon 10:60-11:00")).toMatch(/^'10:60' is not a time of day/);
  expect(error("Mon 24:00-11:00")).toMatch(/^'24:00' is not a time of day/);
  expect(error("Mon 21:00")).toBe("'21:00' is a time, not a time range: write start-end, e.g. '21:00-07:00'");
  expect(error("Mon 9-17")).toMatch(/^'9-17' is not a time range/);
  expect(error("Mon 10:00-10:00")).toBe("'Mon 10:00-10:00' is empty: its start and end are the same (a whole day is 00:00-24:00)");
  expect(error("Mon-Fri")).toMatch(/^'Mon-Fri' needs a time range after it/);
  expect(error("Mon-Fri 21:00-07:00 Europe/Berln")).toBe("'Europe/Berln' is not a time zone (an IANA name such as Europe/Berlin, or UTC)");
  expect(error("Mon-Fri 21:00-07:00 Sat 22:00-09:00")).toBe("windows are separated by ';' or ',': write 'Mon-Fri 21:00-07:00; Sat ...'");
  expect(error("Mon,Wed 07:00-08:00 21:00-23:00")).toBe("one time range a window: repeat its days, e.g. 'Mon,Wed 07:00-08:00; Mon,Wed 21:00-23:00'");
  expect(error("Mon 21:00-07:00 UTC Tue 10:00-11:00")).toMatch(/only the time zone may follow the last window/);
  expect(error("Mon 21:00-07:00; UTC")).toBe("the time zone 'UTC' follows the last window without a ',' or ';' before it");
  expect(error("Europe/Berlin")).toBe("a schedule starts with a window, e.g. 'Mon-Fri 21:00-07:00 Europe/Berlin'");
  expect(error("Mon 21:00-07:00;")).toMatch(/another window should follow/);
  expect(error("Sat, 10:00-11:00")).toMatch(/ends without a day/);
});

test("a window past midnight belongs to the day it starts; Sunday's runs into Monday", () => {
  // 2025-03-07 is a Friday.
  expect(flips("Fri 21:00-07:00 UTC", "2025-03-03T00:00Z", "2025-03-17T00:00Z")).toEqual(["2025-03-07T21:00Z in", "2025-03-08T07:00Z out", "2025-03-14T21:00Z in", "2025-03-15T07:00Z out"]);
  expect(flips("Sun 22:00-06:00 UTC", "2025-03-03T00:00Z", "2025-03-11T00:00Z")).toEqual(["2025-03-03T06:00Z out", "2025-03-09T22:00Z in", "2025-03-10T06:00Z out"]);
  // Adjacent windows make one span: Friday night into Saturday's morning window.
  expect(flips("Fri 21:00-07:00; Sat 07:00-09:00 UTC", "2025-03-03T00:00Z", "2025-03-10T00:00Z")).toEqual(["2025-03-07T21:00Z in", "2025-03-08T09:00Z out"]);
  expect(clockOf("daily 00:00-24:00").spanAt(at("2025-03-03T10:00Z"))).toEqual({ inside: true, until: Infinity });
});

test("Europe/Berlin's spring change: the window is an hour shorter; one inside the skipped hour does not happen", () => {
  // Sunday 2025-03-30: 02:00 CET becomes 03:00 CEST at 01:00 UTC.
  expect(flips("Sat 21:00-07:00 Europe/Berlin", "2025-03-29T00:00Z", "2025-03-31T00:00Z")).toEqual(["2025-03-29T20:00Z in", "2025-03-30T05:00Z out"]);
  expect(flips("Sun 02:00-02:30 Europe/Berlin", "2025-03-29T00:00Z", "2025-03-31T00:00Z")).toEqual([]);
  expect(flips("Sun 02:15-04:00 Europe/Berlin", "2025-03-29T00:00Z", "2025-03-31T00:00Z")).toEqual(["2025-03-30T01:00Z in", "2025-03-30T02:00Z out"]);
  expect(flips("Sun 01:30-02:30 Europe/Berlin", "2025-03-29T00:00Z", "2025-03-31T00:00Z")).toEqual(["2025-03-30T00:30Z in", "2025-03-30T01:00Z out"]);
  expect(flips("Mon-Fri 09:00-17:00 Europe/Berlin", "2025-03-28T00:00Z", "2025-04-01T00:00Z")).toEqual(["2025-03-28T08:00Z in", "2025-03-28T16:00Z out", "2025-03-31T07:00Z in", "2025-03-31T15:00Z out"]);
});

test("Europe/Berlin's autumn change: the window is an hour longer; the repeated hour is inside twice", () => {
  // Sunday 2025-10-26: 03:00 CEST becomes 02:00 CET at 01:00 UTC.
  expect(flips("Sat 21:00-07:00 Europe/Berlin", "2025-10-25T00:00Z", "2025-10-27T00:00Z")).toEqual(["2025-10-25T19:00Z in", "2025-10-26T06:00Z out"]);
  expect(flips("Sun 02:00-02:30 Europe/Berlin", "2025-10-25T00:00Z", "2025-10-27T00:00Z")).toEqual(["2025-10-26T00:00Z in", "2025-10-26T00:30Z out", "2025-10-26T01:00Z in", "2025-10-26T01:30Z out"]);
  expect(flips("Sun 02:30-03:30 Europe/Berlin", "2025-10-25T00:00Z", "2025-10-27T00:00Z")).toEqual(["2025-10-26T00:30Z in", "2025-10-26T01:00Z out", "2025-10-26T01:30Z in", "2025-10-26T02:30Z out"]);
});

test("other zones: half-hour offsets, and Lord Howe's half-hour DST", () => {
  expect(flips("Mon 09:00-10:00 Asia/Kolkata", "2025-03-03T00:00Z", "2025-03-04T00:00Z")).toEqual(["2025-03-03T03:30Z in", "2025-03-03T04:30Z out"]);
  expect(flips("Mon 09:00-10:00 Asia/Kathmandu", "2025-03-03T00:00Z", "2025-03-04T00:00Z")).toEqual(["2025-03-03T03:15Z in", "2025-03-03T04:15Z out"]);
  // 2025-04-06: 02:00 (+11:00) becomes 01:30 (+10:30) at 15:00 UTC the day before.
  expect(flips("Sun 01:00-03:00 Australia/Lord_Howe", "2025-04-05T00:00Z", "2025-04-07T00:00Z")).toEqual(["2025-04-05T14:00Z in", "2025-04-05T16:30Z out"]);
  expect(flips("Mon-Fri 17:00-09:00 America/New_York", "2025-03-07T00:00Z", "2025-03-11T00:00Z")).toEqual(["2025-03-07T14:00Z out", "2025-03-07T22:00Z in", "2025-03-08T14:00Z out", "2025-03-10T21:00Z in"]);
});

test("minute by minute across both of Berlin's changes and Lord Howe's, the cached spans agree with the wall clock", () => {
  const schedules = ["Mon-Fri 21:00-07:00; Sat,Sun 22:00-09:00 Europe/Berlin", "Sun 02:00-02:30; Sun 02:45-03:15; Sat 23:59-00:01 Europe/Berlin", "daily 01:45-02:15 Australia/Lord_Howe"];
  for (const [text, from] of [
    [schedules[0], "2025-03-27T00:00Z"],
    [schedules[1], "2025-03-28T00:00Z"],
    [schedules[0], "2025-10-23T00:00Z"],
    [schedules[1], "2025-10-24T00:00Z"],
    [schedules[2], "2025-04-03T00:00Z"],
    [schedules[2], "2025-10-02T00:00Z"],
  ]) {
    const refreshes = agreesMinuteByMinute(text, from, 5);
    // Thousands of asks; the zone is read about once per boundary and offset change.
    expect(refreshes, text).toBeLessThan(30);
  }
});

test("a query costs no zone arithmetic: inside a span the clock is not read again; a clock moved back is", () => {
  const clock = clockOf("Mon-Fri 21:00-07:00 Europe/Berlin");
  const t = at("2025-03-04T12:00Z");
  expect(clock.inside(t)).toBe(false);
  for (let i = 0; i < 10_000; i++) clock.inside(t + i * 1000);
  expect(clock.refreshes).toBe(1);
  expect(clock.inside(at("2025-03-04T20:00Z"))).toBe(true);
  expect(clock.refreshes).toBe(2);
  expect(clock.inside(at("2025-03-04T19:59:59.999Z"))).toBe(false);
  expect(clock.refreshes).toBe(3);
});
