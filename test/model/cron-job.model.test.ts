// Model-based test of one cron job (machines/cron-job.machine.ts): @xstate/graph generates the
// shortest paths through the machine; each is replayed against a real Sluice through its API, with
// a real HTTP file server whose gated paths decide when a run's download ends and how. After every
// step GET jobs/status must show the machine's current run and latest manual result, and every
// manual trigger the machine refuses at that step must be answered with its guard's status and code.
//
// The modelled job `target` runs one download from /gate/target.txt. To hold it in `pending`, a
// manual run of the job `blocker` (another gated download) occupies the plugin's manual slot first;
// releasing the blocker is the machine's JOB.START. JOB.CANCEL is a reload of the configuration; a
// cancelled run's download lets go at once, and its JOB.RAN (in `cancelling`) is its "finished" log.
import { getShortestPaths } from "@xstate/graph";
import { initialTransition, transition, type SnapshotFrom } from "xstate";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { refusingGuard } from "../../actors/ask.js";
import { cronJobMachine, type CronJobEvent, type CronRunReport } from "../../machines/cron-job.machine.js";
import { ERROR_STATUS } from "../../src/api/errors.js";
import { GUARD_REFUSALS } from "../../src/api/guards.js";
import { startFileServer, type FileServer } from "../helpers/file-server.js";
import { startSluice, type RunningSluice } from "../helpers/sluice.js";
import { until } from "./harness.js";

type RunDone = Extract<CronRunReport, { type: "JOB.RAN" }>;
type ModelEvent = CronJobEvent;
type Snap = SnapshotFrom<typeof cronJobMachine>;

// Without a parent actor the machine's reports to the cron actor have nowhere to go.
const model = cronJobMachine.provide({ actions: { reportAccepted: () => {}, reportFinished: () => {} } });
// The timer is left to the integration tests (and test/unit/cron-schedule.test.ts): this one never fires.
const input = { tag: "jobs", job: "target", schedule: "0 3 1 1 *", interval_ms: null, clock: () => 0, nextRun: () => null };

const ENQUEUE: ModelEvent = { type: "JOB.ENQUEUE", requestId: "r" };
const COMPLETED: RunDone = { type: "JOB.RAN", output: { status: "completed", executor_error_count: 0 } };
const FAILED: RunDone = { type: "JOB.RAN", output: { status: "failed", executor_error_count: 1 } };
const CANCELLED: RunDone = { type: "JOB.RAN", output: { status: "cancelled", executor_error_count: 0 } };

/** What an operator or the system can cause in each state (scheduled ticks are left to the integration tests). */
function eventsFor(s: Snap): ModelEvent[] {
  switch (s.value) {
    case "idle":
      return [ENQUEUE, { type: "JOB.CANCEL" }];
    case "pending":
      return [{ type: "JOB.START" }, { type: "JOB.CANCEL" }];
    case "running":
      return [COMPLETED, FAILED, { type: "JOB.CANCEL" }];
    case "cancelling":
      return [CANCELLED];
    default:
      return [];
  }
}

const paths = getShortestPaths(model, {
  input,
  events: (s) => eventsFor(s) as never,
  // A stopped job also says whether a run had started, so a cancel from `running` is a state of its own.
  serializeState: (s) => JSON.stringify([s.value, s.context.last_manual?.status ?? null, s.value === "stopped" && s.context.runs > 0]),
});

/** The path's snapshots, replayed from its events (the graph shares snapshots between paths). */
function replay(events: ModelEvent[]): Snap[] {
  let [snap] = initialTransition(model, input);
  const out: Snap[] = [];
  for (const e of events) {
    [snap] = transition(model, snap, e as never);
    out.push(snap);
  }
  return out;
}

const name = (e: ModelEvent): string => (e.type === "JOB.RAN" ? `ran(${e.output.status})` : e.type.replace("JOB.", ""));

let files: FileServer;
let s: RunningSluice;

beforeAll(async () => {
  files = await startFileServer();
  files.set("target.txt", "target\n");
  files.set("blocker.txt", "blocker\n");
  s = await startSluice(`api:
  http: 127.0.0.1:0
plugins:
  - tag: fetch_target
    type: download
    args: { startup_if_missing: false, downloads: [{ url: "${files.url}/gate/target.txt", dir: out }] }
  - tag: fetch_blocker
    type: download
    args: { startup_if_missing: false, downloads: [{ url: "${files.url}/gate/blocker.txt", dir: out }] }
  - tag: jobs
    type: cron
    args:
      jobs:
        - { name: target, schedule: "0 3 1 1 *", executors: [$fetch_target] }
        - { name: blocker, schedule: "0 3 1 1 *", executors: [$fetch_blocker] }
`);
});
afterAll(async () => {
  await s.stop();
  await files.close();
});

const post = (job: string): Promise<Response> => s.api(`/api/plugins/jobs/jobs/${job}/run`, { method: "POST" });
const targetStatus = async (): Promise<{ current_run: Record<string, unknown> | null; last_manual_run: Record<string, unknown> | null }> =>
  ((await (await s.api("/api/plugins/jobs/jobs/status")).json()) as { jobs: { target: { current_run: Record<string, unknown> | null; last_manual_run: Record<string, unknown> | null } } }).jobs.target;

