// Model-based test of the <type>:<tag> batch writer (machines/set-writer.machine.ts) of ipset and
// nftset: @xstate/graph gives the shortest path to every state (idle, waiting, writing with no flush
// waiting, with one its current write settles, with one that needs a write more) and extends each by
// every event possible there; each path is replayed against a real Sluice (in-process, ipset run in a
// network namespace of the test's own). A write is held by the program itself: the plugin's command
// is a wrapper that reads a FIFO (HeldFile) before it runs ipset, so a write lasts until the test
// lets it end. What the queue holds when a write ends is what the test queued meanwhile (queries
// whose answers bring new prefixes); a flush is POST write. After every step the states the real
// actor went through (from the bus) must be the machine's, and its count of writes the model's.
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { getShortestPaths } from "@xstate/graph";
import { createActor, fromCallback, fromPromise, getInitialSnapshot, getNextSnapshot, SimulatedClock, type SnapshotFrom } from "xstate";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { setWriterMachine, type FlushResult, type SetWriterEvent, type WriteOutcome } from "../../machines/set-writer.machine.js";
import { query } from "../helpers/dns.js";
import { makeNetns, type Netns } from "../helpers/netns.js";
import { startSluice, tempDir, type RunningSluice } from "../helpers/sluice.js";
import { startZone, type Zone } from "../integration/sets-helpers.js";
import { HeldFile, until, withoutPrefixes } from "./harness.js";

type ModelEvent = SetWriterEvent | { type: string; output?: WriteOutcome };
type Snap = SnapshotFrom<typeof setWriterMachine>;

const B = 3;
/** Entries each write of the model takes (a symbol: only how it compares with the flushes' upTo matters). */
const STEP = 10;
const DONE = "xstate.done.actor.write";
const AFTER = "xstate.after.batchInterval.setWriter.waiting";

const model = setWriterMachine.provide({
  actors: { listen: fromCallback(() => () => undefined), write: fromPromise(() => new Promise<WriteOutcome>(() => undefined)) },
});
const input = { tag: "sets", batchIntervalMs: 1000, batchSize: B, clock: () => 0 };

/** The flush waiting in `writing`: none, one this write settles ("a"), one that needs the write after ("b"). */
const flushKind = (s: Snap): "none" | "a" | "b" => (s.context.flushers.length === 0 ? "none" : s.context.flushers.some((f) => f.upTo > s.context.taken + STEP) ? "b" : "a");
const stateOf = (s: Snap): string => (s.value === "writing" ? `writing/${flushKind(s)}` : String(s.value));

/** Each event carries the label the replay causes it by (the machine ignores the extra field). */
type Labelled = ModelEvent & { label: string };
const flush = (upTo: number, label: string): Labelled => ({ type: "SETS.FLUSH", upTo, requestId: "r", label });
const done = (s: Snap, remaining: number): Labelled => ({ type: DONE, output: { entries: STEP, error: null, taken: s.context.taken + STEP, remaining }, label: `done(left ${remaining})` });

/**
 * What the system or an operator can cause in each state. In `writing`, a flush that needs the write
 * after is realised by queueing one prefix before asking, so the write then ends with one or more left.
 */
function eventsFor(s: Snap): Labelled[] {
  const t = s.context.taken;
  switch (stateOf(s)) {
    case "idle":
      return [{ type: "SETS.QUEUED", label: "QUEUED" }, { type: "SETS.FULL", label: "FULL" }, flush(t, "POST write")];
    case "waiting":
      return [{ type: "SETS.FULL", label: "FULL" }, flush(t + 1, "POST write"), { type: AFTER, label: "batch interval" }];
    case "writing/none":
      return [flush(t + STEP, "POST write (this write)"), flush(t + STEP + 1, "POST write (beyond)"), done(s, 0), done(s, 1), done(s, B)];
    case "writing/a":
      return [done(s, 0), done(s, 1), done(s, B)];
    case "writing/b":
      return [done(s, 1), done(s, B)];
    default:
      return [];
  }
}

const labelOf = (e: unknown): string => (e as { label: string }).label;

interface Step {
  label: string;
  event: ModelEvent;
  from: Snap;
  state: Snap;
}

/**
 * The graph keeps one snapshot per serialised state, whichever path reached it last, so its numbers
 * (taken, writes) are not the path's own: each path's events are made again from the machine's
 * own snapshots, walked from the start, and must lead through the same states.
 */
