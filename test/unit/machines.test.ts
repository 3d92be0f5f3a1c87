// The control-plane machines on their own (fake hosts, no sockets): the app's lifecycle and reload
// status, the runtime's plugin ordering, and which named guard refuses what.
import { createActor, fromPromise, setup, waitFor, type AnyActorRef, type AnyMachineSnapshot } from "xstate";
import { reportStarted, reportStartFailed } from "../../machines/concern.js";
import { expect, test } from "vitest";
import { refusingGuard } from "../../actors/ask.js";
import { appMachine, type Prepared, type PrepareInput } from "../../machines/app.machine.js";
import type { CreatedPlugin } from "../../machines/plugin.machine.js";
import { runtimeMachine, type RuntimeHost } from "../../machines/runtime.machine.js";
import { providerMachine } from "../../machines/provider.machine.js";

/** A runtime whose plugins are made and destroyed instantly, recording the order. */
function fakeRuntime(order: string[], log: string[], opts: { failOn?: string; concern?: boolean; quick?: boolean } = {}): RuntimeHost {
  return {
    order,
    createPlugin: (tag): Promise<CreatedPlugin> => {
      log.push(`create ${tag}`);
      if (tag === opts.failOn) return Promise.reject(new Error(`${tag} broke`));
      const concern = opts.concern ? { id: `provider:${tag}`, logic: providerMachine, input: { tag, rules: 1 } } : null;
      const quick = opts.quick ? [{ tag: `qs.exec.${tag}.0.forward`, type: "forward", kind: "executor" }] : [];
      return Promise.resolve({ type: "t", kind: "provider", concern, quick });
    },
    destroyPlugin: (tag) => {
      log.push(`destroy ${tag}`);
      return Promise.resolve();
    },
    start: () => {
      log.push("start");
      return Promise.resolve();
    },
  };
}

const input = { clock: () => 1000, describe: (e: unknown) => (e instanceof Error ? e.message : String(e)) };

/** An app whose every configuration is `order`, except that reload n can be told to fail or hang. */
function fakeApp(order: string[], log: string[], prepare?: (p: PrepareInput) => Promise<Prepared>) {
  return createActor(
    appMachine.provide({
      actors: {
        startApi: fromPromise(() => Promise.resolve()),
        prepare: fromPromise(({ input: p }: { input: PrepareInput }) => (prepare ? prepare(p) : Promise.resolve({ version: `v${p.generation}`, host: fakeRuntime(order, log) }))),
        stopServices: fromPromise(() => Promise.resolve()),
      },
    }),
    { input },
  );
}

test("runtime: plugins are created one at a time in order, servers start last, and retiring destroys them newest first", async () => {
  const log: string[] = [];
  const parent = createActor(appMachine, { input }); // only a parent for sendParent
  const rt = createActor(runtimeMachine, { input: { generation: 1, version: "v", host: fakeRuntime(["a", "b", "c"], log) }, parent: parent }).start();
  await waitFor(rt, (s) => s.matches("active"));
  expect(log).toEqual(["create a", "create b", "create c", "start"]);
  rt.send({ type: "RUNTIME.RETIRE" });
  await waitFor(rt, (s) => s.status === "done");
  expect(log.slice(4)).toEqual(["destroy c", "destroy b", "destroy a"]);
});

test("runtime: a plugin that fails unwinds the ones already made, newest first, and the runtime fails", async () => {
  const log: string[] = [];
  const parent = createActor(appMachine, { input });
  const rt = createActor(runtimeMachine, { input: { generation: 1, version: "v", host: fakeRuntime(["a", "b", "c"], log, { failOn: "c" }) }, parent: parent }).start();
  await waitFor(rt, (s) => s.status === "done");
  expect(rt.getSnapshot().value).toBe("failed");
  expect(rt.getSnapshot().context.error).toBe("c broke");
  expect(log).toEqual(["create a", "create b", "create c", "destroy b", "destroy a"]);
});

