// Model-based test of a ros_address_list plugin's manager (ros:<tag>, machines/ros-address-list.machine.ts):
// @xstate/graph gives the shortest path to every state, each extended by every event the test can cause
// there; each path is replayed against a real Sluice (in-process) in front of the RouterOS-shaped server
// (test/helpers/routeros.ts), which holds every REST call until the test lets it through, or fails it.
// The timers (batch window, retry delay, reconcile interval) are an hour long in the configuration and
// their events are delivered to the live actor when the path says; observations are real DNS queries.
// A stop is the program's stop: the plugin's destroy cancels the call in flight, so the work under way
// ends by itself, then the cleanup removes the rows. After every step the states the real actor went
// through (from the bus) must be the machine's.
import { getShortestPaths } from "@xstate/graph";
import { fromCallback, fromPromise, getNextSnapshot, initialTransition, type AnyActorRef, type SnapshotFrom } from "xstate";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { concernActor } from "../../actors/app.actor.js";
import { rosAddressListMachine, type RosCleanupResult, type RosEvent, type RosInput, type RosScanResult, type RosSyncResult } from "../../machines/ros-address-list.machine.js";
import { query } from "../helpers/dns.js";
import { answerWith, startResponder, type Responder } from "../helpers/responder.js";
import { startFakeRouter, type FakeRouter } from "../helpers/routeros.js";
import { startSluice, type RunningSluice } from "../helpers/sluice.js";
import { until, withoutPrefixes } from "./harness.js";

const after = (delay: string, state: string): string => `xstate.after.${delay}.rosAddressList.${state}`;
const T = {
  retryRecover: after("retryDelay", "recoverWait"),
  retrySync: after("retryDelay", "backoff"),
  batch: after("batchInterval", "gathering"),
  reconcile: after("reconcileInterval", "idle"),
};
/** A work's end; `more`: the test has put an observation into the intake meanwhile (the model's rosHasWork). */
type Done =
  | { type: "xstate.done.actor.recover" | "xstate.done.actor.reconcile"; output: RosScanResult; more: boolean }
  | { type: "xstate.done.actor.sync"; output: RosSyncResult; more: boolean }
  | { type: "xstate.done.actor.cleanup"; output: RosCleanupResult };
type Failed = { type: "xstate.error.actor.recover" | "xstate.error.actor.reconcile"; error: Error };
type ModelEvent = RosEvent | Done | Failed | { type: string };
type Snap = SnapshotFrom<typeof rosAddressListMachine>;

const never = <T>() => fromPromise<T>(() => new Promise<T>(() => undefined));
const model = rosAddressListMachine.provide({
  actors: { doorbell: fromCallback(() => () => undefined), recover: never<RosScanResult>(), sync: never<RosSyncResult>(), reconcile: never<RosScanResult>(), cleanup: never<RosCleanupResult>() },
  guards: { rosHasWork: ({ event }) => (event as { more?: boolean }).more === true },
});
const INPUT: RosInput = { tag: "ros", batchIntervalMs: 3_600_000, reconcileIntervalMs: 3_600_000, retryBaseMs: 3_600_000, retryMaxMs: 3_600_000, cleanupOnShutdown: true, clock: () => 0 };

const scanned = (more: boolean): Done => ({ type: "xstate.done.actor.recover", output: { owned: 1, added: 0, removed: 0 }, more });
const reconciled: Done = { type: "xstate.done.actor.reconcile", output: { owned: 1, added: 0, removed: 0 }, more: false };
const synced = (retry: number, more: boolean): Done => ({ type: "xstate.done.actor.sync", output: { handled: 1, retry, error: retry > 0 ? "503" : null }, more });
const cleaned: Done = { type: "xstate.done.actor.cleanup", output: { removed: 1, failed: 0, handed_over: 0 } };
const STOP: RosEvent = { type: "ROS.STOP", requestId: "s" };
const WORK: RosEvent = { type: "ROS.WORK" };

