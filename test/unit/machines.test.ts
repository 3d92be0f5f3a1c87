// The control-plane machines on their own: guards and transitions, no I/O.
import { getShortestPaths } from "@xstate/graph";
import { createActor, fromPromise, waitFor } from "xstate";
import { expect, test } from "vitest";
import { appMachine, ReloadFailure, type ReloadOutcome } from "../../machines/app.machine.js";
import { reloadMachine } from "../../machines/reload.machine.js";
import { runtimeMachine } from "../../machines/runtime.machine.js";

test("reload: a request is refused while one is pending or in progress", () => {
  const a = createActor(reloadMachine).start();
  expect(a.getSnapshot().can({ type: "RELOAD.REQUEST" })).toBe(true);
  a.send({ type: "RELOAD.REQUEST" });
  expect(a.getSnapshot().value).toBe("pending");
  expect(a.getSnapshot().can({ type: "RELOAD.REQUEST" })).toBe(false);
  a.send({ type: "RELOAD.START", at: 10, version: "v2" });
  expect(a.getSnapshot().can({ type: "RELOAD.REQUEST" })).toBe(false);
  a.send({ type: "RELOAD.FAILED", at: 20, error: "boom" });
  expect(a.getSnapshot().value).toBe("failed");
  expect(a.getSnapshot().context).toMatchObject({ last_started_ms: 10, last_completed_ms: 20, last_error: "boom", target_version: "v2" });
  a.send({ type: "RELOAD.REQUEST" });
  expect(a.getSnapshot().context.last_error).toBeNull();
});

test("reload: every state is reachable", () => {
  const paths = getShortestPaths(reloadMachine, {
    events: [
      { type: "RELOAD.REQUEST" },
      { type: "RELOAD.START", at: 1, version: "v" },
      { type: "RELOAD.SUCCEEDED", at: 2, version: "v" },
      { type: "RELOAD.FAILED", at: 2, error: "e" },
    ],
  });
  expect(new Set(paths.map((p) => String(p.state.value)))).toEqual(new Set(["idle", "pending", "in_progress", "ok", "failed"]));
});

test("app: starts, serves, reloads on request, and defers a shutdown asked during a reload", async () => {
  let finishReload: (() => void) | null = null;
  const machine = appMachine.provide({
    actors: {
      startRuntime: fromPromise(() => Promise.resolve({ version: "v1" })),
      reloadRuntime: fromPromise(() => new Promise((resolve) => (finishReload = () => resolve({ at: 5, version: "v2" })))),
    },
  });
  const app = createActor(machine).start();
  await waitFor(app, (s) => s.matches("serving"));
  const reload = app.system.get("reload") as ReturnType<typeof createActor<typeof reloadMachine>>;
  expect(reload.getSnapshot().context.running_version).toBe("v1");
  reload.send({ type: "RELOAD.REQUEST" });
  await waitFor(app, (s) => s.matches("reloading"));
  reload.send({ type: "RELOAD.START", at: 4, version: "v2" });
  app.send({ type: "SHUTDOWN" });
  expect(app.getSnapshot().value).toBe("reloading");
  finishReload!();
  await waitFor(app, (s) => s.status === "done");
  expect(reload.getSnapshot().value).toBe("ok");
  expect(app.getSnapshot().output).toEqual({ restart: false, error: null });
});

test("app: a failed reload reports its reason and time; restart ends with restart=true", async () => {
  const machine = appMachine.provide({
    actors: { reloadRuntime: fromPromise(() => Promise.reject(new ReloadFailure("bad config", 42))) },
  });
  const app = createActor(machine).start();
  await waitFor(app, (s) => s.matches("serving"));
  const reload = app.system.get("reload") as ReturnType<typeof createActor<typeof reloadMachine>>;
  reload.send({ type: "RELOAD.REQUEST" });
  reload.send({ type: "RELOAD.START", at: 41, version: null });
  await waitFor(reload, (s) => s.matches("failed"));
  expect(reload.getSnapshot().context).toMatchObject({ last_error: "bad config", last_completed_ms: 42 });
  app.send({ type: "RESTART" });
  await waitFor(app, (s) => s.status === "done");
  expect(app.getSnapshot().output).toEqual({ restart: true, error: null });
});

test("runtime: plugin children follow their own lifecycle", () => {
  const rt = createActor(runtimeMachine, { input: { generation: 1, version: "v" } }).start();
  rt.send({ type: "PLUGIN.CREATING", tag: "main", type_name: "sequence", kind: "executor" });
  rt.send({ type: "PLUGIN.READY", tag: "main" });
  rt.send({ type: "RUNTIME.ACTIVE" });
  const child = rt.getSnapshot().children["plugin:main"];
  expect(child?.getSnapshot().value).toBe("ready");
  expect(rt.getSnapshot().context.plugins).toBe(1);
});

test("app: a reload can be requested while starting, serving or reloading, never once stopping", async () => {
  const machine = appMachine.provide({
    actors: {
      // Like the real procedure: marks the reload started, then never finishes (the app stays reloading).
      reloadRuntime: fromPromise(({ system }) => {
        (system.get("reload") as ReturnType<typeof createActor<typeof reloadMachine>>).send({ type: "RELOAD.START", at: 1, version: "v" });
        return new Promise<ReloadOutcome>(() => {});
      }),
      stopRuntime: fromPromise(() => new Promise<void>(() => {})),
    },
  });
  const reloading = createActor(machine).start();
  expect(reloading.getSnapshot().can({ type: "RELOAD.REQUEST" })).toBe(true);
  await waitFor(reloading, (s) => s.matches("serving"));
  reloading.send({ type: "RELOAD.REQUEST" });
  await waitFor(reloading, (s) => s.matches("reloading"));
  expect(reloading.getSnapshot().can({ type: "RELOAD.REQUEST" })).toBe(true);

  const stopping = createActor(machine).start();
  await waitFor(stopping, (s) => s.matches("serving"));
  stopping.send({ type: "SHUTDOWN" });
  expect(stopping.getSnapshot().value).toBe("shutting_down");
  expect(stopping.getSnapshot().can({ type: "RELOAD.REQUEST" })).toBe(false);
});