function walk(labels: string[], states: string[]): Step[] {
  let snap = getInitialSnapshot(model, input);
  return labels.map((label, i) => {
    const event = eventsFor(snap).find((e) => e.label === label);
    if (event === undefined) throw new Error(`no ${label} in ${stateOf(snap)}`);
    const from = snap;
    snap = getNextSnapshot(model, snap, event as never);
    if (stateOf(snap) !== states[i]) throw new Error(`${label} from ${stateOf(from)} led to ${stateOf(snap)}, not ${states[i]}`);
    return { label, event, from, state: snap };
  });
}

const shortest = getShortestPaths(model, { input, events: (s) => eventsFor(s) as never, serializeState: (s) => stateOf(s) });
const extended = shortest.flatMap((p) => {
  const last = p.steps[p.steps.length - 1].state;
  const steps = p.steps.slice(1).map((st) => ({ label: labelOf(st.event), state: stateOf(st.state) }));
  return eventsFor(last).map((event) => walk([...steps.map((st) => st.label), event.label], [...steps.map((st) => st.state), stateOf(getNextSnapshot(model, last, event as never))]));
});
const stepName = (st: Step): string => `${st.label}→${stateOf(st.state)}`;
const paths = withoutPrefixes(extended, (p) => p.map(stepName));

const collapse = (states: string[]): string[] => states.filter((x, i) => i === 0 || x !== states[i - 1]);

let ns: Netns;
let zone: Zone;
let counter = 0;
/** Each prefix the replays queue is new: 10.<a>.<b>.0/24 from this count. */
let address = 0;
const running = new Set<RunningSluice>();

beforeAll(async () => {
  ns = await makeNetns();
  zone = await startZone();
  await ns.exec([ns.ipset, "create", "m4", "hash:net", "family", "inet"]);
});
afterAll(async () => {
  for (const s of running) await s.stop().catch(() => undefined);
  await zone?.responder.close();
  await ns?.remove();
});

