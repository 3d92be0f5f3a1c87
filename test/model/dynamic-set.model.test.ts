// Model-based test of the dynamic-set:<tag> actor (machines/dynamic-set.machine.ts): @xstate/graph gives
// the shortest path to every state, each extended by every event the test can cause there; each path is
// replayed against a real Sluice (in-process) through the set's API routes and DNS queries. A reload is
// held by making the rule file a FIFO that the test writes only when the path says the reload ends; the
// timers' events are delivered to the live actor (the real intervals are an hour and a day, so they never
// fire by themselves), with a change made first (a learned name) or not as the path says. After every
// step the states the real actor went through (from the bus) must be the machine's, its write count the
// machine's, and a change the machine refuses must get its guard's status and code.
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { getShortestPaths } from "@xstate/graph";
import { fromPromise, initialTransition, transition, type AnyActorRef, type SnapshotFrom } from "xstate";
import { afterAll, describe, expect, test } from "vitest";
import { concernActor } from "../../actors/app.actor.js";
import { refusingGuard } from "../../actors/ask.js";
import { dynamicSetMachine, type DynamicSetEvent, type DynamicSetInput, type DynamicSetOperation, type DynamicSetPersisted } from "../../machines/dynamic-set.machine.js";
import { ERROR_STATUS } from "../../src/api/errors.js";
import { GUARD_REFUSALS } from "../../src/api/guards.js";
import { query, rcodeOf } from "../helpers/dns.js";
import { startSluice, type RunningSluice } from "../helpers/sluice.js";
import { HeldFile, until, withoutPrefixes } from "./harness.js";

const AFTER_FLUSH = "xstate.after.flushInterval.dynamicSet.running.saver.waiting";
const AFTER_SWEEP = "xstate.after.cleanupInterval.dynamicSet.running.sweeper.waiting";
type Timer = { type: typeof AFTER_FLUSH; changed: boolean } | { type: typeof AFTER_SWEEP };
type Done = { type: "xstate.done.actor.load" | "xstate.done.actor.operate" | "xstate.done.actor.persist" | "xstate.done.actor.sweep"; output: unknown };
/** `fits`: whether an add fits under max_entries (the test sends one that does not). */
type Add = Extract<DynamicSetEvent, { type: "DYNSET.ADD" }> & { fits: boolean };
type ModelEvent = DynamicSetEvent | Add | Timer | Done;
type Snap = SnapshotFrom<typeof dynamicSetMachine>;

const MAX = 50;
const INPUT: DynamicSetInput = { tag: "d", flushIntervalMs: 3_600_000, cleanupIntervalMs: 86_400_000 };
/** The work never ends by itself in the model (the done events say when); the guards read the event. */
const never = <T, I = unknown>() => fromPromise<T, I>(() => new Promise<T>(() => undefined));
const model = dynamicSetMachine.provide({
  actors: { load: never<number>(), operate: never<unknown, DynamicSetOperation>(), persist: never<DynamicSetPersisted>(), sweep: never<number>() },
  guards: {
    dynamicSetChanged: ({ event }) => (event as unknown as Partial<{ changed: boolean }>).changed === true,
    dynamicSetHasRoom: ({ event }) => (event as unknown as Partial<Add>).fits !== false,
  },
  // No plugin actor above it here.
  actions: { reportStarted: () => undefined, reportStartFailed: () => undefined },
});

const LOADED: Done = { type: "xstate.done.actor.load", output: 0 };
const OPERATED: Done = { type: "xstate.done.actor.operate", output: null };
const PERSISTED: Done = { type: "xstate.done.actor.persist", output: { at_ms: 0, rules: 0 } };
const SWEPT: Done = { type: "xstate.done.actor.sweep", output: 0 };
const ADD: Add = { type: "DYNSET.ADD", rules: [], at: 0, requestId: "a", fits: true };
const ADD_FULL: Add = { ...ADD, fits: false };
const REMOVE: DynamicSetEvent = { type: "DYNSET.REMOVE", rules: [], requestId: "r" };
const CLEAR: DynamicSetEvent = { type: "DYNSET.CLEAR", requestId: "c" };
const RELOAD: DynamicSetEvent = { type: "PROVIDER.RELOAD", requestId: "l" };
const STOP: DynamicSetEvent = { type: "DYNSET.STOP", requestId: "s" };

