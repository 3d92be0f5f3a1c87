// Model-based test of a data-plane worker slot (machines/worker.machine.ts): @xstate/graph's shortest
// paths through the machine, bounded at one restart, each replayed against a real primary started with
// `workers: 2` (the program from dist/, as an operator runs it). Slot 1 is driven: WORKER.READY is the
// worker serving, WORKER.EXITED in `running` a SIGKILL to its process, the restart delay the primary's
// own (the first is RESTART_MIN_MS, half a second), STOP a SIGTERM to the primary (every slot drains),
// WORKER.EXITED in `stopping` the drained worker's exit. After every step the primary's /api/actors
// must show the slot in the machine's state with its counters, and DNS must answer while the primary
// serves; a path that ends stopped must see the worker's app stop and the primary exit 0. Events the
// real program cannot be made to produce on demand (a start that fails, a kill before the worker has a
// pid, a stop that takes longer than 15 s) are the unit test's (test/unit/worker-machine.test.ts).

import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { getShortestPaths } from "@xstate/graph";
import type { SnapshotFrom } from "xstate";
import { afterAll, describe, expect, test } from "vitest";
import { workerMachine, workerState, type WorkerEvent } from "../../machines/worker.machine.js";
import { startCli, type RunningCli } from "../helpers/cli.js";
import { query, rcodeOf } from "../helpers/dns.js";
import { tempDir } from "../helpers/sluice.js";
import { withoutPrefixes } from "./harness.js";

type Snap = SnapshotFrom<typeof workerMachine>;
const AFTER = "xstate.after.restartDelay.worker.waiting";
type ModelEvent = WorkerEvent | { type: typeof AFTER };

const shown = (s: Snap): string => (s.status === "done" ? "stopped" : workerState(s.value));

const all = withoutPrefixes(
  getShortestPaths(workerMachine, {
    input: { index: 1, clock: () => 0 },
    events: (s) => {
      const state = shown(s);
      const out: ModelEvent[] =
        state === "starting"
          ? [{ type: "WORKER.READY", pid: 1 }]
          : state === "running"
            ? [{ type: "WORKER.EXITED", code: null, signal: "SIGKILL" }, { type: "STOP" }]
            : state === "waiting"
              ? [{ type: AFTER }, { type: "STOP" }]
              : state === "stopping"
                ? [{ type: "WORKER.EXITED", code: 0, signal: null }]
                : [];
      return out as never;
    },
    serializeState: (s) => JSON.stringify([s.status, s.value, s.context.restarts]),
    stopWhen: (s) => s.context.restarts > 1,
  }),
  (p) => p.steps.map((st) => `${st.event.type} → ${shown(st.state)}/${(st.state).context.restarts}`),
);

/** A transition: the state it leaves and its event. */
const transitions = (p: (typeof all)[number]): string[] =>
  p.steps.slice(1).map((st, i) => `${shown(p.steps[i].state)} ${st.event.type}`);

/** Every transition once: the longest paths first, then any that takes a transition none of those took (each path starts a process). */
const paths = [...all]
  .sort((a, b) => b.steps.length - a.steps.length)
  .filter(function takesNew(this: Set<string>, p) {
    const fresh = transitions(p).filter((t) => !this.has(t));
    for (const t of fresh) this.add(t);
    return fresh.length > 0;
  }, new Set<string>());

test("the chosen paths take every transition the model has", () => {
  expect(new Set(paths.flatMap(transitions))).toEqual(new Set(all.flatMap(transitions)));
  expect(paths.length).toBeLessThan(all.length);
});

interface SlotView {
  state: string;
  pid: number | null;
  restarts: number;
}

const runs: RunningCli[] = [];
afterAll(() => {
  for (const r of runs) if (r.child.exitCode === null) r.child.kill("SIGKILL");
});