/** What the test can cause in each state. With a stop asked, the work under way ends by itself (cancelled). */
function eventsFor(s: Snap): ModelEvent[] {
  const stopping = s.context.stopRequest !== null;
  switch (s.value) {
    case "recovering":
      return stopping ? [{ type: "xstate.error.actor.recover", error: new Error("cancelled") }] : [scanned(false), scanned(true), { type: "xstate.error.actor.recover", error: new Error("503") }, STOP];
    case "recoverWait":
      return [{ type: T.retryRecover }, STOP];
    case "idle":
      return [WORK, { type: T.reconcile }, STOP];
    case "gathering":
      return [{ type: T.batch }, STOP];
    case "syncing":
      return stopping ? [synced(0, false)] : [synced(0, false), synced(0, true), synced(1, false), STOP];
    case "backoff":
      return [{ type: T.retrySync }, STOP];
    case "reconciling":
      return stopping ? [{ type: "xstate.error.actor.reconcile", error: new Error("cancelled") }] : [reconciled, { type: "xstate.error.actor.reconcile", error: new Error("503") }, STOP];
    case "stopping":
      return [cleaned];
    default:
      return [];
  }
}

const serialize = (s: Snap): string => JSON.stringify([s.value, s.context.stopRequest !== null]);
const shortest = getShortestPaths(model, { input: INPUT, events: (s) => eventsFor(s) as never, serializeState: (s) => serialize(s) });

/** Every transition once: the shortest path to each state, extended by each event possible there, then run to its stop's end. */
const extended = shortest.flatMap((p) => {
  const last = p.steps[p.steps.length - 1].state;
  return eventsFor(last).map((event) => {
    const events = [...p.steps.slice(1).map((st) => st.event as ModelEvent), event];
    let snap = getNextSnapshot(model, last, event as never);
    // A stop is followed through: the work it cancels ends, then the cleanup.
    while (snap.context.stopRequest !== null && snap.value !== "stopped") {
      const next = eventsFor(snap)[0];
      events.push(next);
      snap = getNextSnapshot(model, snap, next as never);
    }
    return events;
  });
});

function replay(events: ModelEvent[]): Snap[] {
  let [snap] = initialTransition(model, INPUT);
  return events.map((e) => ([snap] = [getNextSnapshot(model, snap, e as never)])[0]);
}

const describeEvent = (e: ModelEvent): string => {
  if (e.type.startsWith("xstate.after.")) return `timer(${e.type.split(".")[2]})`;
  if ("more" in e) return `${e.type.replace("xstate.done.actor.", "done:")}${"output" in e && "retry" in e.output && e.output.retry > 0 ? "(retry)" : ""}${e.more ? "(+obs)" : ""}`;
  return e.type.replace("xstate.done.actor.", "done:").replace("xstate.error.actor.", "failed:").replace("ROS.", "").toLowerCase();
};
const paths = withoutPrefixes(extended, (events) => events.map(describeEvent));

let upstream: Responder;
let names = 0;
beforeAll(async () => {
  // Each name gets its own address, so every observation is new to the manager.
  upstream = await startResponder((q) => {
    const n = Number(/^w(\d+)\./.exec(q.questions[0].name)?.[1] ?? 0);
    return answerWith(q, [`10.77.${Math.floor(n / 250)}.${n % 250}`], 300);
  });
});
afterAll(async () => {
  await upstream.close();
});

const config = (router: FakeRouter): string => `api:
  http: 127.0.0.1:0
plugins:
  - tag: ros
    type: ros_address_list
    args:
      address: "${router.url}"
      username: api-user
      password: secret
      address_list4: policy4
      batch_interval: 60s
      retry_interval: 1h
      reconcile_interval: 1h
      persistent: { ips: ["203.0.113.1"] }
  - tag: main
    type: sequence
    args:
      - exec: $ros
      - exec: forward 127.0.0.1:${upstream.port}
  - { tag: udp, type: udp_server, args: { entry: main, listen: "127.0.0.1:0" } }
`;

const collapse = (xs: string[]): string[] => xs.filter((x, i) => i === 0 || x !== xs[i - 1]);

