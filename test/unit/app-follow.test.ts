// A replica's follower inside the app's actor system (fake hosts, no sockets): the app actor spawns
// `config-follow` when it begins serving and stops it when it stops, and the follower's reload is
// asked for once no other runs and awaited through the app actor's snapshots (actors/reload-wait.ts).
import { createActor, fromPromise, waitFor, type AnyActorRef, type AnyMachineSnapshot } from "xstate";
import { expect, test } from "vitest";
import { listActors } from "../../actors/inspect.js";
import { reloadWhenIdle } from "../../actors/reload-wait.js";
import { RefusedError } from "../../actors/ask.js";
import { appMachine, type Prepared, type PrepareInput } from "../../machines/app.machine.js";
import { configFollowMachine, type ApplyResult, type Fetched, type FollowInput } from "../../machines/config-follow.machine.js";
import type { RuntimeHost } from "../../machines/runtime.machine.js";

const runtime = (): RuntimeHost => ({
  order: ["x"],
  createPlugin: () => Promise.resolve({ type: "t", kind: "executor", concern: null, quick: [] }),
  destroyPlugin: () => Promise.resolve(),
  start: () => Promise.resolve(),
});

const followInput: FollowInput = { source: "http://primary", interval_ms: 5, clock: () => 1000, version: "v0", applied: true, error: null };

/**
 * An app whose reloads wait for the test to release them (`held` lists the generations waiting), and
 * whose follower (with `followInput`) finds `primary.version` on the primary and saves it at once.
 */
function heldApp(opts: { follow?: boolean; primary?: { version: string } } = {}) {
  const held = new Map<number, () => void>();
  const prepared: number[] = [];
  const prepare = (p: PrepareInput): Promise<Prepared> => {
    prepared.push(p.generation);
    const ready = { version: `v${p.generation}`, host: runtime() };
    return p.initial ? Promise.resolve(ready) : new Promise((resolve) => held.set(p.generation, () => resolve(ready)));
  };
  const primary = opts.primary ?? { version: "v0" };
  const app = createActor(
    appMachine.provide({
      actors: {
        startApi: fromPromise(() => Promise.resolve()),
        prepare: fromPromise(({ input: p }: { input: PrepareInput }) => prepare(p)),
        stopServices: fromPromise(() => Promise.resolve()),
        follow: configFollowMachine.provide({
          actors: {
            fetch: fromPromise((): Promise<Fetched> => Promise.resolve({ version: primary.version, content: "" })),
            apply: fromPromise((): Promise<ApplyResult> => Promise.resolve({ outcome: "applied" })),
            reload: fromPromise(({ system, signal }) => reloadWhenIdle(system.get("app") as never, signal).then(() => undefined)),
          },
        }),
      },
    }),
    { systemId: "app", input: { clock: () => 1000, describe: String, followInput: opts.follow ? followInput : null } },
  );
  return { app, held, prepared, primary };
}

/** Lets the reload of generation `g` finish once it has started (it starts within a few turns of the event loop). */
const release = async (held: Map<number, () => void>, g: number): Promise<void> => {
  for (let i = 0; i < 100 && !held.has(g); i++) await new Promise((r) => setImmediate(r));
  const go = held.get(g);
  if (!go) throw new Error(`reload of generation ${g} never started`);
  held.delete(g);
  go();
};

test("the app actor spawns config-follow when it serves, lists it, and stops it when it stops", async () => {
  const { app } = heldApp({ follow: true });
  app.start();
  await waitFor(app, (s) => s.matches({ running: "serving" }));
  const listed = listActors(app as AnyActorRef).find((a) => a.id === "config-follow");
  expect(listed).toMatchObject({ parent: "app", status: "active", context: { source: "http://primary", version: "v0", applied_version: "v0" } });
  const follower = app.system.get("config-follow") as AnyActorRef;
  app.send({ type: "SHUTDOWN" });
  await waitFor(app, (s) => s.status === "done");
  expect((follower.getSnapshot() as AnyMachineSnapshot).status).toBe("stopped");
  expect(app.system.get("config-follow")).toBeUndefined();
});

test("an app without followInput has no follower", async () => {
  const { app } = heldApp();
  app.start();
  await waitFor(app, (s) => s.matches({ running: "serving" }));
  expect(listActors(app as AnyActorRef).map((a) => a.id)).not.toContain("config-follow");
  app.send({ type: "SHUTDOWN" });
  await waitFor(app, (s) => s.status === "done");
});

test("reloadWhenIdle: a reload already running ends first, then its own is asked for and awaited", async () => {
  const { app, held, prepared } = heldApp();
  app.start();
  await waitFor(app, (s) => s.matches({ running: "serving" }));
  app.send({ type: "RELOAD.REQUEST" });
  let outcome: string | null = null;
  const waiting = reloadWhenIdle(app, new AbortController().signal).then((s) => (outcome = s));
  await release(held, 2);
  await waitFor(app, (s) => s.context.current === 2);
  // The reload that was running may have read the file before the save: a second one follows.
  await release(held, 3);
  await waiting;
  expect(outcome).toBe("ok");
  expect(prepared).toEqual([1, 2, 3]);
  expect(app.getSnapshot().context.current).toBe(3);
  app.send({ type: "SHUTDOWN" });
  await waitFor(app, (s) => s.status === "done");
});

test("reloadWhenIdle: refused while the app stops (the refusing guard named), ended when the asker stops", async () => {
  const { app, held } = heldApp();
  app.start();
  await waitFor(app, (s) => s.matches({ running: "serving" }));
  app.send({ type: "RELOAD.REQUEST" });
  const abort = new AbortController();
  const stopped = reloadWhenIdle(app, abort.signal);
  abort.abort();
  await expect(stopped).rejects.toThrow(/stopped/);
  app.send({ type: "SHUTDOWN" });
  const refused = reloadWhenIdle(app, new AbortController().signal);
  await expect(refused).rejects.toBeInstanceOf(RefusedError);
  await expect(refused).rejects.toMatchObject({ guard: "notStopping" });
  await release(held, 2);
  await waitFor(app, (s) => s.status === "done");
});

test("the follower saves a new version, waits in `reloading` until its reload ends, then polls again", async () => {
  const { app, held, primary } = heldApp({ follow: true });
  app.start();
  await waitFor(app, (s) => s.matches({ running: "serving" }));
  const follower = app.system.get("config-follow") as AnyActorRef;
  const state = (): unknown => (follower.getSnapshot() as AnyMachineSnapshot).value;
  primary.version = "v1";
  await waitFor(follower, () => state() === "reloading");
  await waitFor(app, (s) => s.context.reload.status === "in_progress");
  await new Promise((r) => setImmediate(r));
  expect(state()).toBe("reloading");
  await release(held, 2);
  await waitFor(follower, () => state() === "waiting");
  expect(app.getSnapshot().context).toMatchObject({ current: 2, reload: { status: "ok" } });
  expect((follower.getSnapshot() as AnyMachineSnapshot).context).toMatchObject({ version: "v1", applied_version: "v1", last_error: null });
  app.send({ type: "SHUTDOWN" });
  await waitFor(app, (s) => s.status === "done");
});
