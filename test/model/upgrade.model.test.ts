// Model-based test of the upgrade task: every transition of machines/upgrade.machine.ts (the
// shortest path to a state, then each event that state can get, from @xstate/graph) is replayed
// against a real Sluice through its API, with a real release host on 127.0.0.1 deciding each task's
// outcome (the same version: skipped; a good artefact: installed; a corrupted one: failed). After
// every step the API's status must equal the machine's, and every apply the machine refuses must be
// refused by the API with the guard's status and code.
import { getAdjacencyMap, getShortestPaths, type AdjacencyMap, type AdjacencyValue } from "@xstate/graph";
import type { SnapshotFrom } from "xstate";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { refusingGuard } from "../../actors/ask.js";
import { upgradeMachine, upgradeState, type UpgradeEvent } from "../../machines/upgrade.machine.js";
import { ERROR_STATUS } from "../../src/api/errors.js";
import { GUARD_REFUSALS } from "../../src/api/guards.js";
import { VERSION } from "../../src/version.js";
import { fakeRelease } from "../helpers/fake-release.js";
import { releaseOf, signed, startReleaseHost, type ReleaseHost } from "../helpers/release-host.js";
import { makeInstallDir, pollStatus, post, startUpgradable } from "../helpers/upgrade.js";

type ModelEvent = UpgradeEvent | { type: "xstate.done.actor.apply"; output: unknown } | { type: "xstate.error.actor.apply"; error: unknown };
type Snap = SnapshotFrom<typeof upgradeMachine>;

const APPLY: ModelEvent = { type: "UPGRADE.APPLY", request: {}, installed: true };
const SKIPPED: ModelEvent = { type: "xstate.done.actor.apply", output: { outcome: "skipped", version: VERSION } };
const INSTALLED: ModelEvent = { type: "xstate.done.actor.apply", output: { outcome: "installed", from: VERSION, version: "9.9.9" } };
const FAILED: ModelEvent = { type: "xstate.error.actor.apply", error: new Error("digest mismatch") };

/** What an operator or the task can cause in each state. */
function eventsFor(s: Snap): ModelEvent[] {
  return s.value === "running" ? [APPLY, SKIPPED, INSTALLED, FAILED] : [APPLY];
}

const options = {
  input: { clock: () => 1, version: VERSION, restored: null },
  events: (s: Snap) => eventsFor(s) as never,
  serializeState: (s: Snap) => JSON.stringify(s.value),
};

interface Step {
  event: ModelEvent;
  snapshot: Snap;
  /** The snapshot before the event, and its state. */
  before: Snap;
  from: string;
}

/** Transition coverage: for every state, its shortest path followed by each event it can get. */
function cases(): { name: string; steps: Step[] }[] {
  const shortest = new Map(getShortestPaths(upgradeMachine, options).map((p) => [options.serializeState(p.state), p]));
  const adjacency = getAdjacencyMap(upgradeMachine, options) as AdjacencyMap<Snap, ModelEvent>;
  const out: { name: string; steps: Step[] }[] = [];
  for (const [key, node] of Object.entries(adjacency) as [string, AdjacencyValue<Snap, ModelEvent>][]) {
    const head = shortest.get(key);
    if (!head) continue;
    for (const t of Object.values(node.transitions) as { event: ModelEvent; state: Snap }[]) {
      const raw = [...head.steps.slice(1), { event: t.event, state: t.state }];
      let before = head.steps[0].state;
      const steps = raw.map((s): Step => {
        const step = { event: s.event, snapshot: s.state, before, from: upgradeState(before.value) };
        before = s.state;
        return step;
      });
      out.push({ name: steps.map((s) => `${s.event.type.replace("xstate.", "").replace(".actor.apply", "")}→${upgradeState(s.snapshot.value)}`).join(" "), steps });
    }
  }
  return out;
}

const all = cases();
let host: ReleaseHost;
beforeAll(async () => {
  host = await startReleaseHost();
});
afterAll(() => host.close());

/** The release the host offers decides how the next task ends. */
function offer(outcome: ModelEvent): void {
  const version = outcome === SKIPPED ? VERSION : "9.9.9";
  const a = fakeRelease(version);
  const files = signed({ [a.name]: a.body });
  host.publish(releaseOf(version, host.url, files, outcome === FAILED ? { digestOf: { [a.name]: Buffer.from("tampered") } } : {}), files);
}

describe("upgrade task model", () => {
  test("the generator covers every state and every transition out of running", () => {
    const states = new Set(all.flatMap((c) => c.steps.map((s) => upgradeState(s.snapshot.value))));
    expect(states).toEqual(new Set(["running", "restarting", "skipped", "failed"]));
    const fromRunning = new Set(all.flatMap((c) => c.steps.filter((s) => s.from === "running").map((s) => `${s.event.type}:${upgradeState(s.snapshot.value)}`)));
    expect(fromRunning.size).toBe(4);
    // Apply again after each end state, and a refused apply while running and while restarting.
    for (const after of ["skipped", "failed"]) expect(all.some((c) => c.steps.some((s) => s.from === after && s.event === APPLY))).toBe(true);
    for (const busy of ["running", "restarting"]) expect(all.some((c) => c.steps.some((s) => s.from === busy && s.event === APPLY))).toBe(true);
  });

  test.each(all)("$name", async ({ steps }) => {
    const inst = makeInstallDir(VERSION);
    const s = await startUpgradable({ releaseApi: host.api, installDir: inst.dir });
    const actor = s.app.upgradeActor;
    let open: (() => void) | null = null;
    try {
      for (const [i, step] of steps.entries()) {
        if (step.event === APPLY && step.before.can(APPLY)) {
          // The task waits at the release host until the step that ends it.
          const end = steps.slice(i + 1).find((x) => x.from === "running" && x.event !== APPLY)?.event ?? SKIPPED;
          offer(end);
          open = host.hold();
          const res = await post(s.apiUrl, "/api/upgrade/apply");
          expect(res.status).toBe(202);
        } else if (step.event === APPLY) {
          const guard = refusingGuard(step.before, APPLY);
          expect(guard).toBe("upgradeIdle");
          const refusal = GUARD_REFUSALS[guard ?? ""];
          if (step.from === "running") {
            const res = await post(s.apiUrl, "/api/upgrade/apply");
            expect(res.status).toBe(ERROR_STATUS[refusal.code]);
            expect(await res.json()).toMatchObject({ ok: false, code: refusal.code, message: refusal.message });
          } else {
            // Restarting: by this step the app has stopped (the API went with it); the actor itself refuses.
            expect(actor.getSnapshot().can(APPLY)).toBe(false);
          }
        } else {
          open?.();
          open = null;
        }
        const want = upgradeState(step.snapshot.value);
        if (want === "restarting") {
          await s.app.done;
          const real = actor.getSnapshot();
          expect(upgradeState(real.value)).toBe("restarting");
          expect(real.context.installed_version).toBe(step.snapshot.context.installed_version);
          expect(inst.current()).toBe("releases/9.9.9");
          continue;
        }
        const { last: seen } = await pollStatus(s.apiUrl, (st) => st.state === want);
        const c = step.snapshot.context;
        expect({ installed: seen.installed_version, failed: seen.error !== null, ok: seen.ok, restart: seen.restart_required, done: seen.completed_at_ms !== null }).toEqual({
          installed: c.installed_version,
          failed: c.error !== null,
          ok: want !== "failed",
          restart: false,
          done: c.completed_at_ms !== null,
        });
        expect(inst.current()).toBe(`releases/${VERSION}`);
      }
    } finally {
      open?.();
      await s.stop();
    }
  });
});
