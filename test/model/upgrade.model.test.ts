// Model-based test of the upgrade task: every transition of machines/upgrade.machine.ts (the
// shortest path to a state, then each event that state can get, from @xstate/graph) is replayed
// against a real Sluice through its API, with a real release host on 127.0.0.1 deciding each task's
// outcome (the same version: skipped; a good artefact: installed; a corrupted one: failed). After
// every step the API's status must equal the machine's, and every apply the machine refuses must be
// refused by the API with the guard's status and code.
// The trial (the new release's first start: trial → confirmed → completed, or rollingBack → failed)
// is walked the same way from an input naming a trial, each path against the real program started
// from an install directory with a pending marker; its start is held on a FIFO until the step that
// decides it (the app serving, its start failing, or the deadline, 300 ms in the marker).
import { join } from "node:path";
import { getAdjacencyMap, getShortestPaths, type AdjacencyMap, type AdjacencyValue } from "@xstate/graph";
import type { SnapshotFrom } from "xstate";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { refusingGuard } from "../../actors/ask.js";
import { upgradeMachine, upgradeRestartRequired, upgradeState, type UpgradeEvent } from "../../machines/upgrade.machine.js";
import { ERROR_STATUS } from "../../src/api/errors.js";
import { GUARD_REFUSALS } from "../../src/api/guards.js";
import { VERSION } from "../../src/version.js";
import { fakeRelease, releasePublicKeyFile } from "../helpers/fake-release.js";
import { releaseOf, signed, startReleaseHost, type ReleaseHost } from "../helpers/release-host.js";
import { makeInstallDir, OLD, pollStatus, post, startTrial, startUpgradable, status, trialInstall } from "../helpers/upgrade.js";
import { HeldFile, until } from "./harness.js";

type ModelEvent =
  | UpgradeEvent
  | { type: "xstate.done.actor.apply" | "xstate.done.actor.confirmTrial"; output: unknown }
  | { type: "xstate.error.actor.apply"; error: unknown }
  | { type: "xstate.after.trialDeadline.upgrade.trial" };
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

/** The marker of the trial paths (test/helpers/upgrade.ts trialInstall), as the machine's input. */
const DEADLINE_MS = 300;
const TRIAL = { from_version: OLD, to_version: VERSION, started_at_ms: 1_700_000_000_000, start_deadline_ms: DEADLINE_MS, deadline_at_ms: 1_700_000_000_000 + DEADLINE_MS };
const HEALTHY: ModelEvent = { type: "TRIAL.HEALTHY" };
/** The model's start error stands for the real one (a rule file that is missing). */
const START_ERROR = "cannot read rule file missing.txt";
const START_FAILED: ModelEvent = { type: "TRIAL.START_FAILED", error: START_ERROR };
const DEADLINE: ModelEvent = { type: "xstate.after.trialDeadline.upgrade.trial" };
const CONFIRMED: ModelEvent = {
  type: "xstate.done.actor.confirmTrial",
  output: { state: "completed", started_at_ms: TRIAL.started_at_ms, completed_at_ms: 2, error: null, installed_version: VERSION },
};
const ROLLED_BACK: ModelEvent = { type: "TRIAL.ROLLED_BACK" };

/** In a trial the app serves, fails or runs out of time, and an operator may ask for an apply; the rest follows by itself. */
function trialEventsFor(s: Snap): ModelEvent[] {
  if (s.value === "trial") return [APPLY, HEALTHY, START_FAILED, DEADLINE];
  if (s.value === "confirmed") return [CONFIRMED];
  if (s.value === "rollingBack") return [ROLLED_BACK];
  return [];
}

const trialOptions = {
  input: { clock: () => TRIAL.started_at_ms, version: VERSION, restored: null, trial: TRIAL },
  events: (s: Snap) => trialEventsFor(s) as never,
  // A rollback after a failed start and one after the deadline are told apart by their error.
  serializeState: (s: Snap) => JSON.stringify([s.value, s.context.error]),
};

interface Step {
  event: ModelEvent;
  snapshot: Snap;
  /** The snapshot before the event, and its state. */
  before: Snap;
  from: string;
}

/** Transition coverage: for every state, its shortest path followed by each event it can get. */
function cases(opts: typeof options | typeof trialOptions = options): { name: string; steps: Step[] }[] {
  const shortest = new Map(getShortestPaths(upgradeMachine, opts).map((p) => [opts.serializeState(p.state), p]));
  const adjacency = getAdjacencyMap(upgradeMachine, opts) as AdjacencyMap<Snap, ModelEvent>;
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
      out.push({ name: steps.map((s) => `${s.event.type.replace("xstate.", "").replace(".actor.apply", "")}→${String(s.snapshot.value)}`).join(" "), steps });
    }
  }
  return out;
}

const all = cases();
const trials = cases(trialOptions);
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

