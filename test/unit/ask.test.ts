// actors/ask.ts: answers reach their asker, refusals name their guard, and an actor that stops
// mid-request rejects the asker instead of leaving it waiting.
import { createActor, fromPromise } from "xstate";
import { expect, test } from "vitest";
import { ActorGoneError, ask, RefusedError } from "../../actors/ask.js";
import { providerMachine, type ProviderReloadOutput } from "../../machines/provider.machine.js";

const slowProvider = () =>
  createActor(providerMachine.provide({ actors: { reload: fromPromise<ProviderReloadOutput>(() => new Promise(() => {})) } }), { input: { tag: "p", rules: 1 } }).start();

test("a second reload while one runs is refused by providerIdle, at once", async () => {
  const actor = slowProvider();
  void ask(actor, { type: "PROVIDER.RELOAD" }).catch(() => {});
  const second = ask(actor, { type: "PROVIDER.RELOAD" });
  await expect(second).rejects.toBeInstanceOf(RefusedError);
  await expect(second).rejects.toMatchObject({ guard: "providerIdle", event: "PROVIDER.RELOAD" });
  actor.stop();
});

test("an actor stopped while a request is pending rejects the asker with ActorGoneError", async () => {
  const actor = slowProvider();
  const pending = ask(actor, { type: "PROVIDER.RELOAD" });
  actor.stop();
  await expect(pending).rejects.toBeInstanceOf(ActorGoneError);
  await expect(ask(actor, { type: "PROVIDER.RELOAD" })).rejects.toBeInstanceOf(ActorGoneError);
});

test("the outcome of the work is the answer: output on success, the error on failure", async () => {
  let n = 0;
  const actor = createActor(
    providerMachine.provide({
      actors: { reload: fromPromise<ProviderReloadOutput>(() => (n++ === 0 ? Promise.resolve({ rules: 5, duration_ms: 1 }) : Promise.reject(new Error("bad line 3")))) },
    }),
    { input: { tag: "p", rules: 1 } },
  ).start();
  await expect(ask(actor, { type: "PROVIDER.RELOAD" })).resolves.toEqual({ rules: 5, duration_ms: 1 });
  await expect(ask(actor, { type: "PROVIDER.RELOAD" })).rejects.toThrow("bad line 3");
  expect(actor.getSnapshot().context).toMatchObject({ reloads: 1, failures: 1, rules: 5, last_error: "bad line 3" });
});
