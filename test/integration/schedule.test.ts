// The `schedule` matcher over real sockets: a group's bedtime rule flips its answer when the injected
// clock (services.clockShift) crosses the window's start and end, for the kids' address only; bad days,
// times and zones are `sluice check` errors at their line; docs/plugins.md's example runs as printed.
// The grammar and the DST arithmetic: test/unit/schedule.test.ts.
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { checkErrors } from "../helpers/check.js";
import { startDocExample } from "../helpers/doc-example.js";
import { answerWith, startResponder } from "../helpers/responder.js";
import { serversYaml, startSluice, tempDir, type RunningSluice } from "../helpers/sluice.js";
import { requireTool } from "../helpers/tools.js";
import { rcodeFrom } from "../helpers/client-source.js";

const MINUTE = 60_000;
const ZONE = "Asia/Kolkata"; // +05:30 all year: a window computed now holds whenever the suite runs


/** `Tue 23:40` for Unix ms `t` in ZONE. */
function wall(t: number): { day: string; time: string } {
  const parts = new Intl.DateTimeFormat("en-US", { timeZone: ZONE, weekday: "short", hour: "2-digit", minute: "2-digit", hourCycle: "h23" }).formatToParts(t);
  const get = (type: string): string => parts.find((p) => p.type === type)?.value ?? "";
  return { day: get("weekday"), time: `${get("hour")}:${get("minute")}` };
}

// A 90-minute window starting two hours from now (it may run past midnight: then it belongs to its start's day).
const start = Math.ceil((Date.now() + 120 * MINUTE) / MINUTE) * MINUTE;
const end = start + 90 * MINUTE;
const window = `${wall(start).day} ${wall(start).time}-${wall(end).time}`;

describe("a group's bedtime over real sockets", () => {
  const shift = { ms: 0 };
  let s: RunningSluice;
  beforeAll(async () => {
    s = await startSluice(
      `
plugins:
  - tag: clients
    type: clients
    args:
      groups: [{ name: kids, addresses: [127.0.0.2] }]
      neighbour_refresh: 0s
  - tag: office_hours
    type: schedule
    args: { windows: ["${window}"], time_zone: ${ZONE} }
  - tag: main
    type: sequence
    args:
      - { matches: ["client kids", "schedule ${window} ${ZONE}"], exec: reject }
      - { matches: ["client_ip 127.0.0.3", "$office_hours"], exec: reject 2 }
      - exec: reject 3
${serversYaml()}
`,
      {},
      { clockShift: shift },
    );
  });
  afterAll(() => s.stop());

  /** The answers of the kids' address, another one, and the declared matcher's client, with the clock at Unix ms `t`. */
  async function answersAt(t: number): Promise<number[]> {
    shift.ms = t - Date.now();
    return [await rcodeFrom("127.0.0.2", s.udpPort, "example.test"), await rcodeFrom("127.0.0.1", s.udpPort, "example.test"), await rcodeFrom("127.0.0.3", s.udpPort, "example.test")];
  }

  test(`the answer flips at the window's start and end (${window} ${ZONE})`, async () => {
    const REFUSED = 5;
    const SERVFAIL = 2;
    const NXDOMAIN = 3;
    expect(await answersAt(Date.now())).toEqual([NXDOMAIN, NXDOMAIN, NXDOMAIN]);
    expect(await answersAt(start - 5000)).toEqual([NXDOMAIN, NXDOMAIN, NXDOMAIN]);
    expect(await answersAt(start + 1000)).toEqual([REFUSED, NXDOMAIN, SERVFAIL]);
    expect(await answersAt(end - 5000)).toEqual([REFUSED, NXDOMAIN, SERVFAIL]);
    expect(await answersAt(end + 1000)).toEqual([NXDOMAIN, NXDOMAIN, NXDOMAIN]);
    // The clock moved back into the window (as a test may, or an NTP step): the cached span is not trusted.
    expect(await answersAt(start + 30 * MINUTE)).toEqual([REFUSED, NXDOMAIN, SERVFAIL]);
    // A week on, the same weekday's window again; the day before it, nothing.
    expect(await answersAt(start + 7 * 1440 * MINUTE + 1000)).toEqual([REFUSED, NXDOMAIN, SERVFAIL]);
    expect(await answersAt(start + 6 * 1440 * MINUTE + 1000)).toEqual([NXDOMAIN, NXDOMAIN, NXDOMAIN]);
  });
});