test("plugin: a concern actor runs beside a ready plugin and stops when the plugin is destroyed", async () => {
  const log: string[] = [];
  const parent = createActor(appMachine, { input });
  const rt = createActor(runtimeMachine, { input: { generation: 7, version: "v", host: fakeRuntime(["p"], log, { concern: true }) }, parent: parent }).start();
  await waitFor(rt, (s) => s.matches("active"));
  const concern = rt.system.get("runtime:7/plugin:p/provider:p") as AnyActorRef | undefined;
  expect((concern?.getSnapshot() as AnyMachineSnapshot | undefined)?.value).toBe("idle");
  rt.send({ type: "RUNTIME.RETIRE" });
  await waitFor(rt, (s) => s.status === "done");
  expect((concern?.getSnapshot() as AnyMachineSnapshot | undefined)?.status).toBe("stopped");
  expect(rt.system.get("runtime:7/plugin:p/provider:p")).toBeUndefined();
});

test("plugin: each quick-setup instance its create made is a child actor, destroying during the plugin's destroy and stopped after it", async () => {
  const log: string[] = [];
  const host = fakeRuntime(["p"], log, { quick: true });
  let finishDestroy: (() => void) | null = null;
  const held: RuntimeHost = { ...host, destroyPlugin: (tag) => host.destroyPlugin(tag).then(() => new Promise<void>((r) => (finishDestroy = r))) };
  const rt = createActor(runtimeMachine, { input: { generation: 4, version: "v", host: held }, parent: createActor(appMachine, { input }) }).start();
  await waitFor(rt, (s) => s.matches("active"));
  const id = "runtime:4/plugin:p/quick:qs.exec.p.0.forward";
  const quick = rt.system.get(id) as AnyActorRef;
  expect(quick.getSnapshot()).toMatchObject({ value: "ready", context: { tag: "qs.exec.p.0.forward", type: "forward", kind: "executor" } });
  rt.send({ type: "RUNTIME.RETIRE" });
  await waitFor(rt, () => log.includes("destroy p"));
  expect((quick.getSnapshot() as AnyMachineSnapshot).value).toBe("destroying");
  (finishDestroy as unknown as () => void)();
  await waitFor(rt, (s) => s.status === "done");
  expect((quick.getSnapshot() as AnyMachineSnapshot).status).toBe("stopped");
  expect(rt.system.get(id)).toBeUndefined();
});

test("app: starts, serves, reloads on request, and carries out a shutdown asked during a reload once it is done", async () => {
  const log: string[] = [];
  let release: (() => void) | null = null;
  const app = fakeApp(["x"], log, (p) => {
    const prepared = { version: `v${p.generation}`, host: fakeRuntime(["x"], log) };
    return p.initial ? Promise.resolve(prepared) : new Promise((resolve) => (release = () => resolve(prepared)));
  }).start();
  await waitFor(app, (s) => s.matches({ running: "serving" }));
  expect(app.getSnapshot().context).toMatchObject({ current: 1, reload: { status: "idle", running_version: "v1" } });
  app.send({ type: "RELOAD.REQUEST" });
  await waitFor(app, (s) => s.matches({ running: "reloading" }));
  expect(app.getSnapshot().context.reload.status).toBe("in_progress");
  app.send({ type: "SHUTDOWN" });
  expect(app.getSnapshot().matches({ running: "reloading" })).toBe(true);
  (release as unknown as () => void)();
  await waitFor(app, (s) => s.status === "done");
  expect(app.getSnapshot().context.reload).toMatchObject({ status: "ok", running_version: "v2", last_success_ms: 1000 });
  expect(app.getSnapshot().output).toEqual({ restart: false, error: null });
  // Generation 1 was retired by the swap, generation 2 by the shutdown.
  expect(log.filter((l) => l.startsWith("destroy"))).toEqual(["destroy x", "destroy x"]);
});

test("app: a failed reload keeps the running generation and records why; restart ends with restart=true", async () => {
  const log: string[] = [];
  const app = fakeApp(["x"], log, (p) => (p.initial ? Promise.resolve({ version: "v1", host: fakeRuntime(["x"], log) }) : Promise.reject(new Error("bad config")))).start();
  await waitFor(app, (s) => s.matches({ running: "serving" }));
  app.send({ type: "RELOAD.REQUEST" });
  await waitFor(app, (s) => s.context.reload.status === "failed");
  expect(app.getSnapshot().context).toMatchObject({ current: 1, reload: { last_error: "bad config", last_completed_ms: 1000, running_version: "v1" } });
  app.send({ type: "RESTART" });
  await waitFor(app, (s) => s.status === "done");
  expect(app.getSnapshot().output).toEqual({ restart: true, error: null });
});

