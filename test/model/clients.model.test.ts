// Model-based test of the clients:<tag> actor (machines/clients.machine.ts): @xstate/graph gives the
// shortest path to every state, each extended by every event the test can cause there (and by what then
// ends by itself: a write, a neighbour read, a round of PTR lookups); those paths name the transitions to
// take. Each replayed path starts a Sluice (most of a short path's time), so instead walks that go on from
// where they are to the nearest transition not taken yet take them all (harness.ts coveringWalks): one
// Sluice per walk, a new walk only where a step cannot be undone (a stop, the neighbour table turned off).
// Each walk is replayed against a real Sluice (in-process) through the provider's routes and DNS queries.
// The timers' events are delivered to the live actor (the real intervals are an hour, so they never fire
// by themselves; a pause's end moves the provider's clock on by the hour it lasted); what a neighbour read
// finds is set up before its timer (PATH: the real `ip`, none, or one that fails). After every step the
// states the real actor went through (from the bus) must be the machine's, the answers to DNS queries what
// its named clients and pauses say, the state file what it holds, and a refused change must get its guard's
// status and code.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { getShortestPaths } from "@xstate/graph";
import { fromPromise, initialTransition, transition, type AnyActorRef, type SnapshotFrom } from "xstate";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { concernActor } from "../../actors/app.actor.js";
import { refusingGuard } from "../../actors/ask.js";
import { clientsMachine, type ClientsEvent, type ClientsInput, type ClientsLoaded, type ClientsWrite, type ClientsWritten } from "../../machines/clients.machine.js";
import { ERROR_STATUS } from "../../src/api/errors.js";
import { GUARD_REFUSALS } from "../../src/api/guards.js";
import { replyTo } from "../../src/dns/message.js";
import { WireWriter } from "../../src/dns/writer.js";
import { rcodeFrom } from "../helpers/client-source.js";
import { startResponder, type Responder } from "../helpers/responder.js";
import { startSluice, type RunningSluice } from "../helpers/sluice.js";
import { coveringWalks, until } from "./harness.js";

const AFTER_STATE = "xstate.after.stateInterval.clients.running.writer.idle";
const AFTER_PAUSE = "xstate.after.pauseEnds.clients.running.pauses.timing";
const AFTER_REFRESH = "xstate.after.neighbourRefresh.clients.running.neighbours.waiting";
const AFTER_HOSTNAMES = "xstate.after.hostnameInterval.clients.running.hostnames.waiting";
type Timer = { type: typeof AFTER_STATE | typeof AFTER_PAUSE | typeof AFTER_REFRESH | typeof AFTER_HOSTNAMES };
type Ended =
  | { type: "xstate.done.actor.load" | "xstate.done.actor.persist" | "xstate.done.actor.readNeighbours" | "xstate.done.actor.resolveHostnames"; output: unknown }
  | { type: "xstate.error.actor.readNeighbours"; error: unknown };
type ModelEvent = ClientsEvent | Timer | Ended;
type Snap = SnapshotFrom<typeof clientsMachine>;

const HOUR = 3_600_000;
const INPUT: ClientsInput = { tag: "clients", declared: ["tv"], groups: ["kids"], stateIntervalMs: HOUR, neighbourRefreshMs: HOUR, hostnameIntervalMs: HOUR };
/** The work never ends by itself in the model (the ended events say when). */
const never = <T, I = unknown>() => fromPromise<T, I>(() => new Promise<T>(() => undefined));
const model = clientsMachine.provide({
  actors: { load: never<ClientsLoaded>(), persist: never<ClientsWritten, ClientsWrite>(), readNeighbours: never<number | null>(), resolveHostnames: never<number>() },
  // No plugin actor above it here.
  actions: { reportStarted: () => undefined, reportStartFailed: () => undefined },
});

