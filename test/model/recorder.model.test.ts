// Model-based test of the recorder:<tag> actor (machines/recorder.machine.ts): @xstate/graph gives
// the shortest path to every state of its writer and work regions (the flush region only ticks);
// each path is replayed against a real Sluice (in-process, a real writer thread and SQLite file)
// through its API. Long operations are held by taking the database's write lock from the test (the
// writer waits on it, as it would on a slow disk); a crash is a real termination of the writer
// thread; a first writer that cannot start is a database path that cannot be opened. After every
// step the states the real actor went through (from the bus) must be the machine's, and wherever the
// machine refuses DELETE records in a state the test can hold, the API must refuse it with the
// guard's status and code.
import Database from "better-sqlite3";
import { join } from "node:path";
import { getShortestPaths } from "@xstate/graph";
import { createActor, fromCallback, fromPromise, getNextSnapshot, SimulatedClock, type AnyActorRef, type SnapshotFrom } from "xstate";
import { afterAll, describe, expect, test } from "vitest";
import { concernActor } from "../../actors/app.actor.js";
import { refusingGuard } from "../../actors/ask.js";
import { recorderMachine, type RecorderEvent } from "../../machines/recorder.machine.js";
import { ERROR_STATUS } from "../../src/api/errors.js";
import { GUARD_REFUSALS } from "../../src/api/guards.js";
import type { QueryRecorder } from "../../src/plugins/executors/query-recorder/index.js";
import { buildQuery, udpExchange } from "../helpers/dns.js";
import { startSluice, type RunningSluice } from "../helpers/sluice.js";
import { until } from "./harness.js";
import { crashWriter, writerUp } from "../integration/recorder-helpers.js";

type ModelEvent = RecorderEvent | { type: string; output?: unknown };
type Snap = SnapshotFrom<typeof recorderMachine>;

const AFTER_CLEANUP = "xstate.after.cleanupInterval.recorder.work.idle";
const AFTER_RESTART = "xstate.after.restartDelay.recorder.writer.restarting";

const model = recorderMachine.provide({
  actors: {
    writer: fromCallback(() => () => undefined),
    clear: fromPromise(() => new Promise<number>(() => undefined)),
    cleanup: fromPromise(() => new Promise<number>(() => undefined)),
  },
  // No plugin actor above the model.
  actions: { reportStarted: () => undefined, reportStartFailed: () => undefined },
});

/** "<writer>/<work>", e.g. running.up/idle (the flush region is always ticking). */
const stateOf = (value: unknown): string => {
  const v = value as { writer: string | Record<string, string>; work: string };
  const writer = typeof v.writer === "string" ? v.writer : Object.entries(v.writer).map(([k, sub]) => `${k}.${sub}`)[0];
  return `${writer}/${v.work}`;
};

/**
 * What the system or an operator can cause in each state (crashes only from idle: a writer blocked
 * on a lock cannot be ended at once). The first cleanup runs while the program starts, before the
 * test can act: only its end can follow it.
 */
function eventsFor(s: Snap): ModelEvent[] {
  switch (stateOf(s.value)) {
    case "running.starting/waiting":
      return [{ type: "WRITER.READY" }, { type: "WRITER.EXITED", error: "cannot open" }];
    case "running.opening/waiting":
      return [{ type: "WRITER.READY" }];
    case "running.up/idle":
      return [{ type: "RECORDS.CLEAR", requestId: "r" }, { type: "WRITER.EXITED", error: "crash" }, { type: AFTER_CLEANUP }];
    case "running.up/cleaning":
      return s.context.cleanups === 0 && s.context.restarts === 0 ? [{ type: "xstate.done.actor.cleanup", output: 0 }] : [{ type: "xstate.done.actor.cleanup", output: 0 }, { type: "RECORDS.CLEAR", requestId: "r" }];
    case "running.up/clearing":
      return [{ type: "xstate.done.actor.clear", output: 0 }];
    case "restarting/waiting":
      return [{ type: AFTER_RESTART }];
    default:
      return [];
  }
}