const region = (s: Snap, name: "ops" | "saver" | "sweeper"): string | null => {
  const v = s.value as { running?: Record<string, string> } | string;
  return typeof v === "object" ? (v.running?.[name] ?? null) : null;
};
const stateName = (s: Snap): string => (typeof s.value === "string" ? s.value : `ops.${region(s, "ops")}/saver.${region(s, "saver")}/sweeper.${region(s, "sweeper")}`);

/**
 * What the test can cause in each state. An add, remove or clear ends at once in the real program, so its
 * end is the only event after it; a reload is held, so an add (refused) and a timer can come meanwhile. A
 * write that falls due during the reload waits for the file (the lock), so the reload ends first. A sweep
 * and a write end by themselves. A stop is asked only when nothing runs (the program stops its API first).
 */
function eventsFor(s: Snap): ModelEvent[] {
  if (s.value === "loading") return [LOADED];
  if (s.value === "stopping") return [PERSISTED];
  if (typeof s.value === "string") return [];
  if (region(s, "sweeper") === "sweeping") return [SWEPT];
  if (region(s, "ops") === "working") {
    if (s.context.operation !== "PROVIDER.RELOAD" || region(s, "saver") === "persisting") return [OPERATED];
    return [ADD, { type: AFTER_FLUSH, changed: true }, OPERATED];
  }
  if (region(s, "saver") === "persisting") return [PERSISTED];
  return [ADD, ADD_FULL, REMOVE, CLEAR, RELOAD, { type: AFTER_FLUSH, changed: true }, { type: AFTER_FLUSH, changed: false }, { type: AFTER_SWEEP }, STOP];
}

const serialize = (s: Snap): string => JSON.stringify([s.value, s.context.operation, s.context.persists > 0]);
const shortest = getShortestPaths(model, { input: INPUT, events: (s) => eventsFor(s) as never, serializeState: (s) => serialize(s) });

function replay(events: ModelEvent[]): Snap[] {
  let [snap] = initialTransition(model, INPUT);
  return events.map((e) => ([snap] = transition(model, snap, e as never))[0]);
}

/** Every transition once: the shortest path to each state, extended by each event possible there (and what ends by itself, by its end). */
const extended = shortest.flatMap((p) => {
  const events = p.steps.slice(1).map((st) => st.event as ModelEvent);
  return eventsFor(p.steps[p.steps.length - 1].state).map((e) => {
    const out = [...events, e];
    const last = replay(out).at(-1);
    if ((e.type === "DYNSET.ADD" || e.type === "DYNSET.REMOVE" || e.type === "DYNSET.CLEAR") && last && region(last, "ops") === "working" && last.context.operation !== "PROVIDER.RELOAD") out.push(OPERATED);
    if (e.type === AFTER_SWEEP) out.push(SWEPT);
    // A write that fell due during a held reload waited for it: it ends after it, by itself.
    if (e.type === "xstate.done.actor.operate" && last && region(last, "saver") === "persisting") out.push(PERSISTED);
    if (e.type === "DYNSET.STOP") out.push(PERSISTED);
    return out;
  });
});

const describeEvent = (e: ModelEvent): string => {
  if (e.type === AFTER_FLUSH) return `flush(${e.changed ? "changed" : "unchanged"})`;
  if (e.type === AFTER_SWEEP) return "sweep-timer";
  if (e.type === "DYNSET.ADD") return (e as Add).fits ? "add" : "add(full)";
  return e.type.replace("xstate.done.actor.", "done:").replace("DYNSET.", "").replace("PROVIDER.", "").toLowerCase();
};
const paths = withoutPrefixes(extended, (events) => events.map(describeEvent));

const running: RunningSluice[] = [];
const refusalsChecked = new Set<string>();
afterAll(async () => {
  for (const s of running) await s.stop().catch(() => undefined);
});

const CONFIG = `api:
  http: 127.0.0.1:0
plugins:
  - { tag: d, type: dynamic_domain_set, args: { path: d.txt, max_entries: ${MAX}, flush_interval_ms: 3600000, cleanup_interval_seconds: 86400 } }
  - { tag: learn, type: learn_domain, args: { provider: d } }
  - tag: main
    type: sequence
    args:
      - { matches: "qname $d", exec: reject NXDOMAIN }
      - { matches: "qname domain:learn.test", exec: $learn }
      - exec: black_hole 192.0.2.1
  - { tag: udp, type: udp_server, args: { entry: main, listen: "127.0.0.1:0" } }
`;