const LOADED: Ended = { type: "xstate.done.actor.load", output: { named: [], pauses: [], now_ms: 0, rewrite: false, neighbours: 1, neighbour_tool: true } satisfies ClientsLoaded };
const WRITTEN: Ended = { type: "xstate.done.actor.persist", output: { at_ms: 0, written: true } satisfies ClientsWritten };
const FOUND: Ended = { type: "xstate.done.actor.readNeighbours", output: 1 };
const NO_TOOL: Ended = { type: "xstate.done.actor.readNeighbours", output: null };
const READ_FAILED: Ended = { type: "xstate.error.actor.readNeighbours", error: new Error("ip failed") };
const RESOLVED: Ended = { type: "xstate.done.actor.resolveHostnames", output: 1 };
const N1 = { name: "n1", addresses: ["127.0.0.31"], macs: [], ids: [], groups: ["kids"] };
const NAME_N1: ClientsEvent = { type: "CLIENTS.NAME", client: N1, at: 0, requestId: "r" };
const NAME_TV: ClientsEvent = { type: "CLIENTS.NAME", client: { ...N1, name: "tv", addresses: ["127.0.0.33"] }, at: 0, requestId: "r" };
const UPDATE_N1: ClientsEvent = { type: "CLIENTS.UPDATE", name: "n1", changes: { addresses: ["127.0.0.32"] }, at: 0, requestId: "r" };
const UPDATE_TV: ClientsEvent = { type: "CLIENTS.UPDATE", name: "tv", changes: { groups: [] }, at: 0, requestId: "r" };
const REMOVE_N1: ClientsEvent = { type: "CLIENTS.REMOVE", name: "n1", at: 0, requestId: "r" };
const REMOVE_TV: ClientsEvent = { type: "CLIENTS.REMOVE", name: "tv", at: 0, requestId: "r" };
const PAUSE_KIDS: ClientsEvent = { type: "CLIENTS.PAUSE", group: "kids", duration_ms: HOUR, at: 0, requestId: "r" };
const PAUSE_NOPE: ClientsEvent = { type: "CLIENTS.PAUSE", group: "nope", duration_ms: HOUR, at: 0, requestId: "r" };
const RESUME_KIDS: ClientsEvent = { type: "CLIENTS.RESUME", group: "kids", at: 0, requestId: "r" };
const STOP: ClientsEvent = { type: "CLIENTS.STOP", requestId: "s" };

const region = (s: Snap, name: "writer" | "pauses" | "neighbours" | "hostnames"): string | null => {
  const v = s.value as { running?: Record<string, string> } | string;
  return typeof v === "object" ? (v.running?.[name] ?? null) : null;
};
const stateName = (s: Snap): string =>
  typeof s.value === "string" ? s.value : `writer.${region(s, "writer")}/pauses.${region(s, "pauses")}/neighbours.${region(s, "neighbours")}/hostnames.${region(s, "hostnames")}`;

/** What the test can cause in each state; work under way ends by itself, so its end is the only event then. */
function eventsFor(s: Snap): ModelEvent[] {
  if (s.value === "loading") return [LOADED];
  if (s.value === "stopping") return [WRITTEN];
  if (typeof s.value === "string") return [];
  if (region(s, "writer") === "writing") return [WRITTEN];
  if (region(s, "neighbours") === "reading") return [FOUND, NO_TOOL, READ_FAILED];
  if (region(s, "hostnames") === "resolving") return [RESOLVED];
  // The table once off stays off: one way out is enough.
  if (region(s, "neighbours") === "off") return [STOP];
  const timers: ModelEvent[] = [{ type: AFTER_STATE }, { type: AFTER_REFRESH }, { type: AFTER_HOSTNAMES }];
  if (region(s, "pauses") === "timing") timers.push({ type: AFTER_PAUSE });
  return [NAME_N1, NAME_TV, UPDATE_N1, UPDATE_TV, REMOVE_N1, REMOVE_TV, PAUSE_KIDS, PAUSE_NOPE, RESUME_KIDS, ...timers, STOP];
}

const transient = (s: Snap): boolean => s.value === "stopping" || region(s, "writer") === "writing" || region(s, "neighbours") === "reading" || region(s, "hostnames") === "resolving";
const serialize = (s: Snap): string => JSON.stringify([s.value, s.context.named.length, s.context.pauses.length]);
const shortest = getShortestPaths(model, { input: INPUT, events: (s) => eventsFor(s) as never, serializeState: (s) => serialize(s) });