const serialize = (s: Snap): string => JSON.stringify([s.value, s.context.writer, s.context.requestId !== null, s.context.cleanups > 0 || s.context.restarts > 0]);

const shortest = getShortestPaths(model, { input: { tag: "rec", cleanupIntervalMs: 1000, flushIntervalMs: 20, readers: { open: true, waiting: 0, limit: 32 } }, events: (s) => eventsFor(s) as never, serializeState: (s) => serialize(s) });

/** Every transition once: the shortest path to each state, extended by each event possible there. */
const paths = shortest.flatMap((p) => {
  const last = p.steps[p.steps.length - 1].state;
  return eventsFor(last).map((event) => ({ steps: [...p.steps.map((st) => ({ event: st.event, state: st.state })), { event, state: getNextSnapshot(model, last, event as never) }] }));
});

/** A path as the states it visits, collapsed (the bus reports changes of state value). */
function collapse(states: string[]): string[] {
  return states.filter((x, i) => i === 0 || x !== states[i - 1]);
}

const running: RunningSluice[] = [];
/** Refusals the replays checked against the API (state → code). */
const refusalsChecked = new Set<string>();
afterAll(async () => {
  for (const s of running) await s.stop().catch(() => undefined);
});

describe("recorder:<tag> model", () => {
  // Names leave out the start every path shares (starting → cleaning → idle).
  const short = (e: string): string => e.replace("xstate.", "").replace("after.cleanupInterval.recorder.work.idle", "cleanup timer").replace("after.restartDelay.recorder.writer.restarting", "restart timer");
  const cases = paths.map((p, i) => ({
    name: `#${i} ${p.steps.slice(3).map((st) => `${short(st.event.type)}→${stateOf(st.state.value)}`).join(", ") || p.steps.slice(1).map((st) => stateOf(st.state.value)).join(", ")}`,
    steps: p.steps.map((st) => ({ event: st.event, snapshot: st.state })),
  }));

  test("the generator reaches every state and takes every transition the test can cause", () => {
    expect(new Set(cases.flatMap((c) => c.steps.map((st) => stateOf(st.snapshot.value))))).toEqual(
      new Set(["running.starting/waiting", "failed/waiting", "running.up/cleaning", "running.up/idle", "running.up/clearing", "restarting/waiting", "running.opening/waiting"]),
    );
    const edges = new Set(cases.flatMap((c) => c.steps.slice(1).map((st, i) => `${stateOf(c.steps[i].snapshot.value)} ${st.event.type}`)));
    expect(edges).toContain("running.starting/waiting WRITER.EXITED");
    expect(edges).toContain("running.up/cleaning RECORDS.CLEAR");
    expect(edges).toContain("running.up/idle WRITER.EXITED");
    expect(edges).toContain(`restarting/waiting ${AFTER_RESTART}`);
    expect(edges).toContain("running.opening/waiting WRITER.READY");
  });

  test.each(cases)("$name", async ({ steps }) => {
    if (steps[1].event.type === "WRITER.EXITED") {
      // The first writer cannot open its database (the path is a directory): no retry, the plugin
      // fails and with it the start, as the machine's start-up state reports it.
      expect(stateOf(steps[1].snapshot.value)).toBe("failed/waiting");
      await expect(
        startSluice(`plugins:
  - { tag: rec, type: query_recorder, args: { path: "." } }
  - { tag: main, type: sequence, args: [{ exec: $rec }, { exec: reject 0 }] }
`),
      ).rejects.toThrow("query recorder 'rec' could not open its store: unable to open database file");
      return;
    }
    // The cleanup and restart timers are the actor's delayed events, sent by the test when the path takes
    // them (the cleanup's real interval, an hour, never comes during a path).
    const s = await startSluice(`api:
  http: 127.0.0.1:0
plugins:
  - { tag: rec, type: query_recorder, args: { path: rec.db, flush_interval_ms: 20, cleanup_interval_hours: 1 } }
  - { tag: main, type: sequence, args: [{ exec: $rec }, { exec: reject 0 }] }
  - { tag: udp, type: udp_server, args: { entry: main, listen: "127.0.0.1:0" } }
`);
    running.push(s);
    const observed: string[] = [];
    s.app.bus.on("actor.transition", (t) => {
      if (t.id.endsWith("/recorder:rec")) observed.push(stateOf(t.state));
    });
    // The actor started with the runtime, before the test could listen: its context says it opened its
    // writer and finished one cleanup (starting → cleaning → idle), as the machine does first.
    const actors = (await (await s.api("/api/actors")).json()) as { actors: { id: string; state: unknown; context: { cleanups: number; writer: string } }[] };
    const first = actors.actors.find((a) => a.id.endsWith("/recorder:rec"));
    expect(first?.context).toMatchObject({ writer: "up" });
    const startedIn = stateOf(first?.state);
    // Read in idle, the start-up had ended: what the bus showed before the read was part of it (a
    // context change in cleaning, then idle) and is already in the states put first here.
    if (startedIn === "running.up/idle") observed.length = 0;
    observed.unshift("running.starting/waiting", "running.up/cleaning", ...(startedIn === "running.up/idle" ? ["running.up/idle"] : []));
    if (startedIn === "running.up/idle") expect(first?.context.cleanups).toBe(1);
    const recorder = s.app.runtime.live("rec")?.instance as QueryRecorder;
    const actor = concernActor(s.app.actor.system, 1, "rec") as AnyActorRef;
    await udpExchange(s.port("udp"), buildQuery("seed.model.test", "A"));
    let lock: Database.Database | null = null;
    const hold = (): void => {
      lock ??= new Database(join(s.dir, "rec.db"));
      lock.exec("BEGIN IMMEDIATE");
    };
    const release = (): void => {
      if (!lock) return;
      lock.exec("COMMIT");
      lock.close();
      lock = null;
    };
    let pendingDelete: Promise<Response> | null = null;
    const expected: string[] = [];
    const seen = async (): Promise<void> => {
      const want = collapse(expected);
      await until(`states ${want.join(" → ")} (saw ${collapse(observed).join(" → ")})`, () => collapse(observed).length >= want.length || undefined, 8000).catch(() => undefined);
      expect(collapse(observed).slice(0, want.length)).toEqual(want);
    };
    try {
      for (let i = 0; i < steps.length; i++) {
        const { event, snapshot } = steps[i];
        const next = steps[i + 1]?.event.type;
        const from = i > 0 ? stateOf(steps[i - 1].snapshot.value) : null;
        switch (event.type) {
          case "RECORDS.CLEAR":
            if (!lock) hold();
            pendingDelete = s.api("/api/plugins/rec/records", { method: "DELETE" });
            break;
          case "xstate.done.actor.clear": {
            release();
            const res = await (pendingDelete as Promise<Response>);
            expect(res.status).toBe(200);
            expect(((await res.json()) as { ok: boolean }).ok).toBe(true);
            pendingDelete = null;
            break;
          }
          case "xstate.done.actor.cleanup":
            release();
            break;
          case "WRITER.EXITED":
            await crashWriter(recorder);
            break;
          case AFTER_CLEANUP:
            // Held in cleaning while the test still has something to do there.
            if (next === "RECORDS.CLEAR" || next === "xstate.done.actor.cleanup") hold();
            actor.send({ type: AFTER_CLEANUP });
            break;
          case AFTER_RESTART:
            // The writer's restart delay (1 s after a first crash) ends when the path says.
            actor.send({ type: AFTER_RESTART });
            break;
        }
        expected.push(stateOf(snapshot.value));
        await seen();
        // A DELETE in a state the machine refuses it in, held long enough to ask: the guard's code.
        const clear = { type: "RECORDS.CLEAR", requestId: "probe" } as const;
        const state = stateOf(snapshot.value);
        if ((state === "running.up/clearing" || state === "restarting/waiting") && !snapshot.can(clear)) {
          const guard = refusingGuard(snapshot, clear);
          const refusal = GUARD_REFUSALS[guard ?? ""];
          expect(refusal, `guard ${guard}`).toBeDefined();
          const res = await s.api("/api/plugins/rec/records", { method: "DELETE" });
          const body = (await res.json()) as { code: string };
          expect([res.status, body.code], `${state} (${from ?? "start"})`).toEqual([ERROR_STATUS[refusal.code], refusal.code]);
          refusalsChecked.add(`${state} ${res.status} ${body.code}`);
        }
      }
      // The path's end state settles: the recorder still records and answers.
      release();
      if (pendingDelete) expect((await pendingDelete).status).toBe(200);
      await writerUp(s, "rec");
    } finally {
      release();
      await s.stop();
      running.splice(running.indexOf(s), 1);
    }
  }, 40_000);

  test("the flush ticks are delayed transitions: one flush per interval, whatever the writer does, and no state change", () => {
    const clock = new SimulatedClock();
    let flushes = 0;
    const actor = createActor(model.provide({ actions: { flush: () => void flushes++ } }), {
      input: { tag: "rec", cleanupIntervalMs: 60_000, flushIntervalMs: 200, readers: { open: true, waiting: 0, limit: 32 } },
      clock,
    }).start();
    clock.increment(199);
    expect(flushes).toBe(0);
    clock.increment(1);
    expect(flushes).toBe(1);
    actor.send({ type: "WRITER.READY" });
    // The simulated clock fires what is due once per step: one interval at a time.
    clock.increment(200);
    clock.increment(200);
    expect(flushes).toBe(3);
    actor.send({ type: "WRITER.EXITED", error: "crash" });
    clock.increment(200);
    expect(flushes).toBe(4);
    expect(actor.getSnapshot().value).toMatchObject({ writer: "restarting", flush: "ticking" });
    actor.stop();
  });

  test("a read is admitted while fewer than the limit wait for a reader process; past it the guard's 503", () => {
    const readers = { open: true, waiting: 31, limit: 32 };
    const actor = createActor(model, { input: { tag: "rec", cleanupIntervalMs: 60_000, flushIntervalMs: 200, readers } }).start();
    const read = { type: "RECORDS.READ", requestId: "x" } as const;
    expect(actor.getSnapshot().can(read)).toBe(true);
    readers.waiting = 32;
    expect(actor.getSnapshot().can(read)).toBe(false);
    const guard = refusingGuard(actor.getSnapshot(), read);
    expect(guard).toBe("recorderReadersFree");
    expect(ERROR_STATUS[GUARD_REFUSALS[guard ?? ""].code]).toBe(503);
    actor.stop();
  });

  test("once the reader pool is closing (the plugin's destroy) no read is admitted: the guard's 503, before any work", () => {
    const readers = { open: true, waiting: 0, limit: 32 };
    const actor = createActor(model, { input: { tag: "rec", cleanupIntervalMs: 60_000, flushIntervalMs: 200, readers } }).start();
    const read = { type: "RECORDS.READ", requestId: "x" } as const;
    expect(actor.getSnapshot().can(read)).toBe(true);
    readers.open = false;
    expect(actor.getSnapshot().can(read)).toBe(false);
    const guard = refusingGuard(actor.getSnapshot(), read);
    expect(guard).toBe("recorderReadersOpen");
    expect([ERROR_STATUS[GUARD_REFUSALS[guard ?? ""].code], GUARD_REFUSALS[guard ?? ""].code]).toEqual([503, "query_recorder_unavailable"]);
    actor.stop();
  });

  test("every refusal was checked against the API", () => {
    expect([...refusalsChecked].sort()).toEqual(["restarting/waiting 503 query_recorder_unavailable", "running.up/clearing 409 query_recorder_busy"]);
  });
});
