// The primary's view of one data-plane worker (machines/worker.machine.ts) with a fake process actor
// and xstate's SimulatedClock: restart delays, stopping, a kill past the stop timeout.

import { createActor, fromCallback, SimulatedClock } from "xstate";
import { expect, test } from "vitest";
import { RESTART_MAX_MS, RESTART_MIN_MS, STABLE_MS, STOP_TIMEOUT_MS, workerMachine, workerState, type WorkerProcessCommand } from "../../machines/worker.machine.js";

function fakeWorker() {
  const clock = new SimulatedClock();
  const commands: string[] = [];
  let forks = 0;
  const logic = workerMachine.provide({
    actors: {
      process: fromCallback<WorkerProcessCommand, { index: number }>(({ receive }) => {
        forks++;
        receive((c) => commands.push(c.type));
      }),
    },
  });
  const actor = createActor(logic, { clock, input: { index: 1, clock: () => clock.now() } });
  actor.start();
  return { actor, clock, commands, forks: () => forks, state: () => workerState(actor.getSnapshot().value) };
}

test("a worker that ends is started again after a delay that doubles while it keeps ending quickly", () => {
  const w = fakeWorker();
  expect([w.state(), w.forks()]).toEqual(["starting", 1]);
  w.actor.send({ type: "WORKER.READY", pid: 100 });
  expect(w.state()).toBe("running");
  expect(w.actor.getSnapshot().context.pid).toBe(100);
  const delays: number[] = [];
  for (let i = 0; i < 9; i++) {
    w.actor.send({ type: "WORKER.EXITED", code: null, signal: "SIGKILL" });
    expect(w.state()).toBe("waiting");
    const delay = w.actor.getSnapshot().context.delay_ms;
    delays.push(delay);
    w.clock.increment(delay - 1);
    expect(w.state()).toBe("waiting");
    w.clock.increment(1);
    expect(w.state()).toBe("starting");
  }
  expect(delays).toEqual([RESTART_MIN_MS, 1000, 2000, 4000, 8000, 16000, RESTART_MAX_MS, RESTART_MAX_MS, RESTART_MAX_MS]);
  expect(w.actor.getSnapshot().context.restarts).toBe(9);
  expect(w.forks()).toBe(10);
  // One that ran long enough starts again after the minimum.
  w.actor.send({ type: "WORKER.READY", pid: 101 });
  w.clock.increment(STABLE_MS);
  w.actor.send({ type: "WORKER.EXITED", code: 1, signal: null });
  expect(w.actor.getSnapshot().context).toMatchObject({ delay_ms: RESTART_MIN_MS, last_exit: { code: 1, signal: null } });
});

test("a failed start keeps what the worker said; STOP while waiting ends at once", () => {
  const w = fakeWorker();
  w.actor.send({ type: "WORKER.FAILED", error: "plugin 'udp' failed to initialize: EACCES" });
  w.actor.send({ type: "WORKER.EXITED", code: 1, signal: null });
  expect(w.state()).toBe("waiting");
  expect(w.actor.getSnapshot().context.last_error).toContain("EACCES");
  w.actor.send({ type: "STOP" });
  expect(w.actor.getSnapshot().status).toBe("done");
  expect(w.forks()).toBe(1);
});

test("STOP asks the worker to drain; it is killed only past the stop timeout, and not started again", () => {
  const w = fakeWorker();
  w.actor.send({ type: "WORKER.READY", pid: 7 });
  w.actor.send({ type: "STOP" });
  expect([w.state(), w.commands]).toEqual(["stopping", ["STOP"]]);
  w.actor.send({ type: "STOP" });
  expect(w.commands).toEqual(["STOP"]);
  w.clock.increment(STOP_TIMEOUT_MS - 1);
  expect(w.commands).toEqual(["STOP"]);
  w.clock.increment(1);
  expect(w.commands).toEqual(["STOP", "KILL"]);
  w.actor.send({ type: "WORKER.EXITED", code: null, signal: "SIGKILL" });
  expect(w.actor.getSnapshot().status).toBe("done");
  w.clock.increment(RESTART_MAX_MS);
  expect(w.forks()).toBe(1);
});