function replay(events: ModelEvent[]): Snap[] {
  let [snap] = initialTransition(model, INPUT);
  return events.map((e) => ([snap] = transition(model, snap, e as never))[0]);
}

/** Every transition once: the shortest path to each state, extended by each event possible there, then by what ends by itself. */
const extended = shortest.flatMap((p) => {
  const events = p.steps.slice(1).map((st) => st.event as ModelEvent);
  return eventsFor(p.steps[p.steps.length - 1].state).map((e) => {
    const out = [...events, e];
    for (let last = replay(out).at(-1); last && transient(last); last = replay(out).at(-1)) out.push(eventsFor(last)[0]);
    return out;
  });
});

const describeEvent = (e: ModelEvent): string => {
  switch (e.type) {
    case AFTER_STATE:
      return "state-timer";
    case AFTER_PAUSE:
      return "pause-ends";
    case AFTER_REFRESH:
      return "refresh-timer";
    case AFTER_HOSTNAMES:
      return "hostname-timer";
    case "xstate.done.actor.readNeighbours":
      return e.output === null ? "read:no-tool" : "read:found";
    case "xstate.error.actor.readNeighbours":
      return "read:failed";
    case "CLIENTS.NAME":
      return `name(${e.client.name})`;
    case "CLIENTS.UPDATE":
    case "CLIENTS.REMOVE":
      return `${e.type.slice(8).toLowerCase()}(${e.name})`;
    case "CLIENTS.PAUSE":
    case "CLIENTS.RESUME":
      return `${e.type.slice(8).toLowerCase()}(${e.group})`;
    default:
      return e.type.replace("xstate.done.actor.", "done:").replace("CLIENTS.", "").toLowerCase();
  }
};

/** A transition: the model's states (as the generator tells them apart) before and after, and the event. */
const key = (s: Snap, e: ModelEvent, prev: Snap): string => `${serialize(prev)} ${describeEvent(e)} → ${serialize(s)}`;
function transitionsOf(events: ModelEvent[]): string[] {
  let [prev] = initialTransition(model, INPUT);
  return events.map((e) => {
    const [to] = transition(model, prev, e as never);
    const k = key(to, e, prev);
    prev = to;
    return k;
  });
}
/** The criterion: every transition the extended shortest paths take. */
const cover = new Set(extended.flatMap(transitionsOf));

/** States the generator tells apart have the same future: their transitions are computed once. */
const nextMemo = new Map<string, Snap>();
function next(s: Snap, e: ModelEvent): Snap {
  const k = `${serialize(s)} ${describeEvent(e)}`;
  let to = nextMemo.get(k);
  if (!to) nextMemo.set(k, (to = transition(model, s, e as never)[0]));
  return to;
}
const [start] = initialTransition(model, INPUT);
/** The walks; one that stops mid-way (a write, a read, a round of lookups under way) is finished by what ends by itself. */
const paths = coveringWalks<Snap, ModelEvent>({ start, events: eventsFor, next, key, cover, walks: 2 }).map((events) => {
  const out = [...events];
  for (let last = replay(out).at(-1); last && transient(last); last = replay(out).at(-1)) out.push(eventsFor(last)[0]);
  return out;
});

// rcodes: 3 = a kids client asking for an ad; 4 = a kids client; 2 = anything else.
const config = (ptrPort: number, on: boolean): string => `api:
  http: 127.0.0.1:0
plugins:
  - { tag: ads, type: qname, args: ["domain:ads.test"] }
  - tag: clients
    type: clients
    args:
      clients: [{ name: tv, addresses: [127.0.0.2], groups: [kids] }]
      groups: [{ name: kids }]
      pause: [ads]
      state_interval: 1h
${on ? `      neighbour_refresh: 1h\n      hostnames: 127.0.0.1:${ptrPort}\n      hostname_interval: 1h\n` : "      neighbour_refresh: 0s\n"}  - tag: main
    type: sequence
    args:
      - { matches: ["client kids", "$ads"], exec: reject 3 }
      - { matches: "client kids", exec: reject 4 }
      - exec: reject 2
  - { tag: udp, type: udp_server, args: { entry: main, listen: "127.0.0.1:0" } }
`;