describe("<type>:<tag> batch writer model", () => {
  test("the generator reaches every state and takes every transition", () => {
    const states = new Set(paths.flatMap((p) => p.map((st) => stateOf(st.state))));
    expect(states).toEqual(new Set(["idle", "waiting", "writing/none", "writing/a", "writing/b"]));
    const edges = new Set(paths.flatMap((p) => p.map((st) => `${String(st.from.value)} ${stepName(st)}`)));
    for (const edge of [
      "idle QUEUED→waiting",
      "idle FULL→writing/none",
      "idle POST write→idle",
      "waiting FULL→writing/none",
      "waiting POST write→writing/a",
      "waiting batch interval→writing/none",
      "writing POST write (this write)→writing/a",
      "writing POST write (beyond)→writing/b",
      "writing done(left 0)→idle",
      "writing done(left 1)→waiting",
      "writing done(left 3)→writing/none",
      "writing done(left 1)→writing/a",
      "writing done(left 3)→writing/a",
    ]) {
      expect(edges, edge).toContain(edge);
    }
    // Nothing is ever refused: there is no guard the API maps.
    for (const p of paths) for (const st of p) expect(st.state.can({ type: "SETS.FLUSH", upTo: 0, requestId: "x" })).toBe(true);
  });

  test.concurrent.each(paths.map((p) => ({ name: p.map(stepName).join(", "), steps: p })))("$name", async ({ steps }) => {
    const dir = tempDir("set-writer-model-");
    const held = new HeldFile(join(dir, "hold"), "go\n");
    const wrapper = join(dir, "held-ipset");
    writeFileSync(wrapper, `#!/bin/sh\nread _ < ${held.path}\nexec ${ns.prefix.join(" ")} ${ns.ipset} "$@"\n`, { mode: 0o755 });
    const usesTimer = steps.some((st) => st.event.type === AFTER);
    const s = await startSluice(`api:
  http: 127.0.0.1:0
plugins:
  - tag: sets
    type: ipset
    args: { command: [${wrapper}], set_name4: m4, batch_size: ${B}, queue_size: 100, batch_interval: ${usesTimer ? "40ms" : "1h"} }
  - tag: main
    type: sequence
    args:
      - exec: forward 127.0.0.1:${zone.responder.port}
      - exec: $sets
  - { tag: udp, type: udp_server, args: { entry: main, listen: "127.0.0.1:0" } }
`);
    running.add(s);
    const observed: string[] = ["idle"];
    let writes = 0;
    let flushers = 0;
    s.app.bus.on("actor.transition", (t) => {
      if (!t.id.endsWith("/ipset:sets")) return;
      observed.push(String(t.state));
      writes = Number(t.context.writes ?? writes);
      // The context as the bus shows it: an empty list, or "[n items]".
      const f = t.context.flushers;
      flushers = Array.isArray(f) ? f.length : typeof f === "string" ? Number(/\d+/.exec(f)?.[0] ?? 0) : flushers;
    });
    /** Queries a name whose answer brings `n` prefixes not seen before. */
    const push = async (n: number): Promise<void> => {
      if (n <= 0) return;
      const name = `m${++counter}.model.test`;
      const ips = Array.from({ length: n }, () => ++address).map((g) => `10.${(g >> 8) & 255}.${g & 255}.1`);
      zone.names.set(name, { ips, ttl: 60 });
      await query(s.udpPort, name, "A");
    };
    const pending: Promise<Response>[] = [];
    const expected: string[] = ["idle"];
    /** Entries queued now (pushed, not taken by a write). */
    let queued = 0;
    try {
      for (const { label, event, from, state } of steps) {
        switch (event.type) {
          case "SETS.QUEUED":
            await push(1);
            queued = 1;
            break;
          case "SETS.FULL":
            await push(B - queued);
            queued = 0;
            break;
          case "SETS.FLUSH":
            if (from.value === "idle") {
              const res = await s.api("/api/plugins/sets/write", { method: "POST" });
              expect(await res.json()).toEqual({ ok: true, written: 0, failed: 0, error: null });
            } else {
              if (label === "POST write (beyond)") {
                await push(1);
                queued = 1;
              }
              pending.push(s.api("/api/plugins/sets/write", { method: "POST" }));
              if (from.value === "waiting") queued = 0;
            }
            break;
          case DONE: {
            const left = (event as { output: WriteOutcome }).output.remaining;
            await push(left - queued);
            held.grant();
            // The next write, if any, takes what is left (never more than a batch here).
            queued = state.value === "waiting" ? left : 0;
            break;
          }
          case AFTER:
            queued = 0;
            break;
        }
        expected.push(String(state.value));
        const want = collapse(expected);
        // Settled when the actor has shown as many states, writes and waiting flushes as the model.
        const settled = (): boolean => collapse(observed).length >= want.length && writes === state.context.writes && flushers === state.context.flushers.length;
        await until(`states ${want.join(" → ")}, ${state.context.writes} writes, ${state.context.flushers.length} flushes (saw ${collapse(observed).join(" → ")}, ${writes}, ${flushers})`, () => settled() || undefined, 8000).catch(() => undefined);
        // With a short interval, waiting moves on by itself; anywhere else the state stays until the next step.
        const seen = usesTimer && state.value === "waiting" ? collapse(observed).slice(0, want.length) : collapse(observed);
        expect([seen, writes, flushers]).toEqual([want, state.context.writes, state.context.flushers.length]);
      }
      // Every flush asked is answered once its entries are written.
      held.openAll();
      for (const res of await Promise.all(pending)) expect(((await res.json()) as FlushResult & { ok: boolean }).ok).toBe(true);
    } finally {
      held.openAll();
      await s.stop();
      running.delete(s);
      await held.close();
    }
  }, 30_000);

  test("the interval is a delayed transition of waiting only: no timer runs in idle, and a write that cannot run answers its flushes with the error", async () => {
    const clock = new SimulatedClock();
    let writes = 0;
    const actor = createActor(
      model.provide({
        actors: {
          write: fromPromise<WriteOutcome>(() => {
            writes++;
            return writes === 1 ? Promise.resolve({ entries: 2, error: null, taken: 2, remaining: 0 }) : Promise.reject(new Error("spawn failed"));
          }),
        },
      }),
      { input: { ...input, batchIntervalMs: 200 }, clock },
    ).start();
    clock.increment(10_000);
    expect([actor.getSnapshot().value, writes]).toEqual(["idle", 0]);
    actor.send({ type: "SETS.QUEUED" });
    clock.increment(199);
    expect(actor.getSnapshot().value).toBe("waiting");
    clock.increment(1);
    expect(writes).toBe(1);
    await until("idle", () => actor.getSnapshot().value === "idle" || undefined);
    expect(actor.getSnapshot().context).toMatchObject({ writes: 1, written: 2, taken: 2 });
    const answers: unknown[] = [];
    actor.on("answer", (a) => answers.push(a));
    actor.send({ type: "SETS.FLUSH", upTo: 5, requestId: "f" });
    await until("the failed write", () => actor.getSnapshot().value === "waiting" || undefined);
    expect(answers).toMatchObject([{ requestId: "f", ok: false }]);
    expect(actor.getSnapshot().context).toMatchObject({ write_errors: 1, last_error: "spawn failed", flushers: [] });
    actor.stop();
  });
});
