// `schedule <windows> [zone]`: true while the clock is inside one of the time windows, read in a time
// zone (the process's own by default), e.g. `schedule Mon-Fri 21:00-07:00; Sat,Sun 22:00-09:00 Europe/Berlin`.
// The grammar is in src/engine/schedule.ts; the cached answer and its next boundary in schedule-clock.ts,
// so a query reads the clock and compares. The clock is the process's plus services.clockShift.

import { ScheduleClock } from "../../engine/schedule-clock.js";
import { localTimeZone, parseSchedule, timeZoneProblem, weekMinutes, type ScheduleWindow } from "../../engine/schedule.js";
import { ArgError, argProblems, definePlugin, type ArgProblem } from "../../registry/types.js";

interface ScheduleArgs {
  windows: string[];
  time_zone?: string;
  /** cron's spelling of time_zone. */
  timezone?: string;
}

const schema = {
  type: "object",
  additionalProperties: false,
  required: ["windows"],
  properties: {
    windows: { type: "array", minItems: 1, items: { type: "string", minLength: 1 } },
    time_zone: { type: "string", minLength: 1 },
    timezone: { type: "string", minLength: 1 },
  },
} as const;

/** A string is the whole schedule (windows and zone); a list is its windows; an object is as the schema says. */
function shorthand(raw: unknown): unknown {
  if (Array.isArray(raw)) return { windows: raw as unknown[] };
  if (typeof raw !== "string") return raw;
  const parsed = parseSchedule(raw);
  return parsed.zone === null ? { windows: parsed.windows.map((w) => w.text) } : { windows: parsed.windows.map((w) => w.text), time_zone: parsed.zone };
}

/** The windows of `args.windows[i]` (one item may hold several); throws ArgError at its path. */
function windowsAt(args: ScheduleArgs, i: number): ScheduleWindow[] {
  try {
    const parsed = parseSchedule(args.windows[i]);
    if (parsed.zone !== null) throw new ArgError(`a window ends at its time range: give the time zone '${parsed.zone}' in time_zone`);
    return parsed.windows;
  } catch (err) {
    if (err instanceof ArgError) throw new ArgError(err.message, ["windows", i]);
    throw err;
  }
}

function check(args: ScheduleArgs): ArgProblem[] {
  const problems = args.windows.flatMap((_, i) => argProblems(() => windowsAt(args, i)));
  if (args.time_zone !== undefined && args.timezone !== undefined) problems.push({ path: ["timezone"], message: "timezone is another name for time_zone: give one of them" });
  for (const key of ["time_zone", "timezone"] as const) {
    const zone = args[key];
    const problem = zone === undefined ? null : timeZoneProblem(zone);
    if (problem !== null) problems.push({ path: [key], message: problem });
  }
  return problems;
}

export const scheduleMatcher = definePlugin<ScheduleArgs, "matcher">({
  type: "schedule",
  kind: "matcher",
  feature: "core",
  summary: "Matches while the clock is inside a time window by weekday and time of day (Mon-Fri 21:00-07:00 Europe/Berlin).",
  schema,
  shorthand,
  quickSetup: (param) => param,
  check,
  create(args, ctx) {
    const clock = new ScheduleClock(weekMinutes(args.windows.flatMap((_, i) => windowsAt(args, i))), args.time_zone ?? args.timezone ?? localTimeZone());
    const shift = ctx.services.clockShift;
    clock.inside(Date.now() + shift.ms);
    return { match: () => clock.inside(Date.now() + shift.ms) };
  },
});
