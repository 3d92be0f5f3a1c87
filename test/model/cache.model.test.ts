// Model-based test of the cache:<tag> actor (machines/cache.machine.ts): @xstate/graph gives the
// shortest path to every state, each extended by every event the test can cause there; each path
// is replayed against a real Sluice (in-process) whose cache starts from a dump_file, through DNS
// queries and the cache's API routes. A load_dump is held by holding the rest of its request body;
// the persist timer's event is delivered to the live actor (the real interval is an hour, so it
// never fires by itself), with a change made first or not as the path says. After every step the
// states the real actor went through (from the bus) must be the machine's, its persist count the
// machine's, and an API operation the machine refuses must get its guard's status and code.
import http from "node:http";
import { readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { getShortestPaths } from "@xstate/graph";
import { fromPromise, initialTransition, transition, type AnyActorRef, type SnapshotFrom } from "xstate";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { concernActor } from "../../actors/app.actor.js";
import { refusingGuard } from "../../actors/ask.js";
import { cacheMachine, type CacheEvent, type CacheInput, type CacheOperation, type PersistDone } from "../../machines/cache.machine.js";
import { ERROR_STATUS } from "../../src/api/errors.js";
import { GUARD_REFUSALS } from "../../src/api/guards.js";
import { decodeDump } from "../../src/plugins/executors/cache/dump.js";
import { query } from "../helpers/dns.js";
import { startSluice, type RunningSluice } from "../helpers/sluice.js";
import { until, withoutPrefixes } from "./harness.js";

const AFTER_PERSIST = "xstate.after.persistInterval.cache.running.saver.waiting";
type Timer = { type: typeof AFTER_PERSIST; changed: boolean };
type Done = { type: "xstate.done.actor.loadDump" | "xstate.done.actor.operate" | "xstate.done.actor.persist"; output: unknown };
type ModelEvent = CacheEvent | Timer | Done;
type Snap = SnapshotFrom<typeof cacheMachine>;

const INPUT: CacheInput = { tag: "c", persistent: true, persistIntervalMs: 3_600_000, sweepIntervalMs: 3_600_000 };
/** The work never ends by itself in the model (the done events say when); `cacheChanged` is the timer event's. */
const never = <T, I = unknown>() => fromPromise<T, I>(() => new Promise<T>(() => undefined));
const model = cacheMachine.provide({
  actors: { loadDump: never<number>(), loadShared: never<number | null>(), operate: never<unknown, CacheOperation>(), persist: never<PersistDone>() },
  guards: { cacheChanged: ({ event }) => (event as unknown as Partial<Timer>).changed === true },
  // No plugin actor above it here.
  actions: { reportStarted: () => undefined },
});

const LOADED: Done = { type: "xstate.done.actor.loadDump", output: 2 };
const OPERATED: Done = { type: "xstate.done.actor.operate", output: null };
const PERSISTED: Done = { type: "xstate.done.actor.persist", output: { at_ms: 0, entries: 0 } };
const FLUSH: CacheEvent = { type: "CACHE.FLUSH", requestId: "f" };
const DUMP: CacheEvent = { type: "CACHE.DUMP", requestId: "d" };
const LOAD: CacheEvent = { type: "CACHE.LOAD", source: (async function* () {})(), requestId: "l" };
const STOP: CacheEvent = { type: "CACHE.STOP", requestId: "s" };

const region = (s: Snap, name: "ops" | "saver"): string | null => {
  const v = s.value as { running?: Record<string, string> } | string;
  return typeof v === "object" ? (v.running?.[name] ?? null) : null;
};
const stateName = (s: Snap): string => (typeof s.value === "string" ? s.value : `ops.${region(s, "ops")}/saver.${region(s, "saver")}`);

/**
 * What the test can cause in each state. A flush or dump ends at once in the real program, so its
 * end is the only event after it; a load is held, so a timer and a refused flush can come meanwhile.
 * A stop is asked only when nothing runs (the program stops its API before its plugins).
 */
function eventsFor(s: Snap): ModelEvent[] {
  if (s.value === "loading") return [LOADED];
  if (s.value === "stopping") return [PERSISTED];
  if (region(s, "saver") === "persisting") return [PERSISTED];
  if (region(s, "ops") === "working") return s.context.operation === "CACHE.LOAD" ? [{ type: AFTER_PERSIST, changed: true }, FLUSH, OPERATED] : [OPERATED];
  if (region(s, "ops") === "idle") return [FLUSH, DUMP, LOAD, { type: AFTER_PERSIST, changed: true }, { type: AFTER_PERSIST, changed: false }, STOP];
  return [];
}

const serialize = (s: Snap): string => JSON.stringify([s.value, s.context.operation, s.context.persists > 0]);
const shortest = getShortestPaths(model, { input: INPUT, events: (s) => eventsFor(s) as never, serializeState: (s) => serialize(s) });

/** Every transition once: the shortest path to each state, extended by each event possible there (and an operation or stop that ends by itself, by its end). */
const extended = shortest.flatMap((p) => {
  const events = p.steps.slice(1).map((st) => st.event as ModelEvent);
  return eventsFor(p.steps[p.steps.length - 1].state).map((e) => {
    const out = [...events, e];
    const last = replay(out).at(-1);
    if ((e.type === "CACHE.FLUSH" || e.type === "CACHE.DUMP") && last && region(last, "ops") === "working") out.push(OPERATED);
    if (e.type === "CACHE.STOP") out.push(PERSISTED);
    return out;
  });
});

function replay(events: ModelEvent[]): Snap[] {
  let [snap] = initialTransition(model, INPUT);
  return events.map((e) => ([snap] = transition(model, snap, e as never))[0]);
}

const describeEvent = (e: ModelEvent): string =>
  e.type === AFTER_PERSIST ? `timer(${e.changed ? "changed" : "unchanged"})` : e.type.replace("xstate.done.actor.", "done:").replace("CACHE.", "").toLowerCase();
const paths = withoutPrefixes(extended, (events) => events.map(describeEvent));

/** The changes a path makes before each timer, as the replay tracks them: does any timer find none? */
function timersWithoutChanges(events: ModelEvent[]): number {
  let dirty = false;
  let n = 0;
  const snaps = replay(events);
  for (const [i, e] of events.entries()) {
    if (e.type === AFTER_PERSIST) {
      dirty ||= e.changed;
      if (!dirty) n++;
    }
    if (e.type === "xstate.done.actor.operate" && snaps[i - 1].context.operation !== "CACHE.DUMP") dirty = true;
    if (e.type === "xstate.done.actor.persist") dirty = false;
  }
  return n;
}

let seed: Buffer;
beforeAll(async () => {
  // A dump of two entries (NXDOMAIN answers the sequence gives), made by a real cache.
  const s = await startSluice(config(false));
  try {
    for (const n of ["one.model.test", "two.model.test"]) await query(s.udpPort, n);
    seed = Buffer.from(await (await s.api("/api/plugins/c/dump")).arrayBuffer());
  } finally {
    await s.stop();
  }
  expect(decodeDump(seed, performance.now(), Date.now())).toHaveLength(2);
});

function config(persistent: boolean): string {
  return `api:
  http: 127.0.0.1:0
plugins:
  - { tag: c, type: cache, args: { size: 100${persistent ? ", dump_file: cache.dump, dump_interval: 3600" : ""} } }
  - { tag: plain, type: cache, args: { size: 100 } }
  - { tag: main, type: sequence, args: [{ exec: $c }, { exec: $plain }, { exec: reject 3 }] }
  - { tag: udp, type: udp_server, args: { entry: main, listen: "127.0.0.1:0" } }
`;
}

/** A load_dump whose body stops after its first bytes until `release`. */
function heldLoad(s: RunningSluice, bytes: Buffer): { answer: Promise<{ status: number; body: string }>; release(): void } {
  let req!: http.ClientRequest;
  const answer = new Promise<{ status: number; body: string }>((resolve, reject) => {
    req = http.request(`${s.apiUrl}/api/plugins/c/load_dump`, { method: "POST", headers: { "content-type": "application/octet-stream" } }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (d: string) => (body += d));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on("error", reject);
  });
  req.write(bytes.subarray(0, 8));
  return { answer, release: () => req.end(bytes.subarray(8)) };
}

const running: RunningSluice[] = [];
const refusalsChecked = new Set<string>();
afterAll(async () => {
  for (const s of running) await s.stop().catch(() => undefined);
});

interface ActorRow {
  id: string;
  state: unknown;
  context: Record<string, unknown>;
}
const actorRow = async (s: RunningSluice, tag: string): Promise<ActorRow | undefined> =>
  ((await (await s.api("/api/actors")).json()) as { actors: ActorRow[] }).actors.find((a) => a.id === `runtime:1/plugin:${tag}/cache:${tag}`);
const totalEntries = async (s: RunningSluice): Promise<number> => ((await (await s.api("/api/plugins/c/entries")).json()) as { total_entries: number }).total_entries;
const collapse = (xs: string[]): string[] => xs.filter((x, i) => i === 0 || x !== xs[i - 1]);

describe("cache:<tag> model", () => {
  const cases = paths.map((events, i) => ({ name: `#${i} ${events.map(describeEvent).join(" → ")}`, events }));

  test("the generator reaches every state and takes every transition the test can cause", () => {
    const snaps = cases.flatMap((c) => replay(c.events));
    expect(new Set(snaps.map(stateName))).toEqual(
      new Set(["ops.idle/saver.waiting", "ops.working/saver.waiting", "ops.idle/saver.persisting", "stopping", "stopped"]),
    );
    const edges = new Set(cases.flatMap((c) => replay(c.events).map((s, i) => `${i === 0 ? "loading" : stateName(replay(c.events)[i - 1])} ${describeEvent(c.events[i])} → ${stateName(s)}`)));
    expect(edges).toContain("ops.working/saver.waiting timer(changed) → ops.working/saver.waiting");
    expect(edges).toContain("ops.idle/saver.waiting timer(changed) → ops.idle/saver.persisting");
    expect(edges).toContain("ops.idle/saver.waiting stop → stopping");
    // Some path fires the timer with nothing to write, as the replay really has it.
    expect(cases.some((c) => timersWithoutChanges(c.events) > 0)).toBe(true);
  });

  test("a cache without dump_file has no start-up and no saver", async () => {
    const s = await startSluice(config(false));
    try {
      const plain = await actorRow(s, "c");
      const [initial] = initialTransition(model, { ...INPUT, persistent: false });
      expect(plain?.state).toEqual(initial.value);
      expect(initial.value).toEqual({ running: { ops: "idle", saver: "off", sweeper: "waiting" } });
    } finally {
      await s.stop();
    }
  });

  test.each(cases)("$name", async ({ events }) => {
    const s = await startSluice(config(true), { "cache.dump": seed });
    running.push(s);
    const file = join(s.dir, "cache.dump");
    // The start-up ran before the test could listen: the actor's state now is where the bus starts.
    const observed: string[] = [JSON.stringify((await actorRow(s, "c"))?.state)];
    s.app.bus.on("actor.transition", (t) => {
      if (t.id === "runtime:1/plugin:c/cache:c") observed.push(JSON.stringify(t.state));
    });
    const actor = concernActor(s.app.actor.system, 1, "c") as AnyActorRef;
    let [snap] = initialTransition(model, INPUT);
    const expected: string[] = [];
    let dirty = false;
    let names = 0;
    let held: ReturnType<typeof heldLoad> | null = null;
    let flushed: Promise<Response> | null = null;
    // Exactly the machine's states so far: a state the machine would not enter (a write it skips) shows up at once.
    const seen = async (): Promise<void> => {
      const want = collapse(expected);
      await until(`states ${want.join(" → ")} (saw ${collapse(observed).join(" → ")})`, () => collapse(observed).length >= want.length || undefined, 8000).catch(() => undefined);
      expect(collapse(observed)).toEqual(want);
    };
    try {
      for (const event of events) {
        let step: ModelEvent = event;
        switch (event.type) {
          case "xstate.done.actor.loadDump": {
            // The start-up ran before the program was up: the dump's entries are there for the first query.
            const row = await actorRow(s, "c");
            expect(row?.context).toMatchObject({ loaded_at_start: 2, load_error: null, persists: 0 });
            expect(await totalEntries(s)).toBe(2);
            await query(s.udpPort, "one.model.test");
            expect(await totalEntries(s)).toBe(2);
            break;
          }
          case "CACHE.FLUSH":
            flushed = s.api("/api/plugins/c/flush", { method: "POST" });
            if (held === null) {
              const res = await flushed;
              expect(res.status).toBe(200);
              dirty = true;
            }
            break;
          case "CACHE.DUMP": {
            const res = await s.api("/api/plugins/c/dump");
            expect(res.status).toBe(200);
            expect(decodeDump(Buffer.from(await res.arrayBuffer()), performance.now(), Date.now()).length).toBe(await totalEntries(s));
            break;
          }
          case "CACHE.LOAD":
            held = heldLoad(s, seed);
            break;
          case "xstate.done.actor.operate":
            if (held) {
              held.release();
              expect(await held.answer).toEqual({ status: 200, body: JSON.stringify({ ok: true, loaded_entries: 2 }) });
              held = null;
              dirty = true;
            }
            break;
          case AFTER_PERSIST: {
            // A change when the path asks for one; the guard reads the real count either way.
            if ((event).changed && !dirty) {
              await query(s.udpPort, `n${++names}.model.test`);
              dirty = true;
            }
            step = { type: AFTER_PERSIST, changed: dirty };
            actor.send({ type: AFTER_PERSIST });
            break;
          }
          case "xstate.done.actor.persist":
            // Its own end: what the timer or the stop started writes by itself.
            break;
          case "CACHE.STOP": {
            // The program's stop destroys the plugin, whose destroy waits for the last write.
            const entries = await totalEntries(s);
            await s.app.stop();
            running.splice(running.indexOf(s), 1);
            expect(decodeDump(readFileSync(file), performance.now(), Date.now())).toHaveLength(entries);
            break;
          }
        }
        [snap] = transition(model, snap, step as never);
        expected.push(JSON.stringify(snap.value));
        // A flush, dump or stop has already ended when the test can look: checked with its end, the next step.
        const endedAlready = (event.type === "CACHE.FLUSH" && held === null) || event.type === "CACHE.DUMP" || event.type === "CACHE.STOP";
        if (!endedAlready) await seen();
        if (event.type === "xstate.done.actor.persist" && snap.value !== "stopped") {
          // A timer's persist wrote what the cache holds.
          const row = await actorRow(s, "c");
          expect(row?.context).toMatchObject({ persists: snap.context.persists, last_persist_error: null });
          expect(decodeDump(readFileSync(file), performance.now(), Date.now())).toHaveLength(await totalEntries(s));
          dirty = false;
        }
        if (event.type === AFTER_PERSIST && region(snap, "saver") === "waiting") {
          expect((await actorRow(s, "c"))?.context.persists).toBe(snap.context.persists);
        }
        // A flush in a state the machine refuses it in (held there by the load): the guard's code.
        if (event.type === "CACHE.FLUSH" && held !== null) {
          const guard = refusingGuard(snap, FLUSH);
          const refusal = GUARD_REFUSALS[guard ?? ""];
          expect(refusal, `guard ${guard}`).toBeDefined();
          const res = await (flushed as Promise<Response>);
          const body = (await res.json()) as { code: string };
          expect([res.status, body.code]).toEqual([ERROR_STATUS[refusal.code], refusal.code]);
          refusalsChecked.add(`${stateName(snap)} ${res.status} ${body.code}`);
        }
      }
      // The path's end settles: a held load is let through and answered.
      if (held) {
        held.release();
        expect((await held.answer).status).toBe(200);
      }
    } finally {
      if (running.includes(s)) {
        await s.stop();
        running.splice(running.indexOf(s), 1);
      } else {
        rmSync(s.dir, { recursive: true, force: true });
      }
    }
  }, 40_000);

  test("every refusal was checked against the API", () => {
    expect([...refusalsChecked]).toEqual(["ops.working/saver.waiting 409 cache_busy"]);
  });
});