async function startPrimary(): Promise<{ run: RunningCli; api: string; udp: number }> {
  const dir = tempDir();
  writeFileSync(
    join(dir, "sluice.yaml"),
    `workers: 2
api: { http: { listen: 127.0.0.1:0 } }
plugins:
  - { tag: main, type: sequence, args: [{ exec: black_hole 192.0.2.7 }] }
  - { tag: udp, type: udp_server, args: { entry: main, listen: 127.0.0.1:0 } }
`,
  );
  const run = startCli(["-c", "sluice.yaml", "-d", dir]);
  runs.push(run);
  const apiLine = await run.waitForLog((l) => l.msg === "management API listening", 20_000);
  // Both workers serve before slot 1 is touched: with `:0`, the shared socket (and its port) lives while one worker holds it.
  await run.waitForLog((l) => l.msg === "data-plane workers started", 30_000);
  const udpLine = await run.waitForLog((l) => l.msg === "udp server listening");
  return { run, api: `http://127.0.0.1:${String(apiLine.port)}`, udp: Number(udpLine.port) };
}

async function slot(api: string): Promise<SlotView | undefined> {
  const res = await fetch(`${api}/api/actors`).catch(() => null);
  if (!res?.ok) return undefined;
  const actors = ((await res.json()) as { actors: { id: string; state: unknown; context: { pid: number | null; restarts: number } }[] }).actors;
  const a = actors.find((x) => x.id === "worker:1");
  return a ? { state: workerState(a.state), pid: a.context.pid, restarts: a.context.restarts } : undefined;
}

describe.concurrent("data-plane worker slot model", () => {
  test.each(paths.map((p) => [p.steps.map((s) => s.event.type.replace("xstate.after.restartDelay.worker.waiting", "after(restartDelay)")).join(" → "), p] as const))("%s", async (_name, path) => {
    const { run, api, udp } = await startPrimary();
    let pid: number | null = null;
    let stopped = false;
    /** The slot's state before the STOP: a slot stopped while waiting has no process to drain. */
    let before = "starting";
    let stoppedAt = 0;
    for (const step of path.steps) {
      const want = step.state;
      const event = step.event as ModelEvent | { type: "xstate.init" };
      const state = shown(want);
      // The start: the primary serves its API once its workers serve (checked by the next step).
      if (event.type === "xstate.init") continue;
      if (event.type === "WORKER.EXITED" && !stopped) process.kill(pid as number, "SIGKILL");
      if (event.type === "STOP") {
        stopped = true;
        run.child.kill("SIGTERM");
      }
      if (stopped) {
        // The API goes with the primary: what the slot did is in the log and the exit.
        if (state === "stopped") {
          expect((await run.exited).code).toBe(0);
          const drained = run.logs.some((l) => l.worker === 1 && l.pid === undefined && l.msg === "state changed" && l.actor === "app" && l.state === "stopped" && Number(l.time) > stoppedAt);
          // A slot stopped while waiting has no process to drain; otherwise its worker stopped its app.
          expect(drained).toBe(before !== "waiting");
        } else before = before === "stopping" ? before : "stopping";
        continue;
      }
      before = state;
      stoppedAt = Date.now() - 1;
      const view = await (async () => {
        const deadline = Date.now() + 15_000;
        for (;;) {
          const v = await slot(api);
          if (v && v.state === state && v.restarts === want.context.restarts) return v;
          if (Date.now() > deadline) throw new Error(`worker:1 never showed ${state} with ${want.context.restarts} restart(s); last ${JSON.stringify(v)}`);
          await new Promise((r) => setTimeout(r, 20));
        }
      })();
      if (state === "running") {
        expect(view.pid).not.toBe(pid);
        pid = view.pid;
      }
      // Whatever the slot's state, the other worker answers.
      const answer = await query(udp, "a.test", "A").catch((err: unknown) => {
        throw new Error(`after ${event.type} (worker:1 ${state}): ${String(err)}\n${run.logs.slice(-12).map((l) => JSON.stringify(l)).join("\n")}`);
      });
      expect(rcodeOf(answer)).toBe(0);
    }
  });
});
