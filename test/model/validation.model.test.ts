// Model-based test of the configuration validation queue (machines/validation.machine.ts):
// @xstate/graph walks it (validations asked while one runs, up to a full queue; each one ending),
// and each path is replayed against a real Sluice through GET /api/config/check. The configuration
// on disk includes a FIFO (HeldFile) that every validation reads, so a validation runs until the
// step that ends it grants one read. When the model's queue is full, one more check must be refused
// with the guard's code; after every step the validation actor's state, queue length and count of
// finished validations must equal the model's.
import { join } from "node:path";
import { getShortestPaths } from "@xstate/graph";
import type { AnyActorRef, SnapshotFrom } from "xstate";
import { rmSync, writeFileSync } from "node:fs";
import { afterAll, describe, expect, test } from "vitest";
import { refusingGuard } from "../../actors/ask.js";
import { validationMachine, VALIDATION_MAX_WAITING } from "../../machines/validation.machine.js";
import { ERROR_STATUS } from "../../src/api/errors.js";
import { GUARD_REFUSALS } from "../../src/api/guards.js";
import { startSluice, tempDir } from "../helpers/sluice.js";
import { HeldFile, until, withoutPrefixes } from "./harness.js";

type Snap = SnapshotFrom<typeof validationMachine>;
type ModelEvent = { type: string };

const VALIDATE = { type: "VALIDATE", job: null, transfer: [], requestId: "r" };
const DONE = "xstate.done.actor.0.validation.validating";
const model = validationMachine.provide({});
const paths = getShortestPaths(model, {
  input: { maxWaiting: VALIDATION_MAX_WAITING },
  events: (s) => [...(s.can(VALIDATE as never) ? [VALIDATE] : []), ...(s.matches("validating") ? [{ type: DONE, output: { ok: true } }] : [])] as never,
  serializeState: (s) => JSON.stringify([s.value, s.context.queue.length, Math.min(s.context.validations, 2)]),
  stopWhen: (s) => s.context.validations >= 2,
});

const API = 'api:\n  http: "127.0.0.1:0"\n';
const PLUGINS = "plugins:\n  - { tag: main, type: sequence, args: [{ exec: reject 3 }] }\n";

const dir = tempDir("sluice-validation-model-");
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("configuration validation queue model", () => {
  const cases = paths.map((p, i) => {
    const steps: { event: ModelEvent; snap: Snap }[] = p.steps.map((s) => ({ event: s.event, snap: s.state }));
    return { name: `#${i} ${steps.slice(1).map((s) => `${s.event.type === DONE ? "done" : "check"}→${s.snap.context.queue.length}`).join(" ")}`, steps };
  });
  const replayed = withoutPrefixes(cases, (c) => c.steps.map((s) => `${s.event.type} ${JSON.stringify(s.snap.value)} ${s.snap.context.queue.length}`));

  test("the generator fills the queue, is refused when full, and ends validations", () => {
    const full = cases.flatMap((c) => c.steps).filter((s) => s.snap.context.queue.length === VALIDATION_MAX_WAITING + 1);
    expect(full.length).toBeGreaterThan(0);
    expect(refusingGuard(full[0].snap, VALIDATE as never)).toBe("validationQueueHasRoom");
    expect(cases.some((c) => c.steps.some((s) => s.snap.context.validations === 2))).toBe(true);
  });

  test.each(replayed)("$name", async ({ steps }) => {
    const s = await startSluice(`${API}${PLUGINS}`);
    // The file on disk then includes a FIFO that each check reads once (in the validation worker).
    const held = new HeldFile(join(dir, `held-${Math.random().toString(36).slice(2)}.yaml`), "plugins:\n  - { tag: held, type: sequence, args: [{ exec: reject 2 }] }\n");
    writeFileSync(join(s.dir, "sluice.yaml"), `${API}include: [${held.path}]\n${PLUGINS}`);
    const actor = (): AnyActorRef => s.app.actor.system.get("validation") as AnyActorRef;
    const pending: Promise<Response>[] = [];
    try {
      for (let i = 1; i < steps.length; i++) {
        const { event, snap } = steps[i];
        if (event.type === "VALIDATE") {
          pending.push(s.api("/api/config/check"));
        } else {
          held.grant();
          const res = await (pending.shift() as Promise<Response>);
          expect(res.status, await res.clone().text()).toBe(200);
        }
        const want = { state: snap.value, queued: snap.context.queue.length, validations: snap.context.validations };
        await until("the validation actor to match the model", () => {
          const real = actor().getSnapshot() as Snap;
          const now = { state: real.value, queued: real.context.queue.length, validations: real.context.validations };
          return JSON.stringify(now) === JSON.stringify(want) || undefined;
        });
        // A full queue refuses one more validation with the guard's code, never queues it.
        const guard = refusingGuard(snap, VALIDATE);
        if (guard !== null) {
          const refusal = GUARD_REFUSALS[guard];
          const extra = await s.api("/api/config/check");
          expect(extra.status).toBe(ERROR_STATUS[refusal.code]);
          expect(await extra.json()).toMatchObject({ ok: false, code: refusal.code });
        }
      }
    } finally {
      held.openAll();
      await Promise.all(pending.map((p) => p.then((r) => r.arrayBuffer())));
      await held.close();
      await s.stop();
    }
  });
});