describe("sluice check", () => {
  const check = (plugins: string): string => {
    const file = join(tempDir(), "sluice.yaml");
    writeFileSync(file, `plugins:\n${plugins}`);
    return checkErrors(file).replaceAll(`${file}:`, "");
  };
  const clients = "  - tag: clients\n    type: clients\n    args: { groups: [{ name: kids, addresses: [127.0.0.2] }] }\n";

  test("a bad day, time or zone in a quick setup is an error at its line", () => {
    const rule = (m: string): string => `${clients}  - tag: main\n    type: sequence\n    args:\n      - { matches: ["client kids", "${m}"], exec: reject }\n`;
    expect(check(rule("schedule Mon-Fro 21:00-07:00"))).toBe(
      "8:36: error: plugin 'main': args[0].matches[1]: 'schedule Mon-Fro 21:00-07:00': 'Mon-Fro' is not a day (Mon, Tue, Wed, Thu, Fri, Sat, Sun), a range such as Mon-Fri, a list such as Sat,Sun, or daily",
    );
    expect(check(rule("schedule Mon-Fri 21:00-27:00 UTC"))).toBe("8:36: error: plugin 'main': args[0].matches[1]: 'schedule Mon-Fri 21:00-27:00 UTC': '27:00' is not a time of day (HH:MM from 00:00 to 23:59; 24:00 only as an end)");
    expect(check(rule("schedule Mon–Fri 21:00–07:00 Europe/Berln"))).toBe(
      "8:36: error: plugin 'main': args[0].matches[1]: 'schedule Mon–Fri 21:00–07:00 Europe/Berln': 'Europe/Berln' is not a time zone (an IANA name such as Europe/Berlin, or UTC)",
    );
    expect(check(rule("schedule"))).toMatch(/^8:36: error: plugin 'main': args\[0\]\.matches\[1\]: 'schedule': a schedule needs at least one window/);
  });

  test("the object form: each window and the zone at its own line", () => {
    expect(check("  - tag: bedtime\n    type: schedule\n    args:\n      windows:\n        - Mon-Fri 21:00-07:00\n        - Sat 22:00\n      time_zone: Mars/Olympus\n")).toBe(
      [
        "7:11: error: plugin 'bedtime': args.windows[1]: '22:00' is a time, not a time range: write start-end, e.g. '22:00-07:00'",
        "8:18: error: plugin 'bedtime': args.time_zone: 'Mars/Olympus' is not a time zone (an IANA name such as Europe/Berlin, or UTC)",
      ].join("\n"),
    );
    expect(check("  - tag: bedtime\n    type: schedule\n    args: { windows: [Sat 22:00-09:00 UTC] }\n")).toMatch(/^4:23: error: plugin 'bedtime': args\.windows\[0\]: a window ends at its time range: give the time zone 'UTC' in time_zone$/);
    expect(check("  - tag: bedtime\n    type: schedule\n    args: { windows: [Sat 22:00-09:00], time_zone: UTC, timezone: UTC }\n")).toMatch(/args\.timezone: timezone is another name for time_zone: give one of them$/);
    expect(check("  - tag: bedtime\n    type: schedule\n    args: \"Sat 22:00-09:00 Europe/Berln\"\n")).toMatch(/^4:11: error: plugin 'bedtime': args: 'Europe\/Berln' is not a time zone/);
  });
});

test("docs/plugins.md's bedtime example runs as printed", async () => {
  for (const tool of ["dig", "curl", "jq"]) requireTool(tool);
  const upstream = await startResponder((q) => answerWith(q, ["192.0.2.10"]));
  const ex = await startDocExample("bedtime schedule", { replace: [["forward 9.9.9.9", `forward 127.0.0.1:${upstream.port}`]] });
  try {
    const results = await ex.runAll();
    expect(results).toHaveLength(6);
    for (const r of results) expect(r.output, r.command).toBe(r.printed);
  } finally {
    await ex.stop();
    await upstream.close();
  }
});