test("app: a generation that fails to build is refused beside the running one, which keeps serving", async () => {
  const log: string[] = [];
  const app = fakeApp(["x"], log, (p) => Promise.resolve({ version: `v${p.generation}`, host: fakeRuntime(["x", "y"], log, p.initial ? {} : { failOn: "y" }) })).start();
  await waitFor(app, (s) => s.matches({ running: "serving" }));
  app.send({ type: "RELOAD.REQUEST" });
  await waitFor(app, (s) => s.context.reload.status === "failed" && s.context.live.length === 1);
  expect(app.getSnapshot().context).toMatchObject({ current: 1, reload: { last_error: "y broke" } });
});

test("guards: the refusing guard is named for every refused control request", async () => {
  const log: string[] = [];
  const app = fakeApp(["x"], log, (p) => (p.initial ? Promise.resolve({ version: "v1", host: fakeRuntime(["x"], log) }) : new Promise<Prepared>(() => {}))).start();
  const refused = (type: "SHUTDOWN" | "RESTART" | "RELOAD.REQUEST"): string | null => {
    const snap = app.getSnapshot() as unknown as AnyMachineSnapshot;
    return snap.can({ type }) ? null : refusingGuard(snap, { type });
  };
  expect(refused("RELOAD.REQUEST")).toBeNull(); // starting: accepted, runs once serving
  await waitFor(app, (s) => s.matches({ running: "serving" }));
  app.send({ type: "RELOAD.REQUEST" });
  await waitFor(app, (s) => s.matches({ running: "reloading" }));
  expect(refused("RELOAD.REQUEST")).toBe("reloadIdle");
  app.send({ type: "SHUTDOWN" });
  expect(refused("SHUTDOWN")).toBe("noStopRequested");
  expect(refused("RESTART")).toBe("noStopRequested");
  expect(refused("RELOAD.REQUEST")).toBe("notStopping");
});

/** A concern whose start-up work is held until the test settles it. */
function startingConcern() {
  let settle: (ok: boolean) => void = () => undefined;
  const work = new Promise<void>((resolve, reject) => {
    settle = (ok) => (ok ? resolve() : reject(new Error("start-up broke")));
  });
  const logic = setup({
    actors: { startUp: fromPromise(() => work) },
    actions: { reportStarted: reportStarted(), reportStartFailed: reportStartFailed() },
  }).createMachine({
    initial: "starting",
    states: {
      starting: { invoke: { src: "startUp", onDone: { target: "idle", actions: "reportStarted" }, onError: { target: "idle", actions: "reportStartFailed" } } },
      idle: {},
    },
  });
  return { concern: { id: "c", logic, startup: true }, settle: (ok: boolean) => settle(ok) };
}

function runtimeWith(concern: CreatedPlugin["concern"], log: string[]): RuntimeHost {
  const host = fakeRuntime(["a", "b"], log);
  return { ...host, createPlugin: (tag) => host.createPlugin(tag).then((p) => (tag === "a" ? { ...p, concern } : p)) };
}

test("plugin: a concern with start-up holds the plugin (and the next one) until it reports it started", async () => {
  const log: string[] = [];
  const { concern, settle } = startingConcern();
  const rt = createActor(runtimeMachine, { input: { generation: 2, version: "v", host: runtimeWith(concern, log) }, parent: createActor(appMachine, { input }) }).start();
  await waitFor(rt, () => log.includes("create a"));
  await Promise.resolve();
  expect(log).toEqual(["create a"]);
  expect(((rt.system.get("runtime:2/plugin:a") as AnyActorRef).getSnapshot() as AnyMachineSnapshot).value).toBe("starting");
  settle(true);
  await waitFor(rt, (s) => s.matches("active"));
  expect(log).toEqual(["create a", "create b", "start"]);
});

test("plugin: a concern whose start-up fails has its instance destroyed, and the runtime fails", async () => {
  const log: string[] = [];
  const { concern, settle } = startingConcern();
  const rt = createActor(runtimeMachine, { input: { generation: 3, version: "v", host: runtimeWith(concern, log) }, parent: createActor(appMachine, { input }) }).start();
  await waitFor(rt, () => log.includes("create a"));
  settle(false);
  await waitFor(rt, (s) => s.status === "done");
  expect(rt.getSnapshot().value).toBe("failed");
  expect(rt.getSnapshot().context.error).toBe("start-up broke");
  expect(log).toEqual(["create a", "destroy a"]);
});
