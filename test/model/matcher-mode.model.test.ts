// Model-based test of a matcher's runtime mode (machines/matcher-mode.machine.ts): @xstate/graph
// generates a shortest path to every transition (each mode, with and without a 500 ms duration, from
// every state, and the timer's expiry), and each path is replayed against the real program (a child
// process) through POST /api/plugins/<tag>/mode. After every step GET status and GET /api/actors
// must equal the machine's state, and DNS answers for `$tag` and `!$tag` rules must change as the
// mode says. The machine refuses no request (every mode may be set in every state), so no step may
// be answered with an error.
import { rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { getShortestPaths } from "@xstate/graph";
import type { SnapshotFrom } from "xstate";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { matcherModeMachine, modeOf, type MatcherModeEvent } from "../../machines/matcher-mode.machine.js";
import { MATCHER_MODES, type MatcherMode } from "../../src/registry/matcher-mode.js";
import { startCli, type RunningCli } from "../helpers/cli.js";
import { query, rcodeOf } from "../helpers/dns.js";
import { tempDir } from "../helpers/sluice.js";

type ModelEvent = MatcherModeEvent | { type: `xstate.after.${string}` };
type Snap = SnapshotFrom<typeof matcherModeMachine>;

const DURATION_MS = 500;
const timedIn = (value: unknown): string | null => {
  const mode = modeOf(value);
  return mode !== "normal" && (value as Record<string, string>)[mode] === "timed" ? mode : null;
};

/** Every mode with and without a duration, and where a timer runs, its expiry. */
function eventsFor(s: Snap): ModelEvent[] {
  const out: ModelEvent[] = [];
  for (const mode of MATCHER_MODES) for (const duration_ms of [null, DURATION_MS]) out.push({ type: "MATCHER.SET_MODE", mode, duration_ms, at: 0, requestId: "r" });
  const timed = timedIn(s.value);
  if (timed) out.push({ type: `xstate.after.modeDuration.matcher.${timed}.timed` });
  return out;
}

function describeEvent(e: ModelEvent | undefined): string {
  if (e === undefined) return "";
  if (e.type === "MATCHER.SET_MODE") return `${e.mode}${e.duration_ms ? "/timed" : ""}`;
  return e.type.startsWith("xstate.after") ? "expiry" : e.type;
}

// Keyed by (previous state, event, state): one shortest path for every transition, not just every state.
const paths = getShortestPaths(matcherModeMachine, {
  input: { tag: "blocked" },
  events: (s) => eventsFor(s) as never,
  serializeState: (s, e, prev) => JSON.stringify([prev?.value ?? null, describeEvent(e), s.value, s.context.until_ms !== null]),
});

const dir = tempDir();
const file = join(dir, "sluice.yaml");
writeFileSync(
  file,
  `
api:
  http: "127.0.0.1:0"
plugins:
  - { tag: blocked, type: qname, args: ["domain:ads.test"] }
  - tag: main
    type: sequence
    args:
      - { matches: "qtype A", exec: jump positive }
      - { matches: "qtype AAAA", exec: jump negative }
  - tag: positive
    type: sequence
    args:
      - { matches: $blocked, exec: reject NXDOMAIN }
      - exec: reject REFUSED
  - tag: negative
    type: sequence
    args:
      - { matches: "!$blocked", exec: reject SERVFAIL }
      - exec: reject NOTIMP
  - { tag: udp, type: udp_server, args: { entry: main, listen: "127.0.0.1:0" } }
`,
);

let run: RunningCli;
let apiPort = 0;
let dnsPort = 0;
beforeAll(async () => {
  run = startCli(["-c", file]);
  apiPort = Number((await run.waitForLog((l) => l.msg === "management API listening")).port);
  dnsPort = Number((await run.waitForLog((l) => l.msg === "udp server listening")).port);
  await run.waitForLog((l) => l.msg === "sluice started");
});
afterAll(async () => {
  run.child.kill("SIGTERM");
  await run.exited;
  rmSync(dir, { recursive: true, force: true });
});

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const api = async (path: string, body?: unknown): Promise<{ status: number; json: Record<string, unknown> }> => {
  const res = await fetch(`http://127.0.0.1:${apiPort}${path}`, body === undefined ? {} : { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
  return { status: res.status, json: (await res.json()) as Record<string, unknown> };
};

/** rcodes for [ads.test A ($blocked), other.test A ($blocked), ads.test AAAA (!$blocked), other.test AAAA (!$blocked)]. */
const BRANCHES: Record<MatcherMode, number[]> = {
  normal: [3, 5, 4, 2],
  always_false: [5, 5, 2, 2],
  always_true: [3, 3, 4, 4],
};
async function branches(): Promise<number[]> {
  const out: number[] = [];
  for (const [name, type] of [["ads.test", "A"], ["other.test", "A"], ["ads.test", "AAAA"], ["other.test", "AAAA"]]) out.push(rcodeOf(await query(dnsPort, name, type)));
  return out;
}

interface Observed {
  status: Record<string, unknown>;
  actorState: unknown;
}
async function observe(): Promise<Observed> {
  const status = (await api("/api/plugins/blocked/status")).json;
  const generation = (await api("/api/control")).json.generation as number;
  const found = ((await api("/api/actors")).json.actors as { id: string; state: unknown }[]).find((a) => a.id === `runtime:${generation}/plugin:blocked/matcher:blocked`);
  return { status, actorState: found?.state };
}

describe("matcher mode model", () => {
  const cases = paths.map((p, i) => ({ name: `#${i} ${p.steps.slice(1).map((s) => `${describeEvent(s.event as ModelEvent)}→${JSON.stringify(s.state.value).replaceAll('"', "")}`).join(" ") || "(initial)"}`, steps: p.steps }));

  test("the generator covers every transition: each mode from each state, timed or not, and both expiries", () => {
    const transitions = new Set(cases.map((c) => c.steps.map((s) => describeEvent(s.event as ModelEvent)).join(" ")));
    // 5 states (normal, 2 × held, 2 × timed) × 6 requests, plus an expiry from each timed state, plus the initial state.
    expect(cases.length).toBe(5 * 6 + 2 + 1);
    expect([...transitions].filter((t) => t.endsWith("expiry"))).toHaveLength(2);
    // The machine refuses nothing: every request is possible in every state reached.
    for (const c of cases) for (const s of c.steps) for (const e of eventsFor(s.state)) if (e.type === "MATCHER.SET_MODE") expect(s.state.can(e)).toBe(true);
  });

  test.each(cases)("$name", async ({ steps }) => {
    // Every path starts from normal without a timer (the machine's initial state).
    expect((await api("/api/plugins/blocked/mode", { mode: "normal" })).status).toBe(200);
    let lastUntil: number | null = null;
    for (const step of steps) {
      const snap = step.state;
      const event = step.event as ModelEvent;
      let window: [number, number] | null = null;
      if (event.type === "MATCHER.SET_MODE") {
        const sent = Date.now();
        const res = await api("/api/plugins/blocked/mode", event.duration_ms === null ? { mode: event.mode } : { mode: event.mode, duration: `${event.duration_ms}ms` });
        const received = Date.now();
        expect(res.status, JSON.stringify(res.json)).toBe(200);
        expect(res.json).toMatchObject({ ok: true, matcher: "blocked", mode: modeOf(snap.value) });
        expect(res.json.until_ms === null).toBe(snap.context.until_ms === null);
        if (snap.context.until_ms !== null) window = [sent + DURATION_MS, received + DURATION_MS];
      } else if (event.type.startsWith("xstate.after.")) {
        // The real timer: the mode returns to normal by itself, not before until_ms.
        const until = (await observe()).status.until_ms as number;
        const deadline = until + 5000;
        while ((await observe()).status.mode !== "normal" && Date.now() < deadline) await sleep(20);
        expect(Date.now()).toBeGreaterThanOrEqual(until);
      }
      const seen = await observe();
      expect(seen.status).toMatchObject({ ok: true, matcher: "blocked", mode: modeOf(snap.value) });
      expect(seen.actorState).toEqual(snap.value);
      expect(seen.status.until_ms === null).toBe(snap.context.until_ms === null);
      if (window) {
        lastUntil = seen.status.until_ms as number;
        expect(seen.status.until_ms).toBeGreaterThanOrEqual(window[0]);
        expect(seen.status.until_ms).toBeLessThanOrEqual(window[1]);
      }
      expect(await branches()).toEqual(BRANCHES[modeOf(snap.value)]);
      // The checks above ran before a timed mode ran out; otherwise they said nothing about it.
      if (window) expect(Date.now(), "checks took longer than the mode's duration").toBeLessThan(window[0]);
    }
    // A path that ends without a timer: a timer set earlier and replaced must not fire later.
    const final = steps[steps.length - 1].state;
    if (lastUntil !== null && final.context.until_ms === null) {
      await sleep(Math.max(0, lastUntil + 200 - Date.now()));
      expect((await observe()).actorState).toEqual(final.value);
      expect(await branches()).toEqual(BRANCHES[modeOf(final.value)]);
    }
  });
});
