// The config machine on its own: one save at a time (saveIdle), results kept per request id.
import { createActor, fromPromise, waitFor } from "xstate";
import { expect, test } from "vitest";
import { configMachine, KEPT_RESULTS, type SaveRequest, type SaveResult } from "../../machines/config.machine.js";

const request = (id: string): SaveRequest => ({ requestId: id, content: "plugins: []\n", baseVersion: null, validate: true });
const saved = (input: SaveRequest): SaveResult => ({
  requestId: input.requestId,
  ok: true,
  path: "/etc/sluice.yaml",
  version: `v-${input.requestId}`,
  updated_at_ms: 1,
  plugin_count: 0,
  init_order: [],
  diagnostics: [],
  diagnostic_details: [],
});

test("a SAVE is refused while another runs, and each result is kept under its request id", async () => {
  const finishers: (() => void)[] = [];
  const actor = createActor(
    configMachine.provide({
      actors: { save: fromPromise<SaveResult, SaveRequest>(({ input }) => new Promise((resolve) => finishers.push(() => resolve(saved(input))))) },
    }),
  ).start();
  const a = { type: "SAVE" as const, request: request("a") };
  expect(actor.getSnapshot().can(a)).toBe(true);
  actor.send(a);
  expect(actor.getSnapshot().value).toBe("saving");
  expect(actor.getSnapshot().context.saving).toBe("a");
  const b = { type: "SAVE" as const, request: request("b") };
  expect(actor.getSnapshot().can(b)).toBe(false);
  actor.send(b); // ignored, not queued
  await new Promise((r) => setTimeout(r, 0));
  expect(finishers).toHaveLength(1);
  finishers[0]();
  const snap = await waitFor(actor, (s) => s.matches("idle"));
  expect(snap.context.saving).toBeNull();
  expect(snap.context.results.map((r) => r.requestId)).toEqual(["a"]);
  expect(snap.can(b)).toBe(true);
});

test("a save that throws becomes a config_save_failed result for that request; results stay bounded", async () => {
  let calls = 0;
  const actor = createActor(
    configMachine.provide({
      actors: {
        save: fromPromise<SaveResult, SaveRequest>(({ input }) => (calls++ === 0 ? Promise.reject(new Error("disk on fire")) : Promise.resolve(saved(input)))),
      },
    }),
  ).start();
  actor.send({ type: "SAVE", request: request("boom") });
  let snap = await waitFor(actor, (s) => s.matches("idle"));
  expect(snap.context.results[0]).toMatchObject({ requestId: "boom", ok: false, status: 500, code: "config_save_failed" });
  expect(String((snap.context.results[0] as { message: string }).message)).toMatch(/disk on fire/);
  for (let i = 0; i < KEPT_RESULTS + 5; i++) {
    actor.send({ type: "SAVE", request: request(`r${i}`) });
    snap = await waitFor(actor, (s) => s.matches("idle") && s.context.results.some((r) => r.requestId === `r${i}`));
  }
  expect(snap.context.results).toHaveLength(KEPT_RESULTS);
  expect(snap.context.results[KEPT_RESULTS - 1].requestId).toBe(`r${KEPT_RESULTS + 4}`);
});
