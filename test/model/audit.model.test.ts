// Model-based test of the audit trail's actor (machines/audit.machine.ts): @xstate/graph gives the
// shortest path to every state, each extended by every event the test can cause there, and each
// path is replayed against a real Sluice (in-process, a real SQLite file) through its API and the
// trail's entry points. A write is made to fail by holding the file's write lock from the test; an
// open by putting a file where the store's directory must be; timers (prune, retry) are the actor's
// delayed events, sent by the test when the path takes them (the 50 ms gathering runs on its own).
// After every step the states the real actor went through (from the bus) must be the model's, and
// where the model refuses a read, GET /api/audit must answer with the refusing guard's code.
import Database from "better-sqlite3";
import { existsSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { getShortestPaths } from "@xstate/graph";
import { createActor, fromPromise, getNextSnapshot, SimulatedClock, type AnyActorRef, type SnapshotFrom } from "xstate";
import { afterAll, describe, expect, test } from "vitest";
import { refusingGuard } from "../../actors/ask.js";
import { AUDIT_PRUNE_INTERVAL_MS, auditMachine, auditRetryDelayMs, type AuditEvent } from "../../machines/audit.machine.js";
import { ERROR_STATUS } from "../../src/api/errors.js";
import { GUARD_REFUSALS } from "../../src/api/guards.js";
import { startSluice, tempDir, type RunningSluice } from "../helpers/sluice.js";
import { trailOf } from "../integration/audit-helpers.js";
import { until, withoutPrefixes } from "./harness.js";

type ModelEvent = AuditEvent | { type: string; output?: unknown; error?: unknown };
type Snap = SnapshotFrom<typeof auditMachine>;

const OPEN_DONE = "xstate.done.actor.open";
const OPEN_ERROR = "xstate.error.actor.open";
const FLUSH_DONE = "xstate.done.actor.flush";
const FLUSH_ERROR = "xstate.error.actor.flush";
const PRUNE_DONE = "xstate.done.actor.prune";
const FLUSH_TIMER = "xstate.after.flushDelay.audit.ready.write.gathering";
const PRUNE_TIMER = "xstate.after.pruneInterval.audit.ready.prune.waiting";
const RETRY_TIMER = "xstate.after.retryDelay.audit.failed";
const READ = { type: "AUDIT.READ", requestId: "probe" } as const;

const never = <T>(): Promise<T> => new Promise<T>(() => undefined);
const model = auditMachine.provide({ actors: { open: fromPromise(never<void>), flush: fromPromise(never<{ written: number; left: number }>), prune: fromPromise(never<number>) } });
const INPUT = { enabled: true, flushDelayMs: 50, pruneIntervalMs: AUDIT_PRUNE_INTERVAL_MS };

/** "failed", "off", "ready:idle/waiting" … */
function stateOf(value: unknown): string {
  if (typeof value === "string") return value;
  const ready = (value as { ready?: { write: string; prune: string } }).ready;
  return ready ? `ready:${ready.write}/${ready.prune}` : JSON.stringify(value);
}

/** What the test can cause in each state (a prune at the store's open always ends before anything else can happen). */
function eventsFor(s: Snap): ModelEvent[] {
  switch (stateOf(s.value)) {
    case "opening":
      return [{ type: OPEN_DONE }, { type: OPEN_ERROR, error: new Error("cannot open") }];
    case "failed":
      return [{ type: RETRY_TIMER }, { type: "AUDIT.CONFIGURE", enabled: false }];
    case "off":
      return [{ type: "AUDIT.CONFIGURE", enabled: true }];
    case "ready:idle/pruning":
    case "ready:gathering/pruning":
      return [{ type: PRUNE_DONE, output: 0 }];
    case "ready:idle/waiting":
      return [{ type: "AUDIT.QUEUED" }, { type: PRUNE_TIMER }, { type: "AUDIT.CONFIGURE", enabled: false }];
    case "ready:gathering/waiting":
      return [{ type: FLUSH_TIMER }];
    case "ready:flushing/waiting":
      return [{ type: FLUSH_DONE, output: { written: 1, left: 0 } }, { type: FLUSH_ERROR, error: new Error("database is locked") }];
    default:
      return [];
  }
}

const serialize = (s: Snap): string => JSON.stringify([stateOf(s.value), s.context.pending]);
const shortest = getShortestPaths(model, { input: INPUT, events: (s) => eventsFor(s) as never, serializeState: (s) => serialize(s) });
/** Every transition once: the shortest path to each state, extended by each event possible there. */
const paths = shortest.flatMap((p) => {
  const last = p.steps[p.steps.length - 1].state;
  return eventsFor(last).map((event) => [...p.steps.map((st) => ({ event: st.event, snapshot: st.state })), { event, snapshot: getNextSnapshot(model, last, event as never) }]);
});
const cases = withoutPrefixes(paths, (steps) => steps.map((st) => `${st.event.type} ${serialize(st.snapshot)}`)).map((steps, i) => ({
  // Named after the start-up (opening → failed, or opening → ready and its first prune).
  name: `#${i} ${steps[1].event.type === OPEN_ERROR ? "unopenable: " : ""}${steps
    .slice(steps[1].event.type === OPEN_ERROR ? 2 : 3)
    .map((st) => `${st.event.type.replace(/^xstate\.(after\.)?/, "").replace(/\.audit\..*$/, "")}→${stateOf(st.snapshot.value)}`)
    .join(", ")}`,
  steps,
}));

const RESTING = new Set(["failed", "off", "ready:idle/waiting"]);
const collapse = (states: string[]): string[] => states.filter((x, i) => i === 0 || x !== states[i - 1]);
const YAML = `api:
  http:
    listen: 127.0.0.1:0
    audit: { path: trail/audit.db }
plugins:
  - { tag: c, type: cache, args: { size: 100 } }
  - { tag: main, type: sequence, args: [{ exec: $c }, { exec: reject 3 }] }
`;

const running = new Set<RunningSluice>();
/** Refusals the replays checked against the API (state → code). */
const refusalsChecked = new Set<string>();
afterAll(async () => {
  for (const s of running) await s.stop().catch(() => undefined);
});

describe("audit model", () => {
  test("the generator reaches every state and takes every transition the test can cause", () => {
    const states = new Set(cases.flatMap((c) => c.steps.map((st) => stateOf(st.snapshot.value))));
    expect(states).toEqual(new Set(["opening", "failed", "off", "ready:idle/pruning", "ready:idle/waiting", "ready:gathering/pruning", "ready:gathering/waiting", "ready:flushing/waiting"]));
    const edges = new Set(cases.flatMap((c) => c.steps.slice(1).map((st, i) => `${stateOf(c.steps[i].snapshot.value)} ${st.event.type}`)));
    for (const e of [`ready:flushing/waiting ${FLUSH_ERROR}`, `failed ${RETRY_TIMER}`, "off AUDIT.CONFIGURE", `opening ${OPEN_ERROR}`, `ready:idle/waiting ${PRUNE_TIMER}`]) expect(edges).toContain(e);
    // A failed write's entries wait: after the reopen they are written first.
    expect(cases.some((c) => c.steps.some((st) => stateOf(st.snapshot.value) === "ready:gathering/pruning"))).toBe(true);
  });

  for (const { name, steps } of cases) test(name, async () => {
    const dir = tempDir();
    const trailDir = join(dir, "trail");
    const away = join(dir, "trail.away");
    /** A file where the store's directory must be: opening fails. */
    const block = (): void => {
      if (existsSync(trailDir) && statSync(trailDir).isDirectory()) renameSync(trailDir, away);
      writeFileSync(trailDir, "not a directory\n");
    };
    const unblock = (): void => {
      if (existsSync(trailDir) && statSync(trailDir).isFile()) rmSync(trailDir);
      if (existsSync(away)) renameSync(away, trailDir);
    };
    let lock: Database.Database | null = null;
    const hold = (): void => {
      lock = new Database(join(trailDir, "audit.db"));
      lock.exec("BEGIN IMMEDIATE");
    };
    const release = (): void => {
      lock?.exec("COMMIT");
      lock?.close();
      lock = null;
    };
    const startBlocked = steps[1]?.event.type === OPEN_ERROR;
    if (startBlocked) block();
    const s = await startSluice(YAML, {}, { dir });
    running.add(s);
    const trail = trailOf(s);
    const actor = trail.actor as AnyActorRef;
    try {
      // The start-up (opening → failed, or opening → ready with its first prune) is over before the test can act.
      const first = startBlocked ? 1 : 2;
      const startState = serialize(steps[first].snapshot);
      await until(`the start-up to end in ${startState}`, () => serialize(trail.actor.getSnapshot()) === startState || undefined);
      const observed: string[] = [stateOf(steps[first].snapshot.value)];
      s.app.bus.on("actor.transition", (t) => {
        if (t.id === "audit") observed.push(stateOf(t.state));
      });
      const expected = [...observed];
      for (let i = first; i < steps.length; i++) {
        const { event, snapshot } = steps[i];
        const after = steps[i + 1]?.event.type;
        if (i > first) {
          switch (event.type) {
            case "AUDIT.QUEUED":
              // The write this entry starts is to fail: the test holds the file's write lock.
              if (steps[i + 2]?.event.type === FLUSH_ERROR) hold();
              expect((await s.api("/api/plugins/c/flush", { method: "POST" })).status).toBe(200);
              break;
            case PRUNE_TIMER:
              actor.send({ type: PRUNE_TIMER });
              break;
            case RETRY_TIMER:
              if (after === OPEN_ERROR) block();
              else unblock();
              actor.send({ type: RETRY_TIMER });
              break;
            case "AUDIT.CONFIGURE": {
              const on = (event as { enabled: boolean }).enabled;
              if (on && after === OPEN_ERROR) block();
              else if (on) unblock();
              trail.update({ listen: "127.0.0.1:0", audit: on ? { path: "trail/audit.db" } : false });
              break;
            }
            // The rest happens on its own: opens, writes, prunes, the 50 ms gathering.
          }
          expected.push(stateOf(snapshot.value));
          const want = collapse(expected);
          await until(`states ${want.join(" → ")} (saw ${collapse(observed).join(" → ")})`, () => collapse(observed).length >= want.length || undefined, 8000).catch(() => undefined);
          expect(collapse(observed).slice(0, want.length)).toEqual(want);
          if (event.type === FLUSH_ERROR) release();
        }
        // Checked where the actor rests until the test acts (the others pass in a moment).
        if (!RESTING.has(stateOf(snapshot.value))) continue;
        const guard = refusingGuard(snapshot, READ);
        const res = await s.api("/api/audit");
        if (guard === null) {
          expect(res.status).toBe(200);
        } else {
          const refusal = GUARD_REFUSALS[guard];
          const body = (await res.json()) as { code: string };
          expect([res.status, body.code], stateOf(snapshot.value)).toEqual([ERROR_STATUS[refusal.code], refusal.code]);
          refusalsChecked.add(`${guard} ${res.status} ${body.code}`);
        }
        expect(trail.actor.getSnapshot().context.pending, `pending after step ${i}`).toBe(snapshot.context.pending);
      }
      // Whatever the path did, an open store ends with every entry written.
      if (stateOf(steps[steps.length - 1].snapshot.value).startsWith("ready")) await until("the queue written", () => trail.queued() === 0 || undefined);
    } finally {
      release();
      running.delete(s);
      await s.stop();
    }
  }, 30_000);

  test("every refusal was checked against the API", () => {
    expect([...refusalsChecked].sort()).toEqual(["auditOn 503 audit_unavailable", "auditStoreOpen 503 audit_unavailable"]);
  });

  test("timers: gathering 50 ms, a prune every hour (a failed one is recorded and tried at the next), a retry delay that doubles to 60 s", () => {
    const clock = new SimulatedClock();
    let prunes = 0;
    let failPrune = true;
    let failOpen = 0;
    const actor = createActor(
      auditMachine.provide({
        actors: {
          open: fromPromise(() => (failOpen-- > 0 ? Promise.reject(new Error("no")) : Promise.resolve())),
          flush: fromPromise(() => Promise.resolve({ written: 1, left: 0 })),
          prune: fromPromise(() => {
            prunes++;
            return failPrune ? Promise.reject(new Error("locked")) : Promise.resolve(2);
          }),
        },
      }),
      { input: INPUT, clock },
    ).start();
    return (async () => {
      await until("ready", () => actor.getSnapshot().matches({ ready: { prune: "waiting" } }) || undefined);
      expect(actor.getSnapshot().context).toMatchObject({ prunes: 1, last_prune_error: "locked" });
      failPrune = false;
      clock.increment(AUDIT_PRUNE_INTERVAL_MS - 1);
      expect(prunes).toBe(1);
      clock.increment(1);
      await until("the second prune", () => actor.getSnapshot().context.prunes === 2 || undefined);
      expect(actor.getSnapshot().context).toMatchObject({ last_prune_error: null, last_prune_deleted: 2 });
      actor.send({ type: "AUDIT.QUEUED" });
      clock.increment(49);
      expect(actor.getSnapshot().matches({ ready: { write: "gathering" } })).toBe(true);
      clock.increment(1);
      await until("the flush", () => actor.getSnapshot().context.flushes === 1 || undefined);
      expect(actor.getSnapshot().matches({ ready: { write: "idle" } })).toBe(true);
      expect([1, 2, 3, 4, 7, 20].map(auditRetryDelayMs)).toEqual([1000, 2000, 4000, 8000, 60_000, 60_000]);
      actor.stop();
    })();
  });
});
