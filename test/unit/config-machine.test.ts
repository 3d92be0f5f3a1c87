// The config machine on its own: one save at a time (saveIdle), each answer delivered to its asker.
import { createActor, fromPromise } from "xstate";
import { expect, test } from "vitest";
import { ask, RefusedError } from "../../actors/ask.js";
import { configMachine, type SaveRequest, type SaveResult } from "../../machines/config.machine.js";

const request = (content: string): SaveRequest => ({ content, baseVersion: null, validate: true });
const saved = (input: SaveRequest): SaveResult => ({
  ok: true,
  path: "/etc/sluice.yaml",
  version: `v-${input.content}`,
  updated_at_ms: 1,
  plugin_count: 0,
  init_order: [],
  diagnostics: [],
  diagnostic_details: [],
});

test("a SAVE is refused by saveIdle while another runs; each asker gets its own result", async () => {
  const finishers: (() => void)[] = [];
  const actor = createActor(
    configMachine.provide({
      actors: { save: fromPromise<SaveResult, SaveRequest>(({ input }) => new Promise((resolve) => finishers.push(() => resolve(saved(input))))) },
    }),
  ).start();
  const first = ask(actor, { type: "SAVE", request: request("a") });
  expect(actor.getSnapshot().value).toBe("saving");
  const second = ask(actor, { type: "SAVE", request: request("b") });
  await expect(second).rejects.toBeInstanceOf(RefusedError);
  await expect(second).rejects.toMatchObject({ guard: "saveIdle" });
  await new Promise((r) => setTimeout(r, 0));
  expect(finishers).toHaveLength(1);
  finishers[0]();
  await expect(first).resolves.toMatchObject({ ok: true, version: "v-a" });
  expect(actor.getSnapshot().value).toBe("idle");
  const third = ask(actor, { type: "SAVE", request: request("c") });
  await new Promise((r) => setTimeout(r, 0));
  finishers[1]();
  await expect(third).resolves.toMatchObject({ version: "v-c" });
});

test("a save that throws rejects its asker with the error and the actor is idle again", async () => {
  let calls = 0;
  const actor = createActor(
    configMachine.provide({
      actors: {
        save: fromPromise<SaveResult, SaveRequest>(({ input }) => (calls++ === 0 ? Promise.reject(new Error("disk on fire")) : Promise.resolve(saved(input)))),
      },
    }),
  ).start();
  await expect(ask(actor, { type: "SAVE", request: request("boom") })).rejects.toThrow(/disk on fire/);
  expect(actor.getSnapshot().value).toBe("idle");
  await expect(ask(actor, { type: "SAVE", request: request("ok") })).resolves.toMatchObject({ ok: true });
});