async function reload(): Promise<void> {
  const since = Date.now();
  expect((await s.api("/api/reload", { method: "POST" })).status).toBe(202);
  for (let i = 0; ; i++) {
    const r = (await (await s.api("/api/reload/status")).json()) as { status: string; last_success_ms: number | null };
    if (r.status === "ok" && (r.last_success_ms ?? 0) >= since) break;
    if (i > 500) throw new Error("the reload did not succeed");
    await new Promise((res) => setTimeout(res, 10));
  }
  // The old runtime's downloads were cancelled and let go of their requests.
  await until("the old runs to let go", () => files.held("target.txt") === 0 && files.held("blocker.txt") === 0);
}

/** The API's view of `target` equals the machine's. */
async function expectView(snap: Snap): Promise<void> {
  const view = await targetStatus();
  const c = snap.context;
  expect(view.current_run === null ? null : { ...view.current_run, started_at_ms: 0 }).toEqual(c.current === null ? null : { ...c.current, started_at_ms: 0 });
  expect(view.last_manual_run === null ? null : { ...view.last_manual_run, completed_at_ms: 0 }).toEqual(c.last_manual === null ? null : { ...c.last_manual, completed_at_ms: 0 });
}

describe("cron job model", () => {
  const cases = paths.map((p, i) => {
    const events = p.steps.slice(1).map((x) => x.event);
    return { name: `#${i} ${events.map(name).join(" → ") || "(initial)"}`, events };
  });

  test("the generator reaches every state, every manual result and a cancel from each state", () => {
    const all = cases.flatMap((c) => replay(c.events));
    expect(new Set(all.map((x) => x.value))).toEqual(new Set(["idle", "pending", "running", "cancelling", "stopped"]));
    expect(new Set(all.map((x) => x.context.last_manual?.status ?? null))).toEqual(new Set([null, "completed", "failed", "cancelled"]));
    const cancelledFrom = new Set(cases.flatMap((c) => c.events.flatMap((e, i) => (e.type === "JOB.CANCEL" ? [String(replay(c.events.slice(0, i)).at(-1)?.value ?? "idle")] : []))));
    expect(cancelledFrom).toEqual(new Set(["idle", "pending", "running"]));
  });

  test.each(cases)("$name", async ({ events }) => {
    // A fresh runtime: its jobs start idle with run ids from 1.
    await reload();
    const mark = s.logs.length;
    let before = initialTransition(model, input)[0];
    await expectView(before);
    const snaps = replay(events);
    for (const [i, event] of events.entries()) {
      const after = snaps[i];
      switch (event.type) {
        case "JOB.ENQUEUE": {
          // The blocker takes the manual slot, so the target waits in `pending`.
          expect((await post("blocker")).status).toBe(202);
          await files.waitHeld("blocker.txt");
          const res = await post("target");
          expect(res.status).toBe(202);
          expect(await res.json()).toEqual({ ok: true, job: "target", status: "started", trigger: "manual", run_id: after.context.last_run_id });
          break;
        }
        case "JOB.START":
          files.release("blocker.txt");
          await files.waitHeld("target.txt");
          break;
        case "JOB.RAN": {
          const runId = before.context.current?.run_id;
          if (before.value === "cancelling") {
            // The old runtime's run ends as cancelled once its download has stopped.
            await until("the cancelled run to end", () => s.logs.slice(mark).some((l) => l.msg === "cron run finished" && l.job === "target" && l.run_id === runId && l.status === "cancelled"));
            break;
          }
          files.release("target.txt", event.output.status === "completed" ? 200 : 503);
          await until("the run to finish", () => s.logs.slice(mark).some((l) => l.msg === "cron run finished" && l.job === "target" && l.run_id === runId));
          break;
        }
        case "JOB.CANCEL": {
          const current = before.context.current;
          await reload();
          if (current) {
            const cancelled = s.logs.slice(mark).find((l) => l.msg === "cron run cancelled" && l.job === "target");
            expect(cancelled).toMatchObject({ run_id: current.run_id, trigger: "manual", was: current.status });
          }
          // The new runtime's job starts fresh.
          await expectView(initialTransition(model, input)[0]);
          break;
        }
        default:
          throw new Error(`no adapter for ${event.type}`);
      }
      // Once cancelled, the job belongs to the old runtime; the API shows the new one (checked above).
      if (after.value !== "stopped" && after.value !== "cancelling") {
        await expectView(after);
        // Where the machine refuses a manual trigger, the API refuses it with the guard's code.
        if (!after.can(ENQUEUE)) {
          const guard = refusingGuard(after, ENQUEUE);
          const refusal = GUARD_REFUSALS[guard ?? ""];
          expect(refusal, `guard ${guard}`).toBeDefined();
          const res = await post("target");
          expect(res.status).toBe(ERROR_STATUS[refusal.code]);
          expect(await res.json()).toMatchObject({ ok: false, code: refusal.code });
        }
      }
      before = after;
    }
  });
});