let ptr: Responder;
/** PATH directories: one without `ip`, one whose `ip` fails. */
const noTool = mkdtempSync(join(tmpdir(), "no-ip-"));
const failingTool = mkdtempSync(join(tmpdir(), "failing-ip-"));
writeFileSync(join(failingTool, "ip"), "#!/bin/sh\necho 'ip: model test failure' >&2\nexit 2\n", { mode: 0o755 });
const running: RunningSluice[] = [];
const refusalsChecked = new Set<string>();
beforeAll(async () => {
  ptr = await startResponder((q) => {
    const reply = replyTo(q);
    const w = new WireWriter();
    w.reset(false);
    w.name("model.lan");
    reply.answers.push({ name: q.questions[0].name, type: 12, class: 1, ttl: 60, data: w.finish() });
    return reply;
  });
});
afterAll(async () => {
  for (const s of running) await s.stop().catch(() => undefined);
  await ptr.close();
  rmSync(noTool, { recursive: true, force: true });
  rmSync(failingTool, { recursive: true, force: true });
});

interface ActorRow {
  id: string;
  state: unknown;
  context: Record<string, unknown>;
}
const ACTOR = "runtime:1/plugin:clients/clients:clients";
const actorRow = async (s: RunningSluice): Promise<ActorRow | undefined> => ((await (await s.api("/api/actors")).json()) as { actors: ActorRow[] }).actors.find((a) => a.id === ACTOR);
const collapse = (xs: string[]): string[] => xs.filter((x, i) => i === 0 || x !== xs[i - 1]);
const send = (s: RunningSluice, method: string, path: string, body?: unknown): Promise<Response> =>
  s.api(`/api/plugins/clients/${path}`, body === undefined ? { method } : { method, headers: { "content-type": "application/json" }, body: JSON.stringify(body) });

/** The request a change event stands for. */
function request(e: Extract<ClientsEvent, { requestId: string }>): [string, string, unknown?] {
  switch (e.type) {
    case "CLIENTS.NAME":
      return ["POST", "clients", e.client];
    case "CLIENTS.UPDATE":
      return ["PUT", `clients/${e.name}`, e.changes];
    case "CLIENTS.REMOVE":
      return ["DELETE", `clients/${e.name}`];
    case "CLIENTS.PAUSE":
      return ["POST", `groups/${e.group}/pause`, { duration: "1h" }];
    case "CLIENTS.RESUME":
      return ["DELETE", `groups/${e.group}/pause`];
    case "CLIENTS.STOP":
      throw new Error("not a request");
  }
}

/** DNS answers and the state file agree with the model's named clients and pauses. */
async function agrees(s: RunningSluice, snap: Snap, written: boolean): Promise<void> {
  const paused = snap.context.pauses.length > 0;
  expect(await rcodeFrom("127.0.0.2", s.udpPort, "ads.test"), "tv asking for an ad").toBe(paused ? 4 : 3);
  const named = snap.context.named[0];
  for (const address of ["127.0.0.31", "127.0.0.32"]) expect(await rcodeFrom(address, s.udpPort), address).toBe(named?.addresses.includes(address) ? 4 : 2);
  if (!written) return;
  const file = JSON.parse(readFileSync(join(s.dir, "clients.state.json"), "utf8")) as { named: { name: string; addresses: string[] }[]; pauses: { group: string }[] };
  expect(file.named.map((c) => [c.name, c.addresses])).toEqual(snap.context.named.map((c) => [c.name, c.addresses]));
  expect(file.pauses.map((p) => p.group)).toEqual(snap.context.pauses.map((p) => p.group));
}