/** A configuration whose start reads `fifo` (held until a step lets it through), then fails on a missing rule file if `failing`. */
function trialYaml(fifo: string, failing: string | null): string {
  const fail = failing ? `  - { tag: h, type: hosts, args: { files: [${failing}] } }\n` : "";
  return `api:\n  http: 127.0.0.1:0
upgrade:\n  release_api: http://127.0.0.1:9\n  repository: test/sluice\n  public_key: ${releasePublicKeyFile()}
plugins:\n  - { tag: held, type: domain_set, args: { files: [${fifo}] } }\n${fail}  - { tag: main, type: sequence, args: [ { matches: "qname $held", exec: reject 3 }${failing ? ", { exec: $h }" : ""} ] }\n`;
}

const escape = (text: string): string => text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
/** The machine's error text as a pattern for the real one: the model's start error stands for the real diagnostic. */
const errorPattern = (text: string): RegExp => new RegExp(escape(text).replace(escape(START_ERROR), ".*missing\\.txt.*"));

describe("upgrade trial model", () => {
  test("the generator covers every trial state and every way out of the trial", () => {
    const states = new Set(trials.flatMap((c) => c.steps.map((s) => String(s.snapshot.value))));
    expect(states).toEqual(new Set(["trial", "confirmed", "completed", "rollingBack", "failed"]));
    const fromTrial = new Set(trials.flatMap((c) => c.steps.filter((s) => s.before.value === "trial").map((s) => s.event.type)));
    expect(fromTrial).toEqual(new Set([APPLY.type, HEALTHY.type, START_FAILED.type, DEADLINE.type]));
    // Both rollbacks are followed to their end.
    expect(trials.filter((c) => c.steps.at(-1)?.event === ROLLED_BACK).length).toBe(2);
  });

  test.each(trials)("$name", async ({ steps }) => {
    const events = new Set(steps.map((s) => s.event));
    let held: HeldFile | null = null;
    const f = trialInstall({ start_deadline_ms: events.has(DEADLINE) ? DEADLINE_MS : 60_000 }, (dir) => {
      held = new HeldFile(join(dir, "rules.fifo"));
      return trialYaml(held.path, events.has(START_FAILED) ? join(dir, "missing.txt") : null);
    });
    const fifo = held as HeldFile | null as HeldFile;
    const run = startTrial(f);
    const api = async (): Promise<string> => `http://127.0.0.1:${(await run.waitForLog((l) => l.msg === "management API listening", 15_000)).port as number}`;
    try {
      for (const step of steps) {
        if (step.event === APPLY) {
          // Refused while the trial decides: the same guard and answer as while a task runs.
          const guard = refusingGuard(step.before, APPLY);
          expect(guard).toBe("upgradeIdle");
          const refusal = GUARD_REFUSALS[guard ?? ""];
          const res = await post(await api(), "/api/upgrade/apply");
          expect(res.status).toBe(ERROR_STATUS[refusal.code]);
          expect(await res.json()).toMatchObject({ ok: false, code: refusal.code, message: refusal.message });
        } else if (step.event === HEALTHY || step.event === START_FAILED) {
          fifo.openAll();
        } else if (step.event === DEADLINE) {
          // The start stays held: only the deadline can end it (the FIFO is let through once it has, so the process can exit).
          await until("the trial's deadline", () => run.stderr().includes("did not reach serving"));
          fifo.openAll();
        }
        const value = step.snapshot.value;
        const c = step.snapshot.context;
        if (value === "rollingBack" || value === "failed") {
          // The switch back and the restart are one turn: the process is gone; its stderr and the install directory tell.
          const { code } = await run.exited;
          expect(code).toBe(75);
          if (value === "rollingBack") expect(run.stderr()).toMatch(errorPattern(`error: ${c.error ?? ""}; switched back to ${OLD}\n`));
          else {
            expect(f.file("result.json")).toMatchObject({ state: "failed", installed_version: c.installed_version, started_at_ms: c.started_at_ms, error: expect.stringMatching(errorPattern(c.error ?? "")) as unknown });
            expect(f.link("current")).toBe(`releases/${c.installed_version}`);
            expect(f.file("pending.json")).toBeNull();
          }
          continue;
        }
        const want = upgradeState(value);
        const base = await api();
        const { last: seen } = await pollStatus(base, (st) => st.state === want);
        expect({ state: seen.state, installed: seen.installed_version, error: seen.error, ok: seen.ok, restart: seen.restart_required, started: seen.started_at_ms }).toEqual({
          state: want,
          installed: c.installed_version,
          error: c.error,
          ok: true,
          restart: upgradeRestartRequired(value),
          started: c.started_at_ms,
        });
        if (value === "trial") expect(f.file("pending.json")).toMatchObject({ attempts: 1 });
        if (value === "completed") {
          expect(f.file("pending.json")).toBeNull();
          expect(f.file("result.json")).toMatchObject({ state: "completed", installed_version: VERSION, from_version: OLD });
          expect((await status(base)).completed_at_ms).not.toBeNull();
        }
        expect(f.link("current")).toBe(`releases/${VERSION}`);
      }
    } finally {
      if (run.child.exitCode === null) run.child.kill("SIGKILL");
      await run.exited;
      await fifo.close();
    }
  });
});