interface ActorRow {
  id: string;
  state: unknown;
  context: Record<string, unknown>;
}
const actorRow = async (s: RunningSluice): Promise<ActorRow | undefined> =>
  ((await (await s.api("/api/actors")).json()) as { actors: ActorRow[] }).actors.find((a) => a.id === "runtime:1/plugin:d/dynamic-set:d");
const collapse = (xs: string[]): string[] => xs.filter((x, i) => i === 0 || x !== xs[i - 1]);
const ruleLines = (text: string): string[] => text.split("\n").filter((l) => l !== "" && !l.startsWith("#"));
const send = (s: RunningSluice, method: string, path: string, body?: unknown): Promise<Response> =>
  s.api(`/api/plugins/d/${path}`, body === undefined ? { method } : { method, headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
const liveRules = async (s: RunningSluice): Promise<number> => ((await (await send(s, "GET", "rules/status")).json()) as { rules: number }).rules;

describe("dynamic-set:<tag> model", () => {
  const cases = paths.map((events, i) => ({ name: `#${i} ${events.map(describeEvent).join(" → ")}`, events }));

  test("the generator reaches every state and takes every transition the test can cause", () => {
    const snaps = cases.flatMap((c) => replay(c.events));
    expect(new Set(snaps.map(stateName))).toEqual(
      new Set([
        "ops.idle/saver.waiting/sweeper.waiting",
        "ops.working/saver.waiting/sweeper.waiting",
        "ops.idle/saver.persisting/sweeper.waiting",
        "ops.working/saver.persisting/sweeper.waiting",
        "ops.idle/saver.waiting/sweeper.sweeping",
        "stopping",
        "stopped",
      ]),
    );
    const edges = new Set(cases.flatMap((c) => replay(c.events).map((s, i) => `${i === 0 ? "loading" : stateName(replay(c.events)[i - 1])} ${describeEvent(c.events[i])} → ${stateName(s)}`)));
    expect(edges).toContain("ops.working/saver.waiting/sweeper.waiting flush(changed) → ops.working/saver.persisting/sweeper.waiting");
    expect(edges).toContain("ops.idle/saver.waiting/sweeper.waiting flush(unchanged) → ops.idle/saver.waiting/sweeper.waiting");
    expect(edges).toContain("ops.idle/saver.waiting/sweeper.waiting add(full) → ops.idle/saver.waiting/sweeper.waiting");
    expect(edges).toContain("ops.idle/saver.waiting/sweeper.waiting stop → stopping");
  });

  test.each(cases)("$name", async ({ events }) => {
    const s = await startSluice(CONFIG);
    running.push(s);
    const file = join(s.dir, "d.txt");
    // The start-up ran before the test could listen: the actor's state now is where the bus starts.
    const first = await actorRow(s);
    expect(first?.context).toMatchObject({ loaded_rules: 0, load_error: null, persists: 0 });
    const observed: string[] = [JSON.stringify(first?.state)];
    s.app.bus.on("actor.transition", (t) => {
      if (t.id === "runtime:1/plugin:d/dynamic-set:d") observed.push(JSON.stringify(t.state));
    });
    const actor = concernActor(s.app.actor.system, 1, "d") as AnyActorRef;
    let [snap] = initialTransition(model, INPUT);
    const expected: string[] = [];
    let dirty = false;
    let names = 0;
    let held: { file: HeldFile; answer: Promise<Response> } | null = null;
    const seen = async (): Promise<void> => {
      const want = collapse(expected);
      await until(`states ${want.join(" → ")} (saw ${collapse(observed).join(" → ")})`, () => collapse(observed).length >= want.length || undefined, 8000).catch(() => undefined);
      expect(collapse(observed)).toEqual(want);
    };
    /** A change the machine refuses in this state: the guard's status and code. */
    const refused = async (res: Response, event: ModelEvent): Promise<void> => {
      const guard = refusingGuard(snap, event);
      const refusal = GUARD_REFUSALS[guard ?? ""];
      expect(refusal, `guard ${guard}`).toBeDefined();
      const body = (await res.json()) as { code: string };
      expect([res.status, body.code]).toEqual([ERROR_STATUS[refusal.code], refusal.code]);
      refusalsChecked.add(`${stateName(snap)} ${res.status} ${body.code}`);
    };
    try {
      for (const event of events) {
        let step: ModelEvent = event;
        let refusal: Response | null = null;
        switch (event.type) {
          case "xstate.done.actor.load":
          case "xstate.done.actor.persist":
          case "xstate.done.actor.sweep":
            // Their own ends: the start-up ran before; a write or a sweep ends by itself.
            break;
          case "DYNSET.ADD": {
            const fits = (event as Add).fits;
            const rules = fits ? [`a${++names}.model.test`] : Array.from({ length: MAX + 1 }, (_, i) => `f${i}.model.test`);
            const res = await send(s, "POST", "rules", { rules });
            if (fits && held === null) {
              expect(res.status).toBe(200);
              expect(rcodeOf(await query(s.udpPort, rules[0]))).toBe(3);
              dirty = true;
            } else refusal = res;
            break;
          }
          case "DYNSET.REMOVE":
            expect((await send(s, "DELETE", "rules", { rules: [`a${names}.model.test`] })).status).toBe(200);
            dirty = true;
            break;
          case "DYNSET.CLEAR":
            expect((await send(s, "POST", "rules/clear")).status).toBe(200);
            expect(await liveRules(s)).toBe(0);
            dirty = true;
            break;
          case "PROVIDER.RELOAD": {
            rmSync(file, { force: true });
            const fifo = new HeldFile(file, "full:held.model.test\n");
            held = { file: fifo, answer: send(s, "POST", "reload") };
            break;
          }
          case "xstate.done.actor.operate":
            if (held) {
              held.file.grant();
              expect((await held.answer).status).toBe(200);
              await held.file.close();
              held = null;
              // The file a write skips (nothing changed since the reload read it) is read below: a plain file again.
              rmSync(file);
              writeFileSync(file, "full:held.model.test\n");
              expect(rcodeOf(await query(s.udpPort, "held.model.test"))).toBe(3);
              dirty = false; // the store is what the file said
            }
            break;
          case AFTER_FLUSH: {
            if (event.changed && !dirty) {
              await query(s.udpPort, `n${++names}.learn.test`);
              dirty = true;
            }
            step = { type: AFTER_FLUSH, changed: dirty };
            actor.send({ type: AFTER_FLUSH });
            break;
          }
          case AFTER_SWEEP:
            actor.send({ type: AFTER_SWEEP });
            break;
          case "DYNSET.STOP": {
            // The program's stop destroys the plugin, whose destroy waits for the last write.
            const live = await liveRules(s);
            await s.app.stop();
            running.splice(running.indexOf(s), 1);
            expect(ruleLines(readFileSync(file, "utf8"))).toHaveLength(live);
            break;
          }
        }
        [snap] = transition(model, snap, step as never);
        expected.push(JSON.stringify(snap.value));
        if (refusal) await refused(refusal, event);
        // An add, remove, clear, sweep or stop has already ended when the test can look: checked with its end, the next step.
        // So has a write that waited for a held reload (it finds nothing to write once the reload has read the file).
        const endedAlready =
          (["DYNSET.ADD", "DYNSET.REMOVE", "DYNSET.CLEAR"].includes(event.type) && held === null && refusal === null) ||
          event.type === "DYNSET.STOP" ||
          event.type === AFTER_SWEEP ||
          (event.type === "xstate.done.actor.operate" && region(snap, "saver") === "persisting");
        if (!endedAlready) await seen();
        if (event.type === "xstate.done.actor.persist" && snap.value !== "stopped") {
          // A timer's write holds what the set holds, and the actor counted it.
          for (let i = 0; i < 400 && (await actorRow(s))?.context.persists !== snap.context.persists; i++) await new Promise((r) => setTimeout(r, 10));
          expect((await actorRow(s))?.context).toMatchObject({ persists: snap.context.persists, last_persist_error: null });
          expect(ruleLines(readFileSync(file, "utf8"))).toHaveLength(await liveRules(s));
          dirty = false;
        }
        if (event.type === AFTER_FLUSH && region(snap, "saver") === "waiting") expect((await actorRow(s))?.context.persists).toBe(snap.context.persists);
      }
      if (held) {
        held.file.grant();
        expect((await held.answer).status).toBe(200);
        await held.file.close();
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
    expect([...refusalsChecked].sort()).toEqual(["ops.idle/saver.waiting/sweeper.waiting 507 dynamic_set_full", "ops.working/saver.waiting/sweeper.waiting 409 dynamic_set_busy"]);
  });
});