describe("clients:<tag> model", () => {
  const cases = paths.map((events, i) => ({ name: `walk ${i + 1}: ${events.map(describeEvent).join(" → ")}`, events }));

  test("the walks take every transition of the extended shortest paths", () => {
    const taken = new Set(cases.flatMap((c) => transitionsOf(c.events)));
    expect([...cover].filter((k) => !taken.has(k))).toEqual([]);
    // Every walk ends where nothing is under way (its last checks are of a settled actor).
    for (const c of cases) expect(transient(replay(c.events).at(-1) ?? start), c.name).toBe(false);
  });

  test("the generator reaches every state and takes every transition the test can cause", () => {
    const snaps = cases.flatMap((c) => replay(c.events));
    const names = new Set(snaps.map(stateName));
    for (const want of [
      "writer.idle/pauses.none/neighbours.waiting/hostnames.waiting",
      "writer.writing/pauses.none/neighbours.waiting/hostnames.waiting",
      "writer.writing/pauses.timing/neighbours.waiting/hostnames.waiting",
      "writer.idle/pauses.timing/neighbours.waiting/hostnames.waiting",
      "writer.idle/pauses.none/neighbours.reading/hostnames.waiting",
      "writer.idle/pauses.none/neighbours.off/hostnames.waiting",
      "writer.idle/pauses.none/neighbours.waiting/hostnames.resolving",
      "stopping",
      "stopped",
    ]) {
      expect(names, want).toContain(want);
    }
    const edges = new Set(
      cases.flatMap((c) => {
        const steps = replay(c.events);
        return steps.map((s, i) => `${i === 0 ? "loading" : stateName(steps[i - 1])} ${describeEvent(c.events[i])} → ${stateName(s)}`);
      }),
    );
    expect(edges).toContain("writer.idle/pauses.timing/neighbours.waiting/hostnames.waiting pause-ends → writer.writing/pauses.none/neighbours.waiting/hostnames.waiting");
    expect(edges).toContain("writer.idle/pauses.timing/neighbours.waiting/hostnames.waiting resume(kids) → writer.writing/pauses.none/neighbours.waiting/hostnames.waiting");
    expect(edges).toContain("writer.idle/pauses.none/neighbours.reading/hostnames.waiting read:failed → writer.idle/pauses.none/neighbours.waiting/hostnames.waiting");
    expect(edges).toContain("writer.idle/pauses.none/neighbours.waiting/hostnames.waiting stop → stopping");
  });

  test.each(cases)("$name", async ({ events }) => {
    // The provider's clock: a pause's end moves it on by the hour the pause lasted (a later pause counts from then).
    const clockShift = { ms: 0 };
    const s = await startSluice(config(ptr.port, true), {}, { clockShift });
    running.push(s);
    // The start-up ran before the test could listen: the actor's state now is where the bus starts.
    const first = await actorRow(s);
    const observed: string[] = [JSON.stringify(first?.state)];
    s.app.bus.on("actor.transition", (t) => {
      if (t.id === ACTOR) observed.push(JSON.stringify(t.state));
    });
    const actor = concernActor(s.app.actor.system, 1, "clients") as AnyActorRef;
    let [snap] = initialTransition(model, INPUT);
    const expected: string[] = [];
    let written = false;
    let fresh = 40;
    const path = process.env.PATH;
    const seen = async (): Promise<void> => {
      const want = collapse(expected);
      await until(`states ${want.join(" → ")} (saw ${collapse(observed).join(" → ")})`, () => collapse(observed).length >= want.length || undefined, 8000).catch(() => undefined);
      expect(collapse(observed)).toEqual(want);
    };
    try {
      for (const [i, event] of events.entries()) {
        let refusal: Response | null = null;
        switch (event.type) {
          case "CLIENTS.NAME":
          case "CLIENTS.UPDATE":
          case "CLIENTS.REMOVE":
          case "CLIENTS.PAUSE":
          case "CLIENTS.RESUME": {
            const [method, at, body] = request(event);
            const res = await send(s, method, at, body);
            if (!snap.can(event)) refusal = res;
            else expect(res.status, `${method} ${at}: ${JSON.stringify(await res.clone().json())}`).toBe(event.type === "CLIENTS.NAME" ? 201 : 200);
            break;
          }
          case AFTER_STATE:
            // A client not seen before: the write has something new to hold.
            expect(await rcodeFrom(`127.0.0.${fresh++}`, s.udpPort)).toBe(2);
            actor.send(event);
            break;
          case AFTER_HOSTNAMES:
            expect(await rcodeFrom(`127.0.0.${fresh++}`, s.udpPort)).toBe(2);
            actor.send(event);
            break;
          case AFTER_PAUSE:
            clockShift.ms += HOUR;
            actor.send(event);
            break;
          case AFTER_REFRESH: {
            // What the read finds is decided now: the next step is its end.
            const next = events[i + 1];
            if (next === NO_TOOL) process.env.PATH = noTool;
            else if (next === READ_FAILED) process.env.PATH = `${failingTool}:${path ?? ""}`;
            actor.send(event);
            break;
          }
          case "xstate.done.actor.readNeighbours":
          case "xstate.error.actor.readNeighbours":
            await seen();
            process.env.PATH = path;
            break;
          case "xstate.done.actor.resolveHostnames": {
            await until("the PTR name", async () => {
              const list = (await (await send(s, "GET", "clients")).json()) as { seen: { key: string; hostname: string | null }[] };
              return list.seen.find((c) => c.key === `127.0.0.${fresh - 1}`)?.hostname === "model.lan" || undefined;
            });
            break;
          }
          case "CLIENTS.STOP":
            await s.app.stop();
            running.splice(running.indexOf(s), 1);
            break;
          default:
            // The start-up ran before; a write ends by itself.
            break;
        }
        [snap] = transition(model, snap, event as never);
        if (event.type === "xstate.done.actor.persist") written = true;
        expected.push(JSON.stringify(snap.value));
        if (refusal) {
          const guard = refusingGuard(snap, event);
          const refused = GUARD_REFUSALS[guard ?? ""];
          expect(refused, `guard ${guard}`).toBeDefined();
          const body = (await refusal.json()) as { code: string };
          expect([refusal.status, body.code]).toEqual([ERROR_STATUS[refused.code], refused.code]);
          refusalsChecked.add(`${describeEvent(event)} ${refusal.status} ${body.code}`);
        }
        // A change's answer comes after its write: checked with the write's end, the next step.
        const endedAlready = (event.type.startsWith("CLIENTS.") && refusal === null) || event.type === AFTER_STATE || event.type === AFTER_PAUSE || event.type === AFTER_HOSTNAMES;
        if (!endedAlready) await seen();
        if (snap.value !== "stopped" && !transient(snap)) await agrees(s, snap, written);
      }
      if (snap.value === "stopped") {
        // The last write holds everything, the seen clients too.
        const file = JSON.parse(readFileSync(join(s.dir, "clients.state.json"), "utf8")) as { seen: { key: string }[] };
        expect(file.seen.map((c) => c.key)).toContain("tv");
      }
    } finally {
      process.env.PATH = path;
      if (running.includes(s)) {
        await s.stop();
        running.splice(running.indexOf(s), 1);
      } else {
        rmSync(s.dir, { recursive: true, force: true });
      }
    }
  }, 60_000);

  test("every refusal was checked against the API", () => {
    expect([...refusalsChecked].sort()).toEqual([
      "name(n1) 409 client_exists",
      "name(tv) 409 client_exists",
      "pause(nope) 404 group_not_found",
      "remove(n1) 404 client_not_found",
      "remove(tv) 409 client_declared",
      "update(n1) 404 client_not_found",
      "update(tv) 409 client_declared",
    ]);
  });

  test("without neighbour_refresh and hostnames both regions are off from the start", async () => {
    const s = await startSluice(config(ptr.port, false));
    try {
      const off = { ...INPUT, neighbourRefreshMs: 0, hostnameIntervalMs: 0 };
      const [start] = initialTransition(model, off);
      const [loaded] = transition(model, start, { ...LOADED, output: { ...(LOADED as { output: ClientsLoaded }).output, neighbours: null } } as never);
      expect((await actorRow(s))?.state).toEqual(loaded.value);
      expect(stateName(loaded)).toBe("writer.idle/pauses.none/neighbours.off/hostnames.off");
    } finally {
      await s.stop();
    }
  });
});
