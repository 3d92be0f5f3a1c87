// Model-based test of the configuration saves (machines/config.machine.ts): @xstate/graph generates
// the shortest paths (a save accepted, ending saved or refused by validation; a second save while one
// runs), and each is replayed against a real Sluice through PUT /api/config. A save lasts as long as
// the test wants: the saved text includes a FIFO (HeldFile) that validation reads, so `saving` holds
// until the step that ends it writes the included plugins (valid, or not). While a save runs, another
// PUT must be refused with the guard's code; after every step the config actor's state and its count
// of saves must equal the machine's, and the file must hold what the machine says was saved.
import { readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { getShortestPaths } from "@xstate/graph";
import type { SnapshotFrom } from "xstate";
import { afterAll, describe, expect, test } from "vitest";
import { refusingGuard } from "../../actors/ask.js";
import { configMachine } from "../../machines/config.machine.js";
import { ERROR_STATUS } from "../../src/api/errors.js";
import { GUARD_REFUSALS } from "../../src/api/guards.js";
import { startSluice, tempDir, type RunningSluice } from "../helpers/sluice.js";
import { HeldFile, until, withoutPrefixes } from "./harness.js";

type Snap = SnapshotFrom<typeof configMachine>;
type ModelEvent = { type: string; output?: { ok: boolean } };

const DONE = "xstate.done.actor.0.config.saving";
const paths = getShortestPaths(configMachine, {
  events: (s) => (s.value === "idle" ? [{ type: "SAVE", request: { content: "", baseVersion: null, validate: true }, requestId: "r" }] : [{ type: DONE, output: { ok: true } }, { type: DONE, output: { ok: false } }]) as never,
  // The outcome of the save that just ended is part of the state, so both outcomes get a path (and a save after each).
  serializeState: (s, e) => JSON.stringify([s.value, Math.min(s.context.saves, 3), (e as ModelEvent | undefined)?.output?.ok ?? null]),
  stopWhen: (s) => s.context.saves >= 2,
});

const dir = tempDir("sluice-config-model-");
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const API = 'api:\n  http: "127.0.0.1:0"\n';
const PLUGINS_OK = (n: number, prefix = "main"): string => `plugins:\n  - { tag: ${prefix}${n}, type: sequence, args: [{ exec: reject 3 }] }\n`;
const PLUGINS_BAD = "plugins:\n  - { tag: broken, type: no_such_type }\n";

describe("configuration save model", () => {
  const cases = paths.map((p, i) => {
    const steps: { event: ModelEvent; snap: Snap }[] = p.steps.map((s) => ({ event: s.event, snap: s.state }));
    return { name: `#${i} ${steps.slice(1).map((s) => `${s.event.type === DONE ? (s.event.output?.ok ? "saved" : "refused") : s.event.type}→${String(s.snap.value)}`).join(" ")}`, steps };
  });
  const replayed = withoutPrefixes(cases, (c) => c.steps.map((s) => `${JSON.stringify(s.event)} ${String(s.snap.value)}`));

  test("the generator covers both states, both outcomes and a save after one ended", () => {
    const kinds = new Set(cases.flatMap((c) => c.steps.map((s) => (s.event.type === DONE ? `done:${String(s.event.output?.ok)}` : s.event.type))));
    expect([...kinds].sort()).toEqual(["SAVE", "done:false", "done:true", "xstate.init"]);
    expect(cases.some((c) => c.steps.some((s, i) => s.event.type === DONE && c.steps[i + 1]?.event.type === "SAVE"))).toBe(true);
  });

  test.each(replayed)("$name", async ({ steps }) => {
    const s: RunningSluice = await startSluice(`${API}${PLUGINS_OK(0)}`);
    const file = join(s.dir, "sluice.yaml");
    let held: HeldFile | null = null;
    let pending: Promise<Response> | null = null;
    let saved = readFileSync(file, "utf8");
    let text = "";
    try {
      for (let i = 1; i < steps.length; i++) {
        const { event, snap } = steps[i];
        if (event.type === "SAVE") {
          // The included file is a FIFO: validation waits on it until the step that ends the save.
          const ok = steps[i + 1]?.event.output?.ok ?? true;
          held = new HeldFile(join(dir, `include-${Math.random().toString(36).slice(2)}.yaml`), ok ? PLUGINS_OK(i, "included") : PLUGINS_BAD);
          text = `${API}include: [${held.path}]\n${PLUGINS_OK(i)}`;
          pending = s.api("/api/config", { method: "PUT", headers: { "content-type": "application/json" }, body: JSON.stringify({ content: text, validate: true }) });
          await until("the save to run", () => s.app.configActor.getSnapshot().matches("saving") || undefined);
          // A second save while this one runs is refused with the guard's code, never queued.
          const guard = refusingGuard(snap, { type: "SAVE", request: { content: "", baseVersion: null, validate: true }, requestId: "x" } as never);
          expect(guard).toBe("saveIdle");
          const refusal = GUARD_REFUSALS[guard ?? ""];
          const second = await s.api("/api/config", { method: "PUT", headers: { "content-type": "application/json" }, body: JSON.stringify({ content: `${API}${PLUGINS_OK(99)}` }) });
          expect(second.status).toBe(ERROR_STATUS[refusal.code]);
          expect(await second.json()).toMatchObject({ ok: false, code: refusal.code });
        } else {
          held?.grant();
          const res = await (pending as Promise<Response>);
          const body = (await res.json()) as { ok: boolean; code?: string };
          if (event.output?.ok) {
            expect(res.status, JSON.stringify(body)).toBe(200);
            saved = text;
          } else {
            expect(res.status).toBe(400);
            expect(body.code).toBe("config_validate_failed");
          }
          await held?.close();
          held = null;
          pending = null;
        }
        const real = s.app.configActor.getSnapshot();
        expect({ state: real.value, saves: real.context.saves }).toEqual({ state: snap.value, saves: snap.context.saves });
        expect(readFileSync(file, "utf8")).toBe(saved);
      }
      // A path that ends while a save runs: it is let finish before the server stops.
      if (held !== null) {
        held.grant();
        await (pending as Promise<Response>).then((r) => r.arrayBuffer());
      }
    } finally {
      held?.openAll();
      await held?.close();
      await s.stop();
    }
  });
});