describe("ros:<tag> model", () => {
  const cases = paths.map((events, i) => ({ name: `#${i} ${events.map(describeEvent).join(" → ")}`, events }));

  test("the generator reaches every state and takes every transition the test can cause", () => {
    const snaps = cases.flatMap((c) => replay(c.events));
    expect(new Set(snaps.map((s) => s.value))).toEqual(new Set(["recovering", "recoverWait", "idle", "gathering", "syncing", "backoff", "reconciling", "stopping", "stopped"]));
    const edges = new Set(cases.flatMap((c) => replay(c.events).map((s, i, all) => `${i === 0 ? "recovering" : String(all[i - 1].value)} ${describeEvent(c.events[i])} → ${String(s.value)}`)));
    for (const edge of ["recovering done:recover(+obs) → gathering", "syncing done:sync(retry) → backoff", "syncing done:sync(+obs) → gathering", "backoff timer(retryDelay) → syncing", "syncing stop → syncing", "syncing done:sync → stopping"]) {
      expect(edges).toContain(edge);
    }
  });

  test.concurrent.each(cases)("$name", async ({ events }) => {
    const router = await startFakeRouter();
    router.hold();
    const s: RunningSluice = await startSluice(config(router));
    const id = "runtime:1/plugin:ros/ros:ros";
    const observed: string[] = [];
    s.app.bus.on("actor.transition", (t) => {
      if (t.id === id) observed.push(String(t.state));
    });
    const actor = concernActor(s.app.actor.system, 1, "ros") as AnyActorRef;
    // The start-up scan is held: the actor rests in `recovering` (its entry came before the test listened).
    observed.unshift(String((actor.getSnapshot() as { value: unknown }).value));
    const expected: string[] = ["recovering"];
    let snap = initialTransition(model, INPUT)[0];
    let stopped = false;
    const seen = async (): Promise<void> => {
      const want = collapse(expected);
      await until(`states ${want.join(" → ")} (saw ${collapse(observed).join(" → ")})`, () => collapse(observed).length >= want.length || undefined, 8000).catch(() => undefined);
      expect(collapse(observed)).toEqual(want);
    };
    const observe = async (): Promise<void> => {
      await query(s.udpPort, `w${++names}.model.test`);
    };
    /** Lets the held call(s) through; the work ends; calls are held again from then on. */
    const finish = async (fail: boolean, method?: string): Promise<void> => {
      await router.waitHeld(1);
      if (fail) router.failNext(1, 503, method);
      router.release();
    };
    try {
      for (const event of events) {
        const before = snap;
        snap = getNextSnapshot(model, snap, event as never);
        const stopAsked = before.context.stopRequest !== null;
        if (event.type === "ROS.STOP") {
          // The program's stop: the destroy cancels the call in flight, the cleanup's calls go through.
          const held = router.held();
          const hadRows = router.rows().length > 0;
          const stopping = s.app.stop();
          await router.waitHeld(held + 1);
          router.release();
          await stopping;
          stopped = true;
          expect(router.rows()).toEqual([]);
          // The cleanup removed what there was (nothing, when no scan ever succeeded).
          expect(router.calls.some((c) => c.method === "DELETE")).toBe(hadRows);
        } else if (stopAsked) {
          // Ended by the stop above.
        } else if (event.type === "ROS.WORK") {
          await observe();
        } else if (event.type.startsWith("xstate.after.")) {
          actor.send({ type: event.type });
          if (event.type !== T.retryRecover && event.type !== T.retrySync && event.type !== T.batch && event.type !== T.reconcile) throw new Error(event.type);
          // Each of these starts work, whose first call the server holds.
          await router.waitHeld(1);
        } else if (event.type === "xstate.done.actor.sync") {
          const d = event as Extract<Done, { type: "xstate.done.actor.sync" }>;
          if (d.more) await observe();
          const rows = router.rows().length;
          await finish(d.output.retry > 0, "PUT");
          if (d.output.retry === 0) await until("the row added", () => router.rows().length > rows || undefined);
        } else if (event.type === "xstate.done.actor.recover" || event.type === "xstate.done.actor.reconcile") {
          if ((event as { more?: boolean }).more === true) await observe();
          await finish(false);
        } else if (event.type === "xstate.error.actor.recover" || event.type === "xstate.error.actor.reconcile") {
          await finish(true);
        }
        if (!stopped && !stopAsked) {
          expected.push(String(snap.value));
          await seen();
          router.hold();
        }
      }
      if (!stopped) {
        const ctx = (actor.getSnapshot() as { context: { last_error: string | null; batches: number } }).context;
        expect(ctx.batches).toBe(snap.context.batches);
        if (snap.context.last_error !== null) expect(ctx.last_error).toMatch(/503/);
      }
    } finally {
      router.release();
      if (!stopped) await s.stop();
      await router.close();
    }
  }, 40_000);
});
