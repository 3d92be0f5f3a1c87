// Model-based test of a cron plugin's manual queue (machines/cron.machine.ts, with its job actors,
// machines/cron-job.machine.ts): @xstate/graph generates the shortest paths through the two together,
// and each is replayed against a real Sluice through its API. The job actors are children of the
// queue actor, so the model is the live pair: a model state is the events so far, replayed on fresh
// actors (a pure transition would never move the children a guard reads).
//
// Three jobs a, b, c and manual_queue: 1, so one manual run holds the slot, one waits and a third is
// refused. Each job reloads its own domain set, whose rule file is a FIFO (HeldFile): a run lasts
// until the test grants the read (the machine's JOB.RAN), and a cancelled one too, since a provider
// reload does not stop early, which holds the plugin in `stopping`. CRON.STOP is the plugin's destroy:
// it is not reachable through the API during a reload (the routes answer for the new generation by
// then), so it is a shutdown here, whose API keeps answering until the plugin has gone. After every
// step GET jobs/status must show each job's current run and latest manual result as the model does,
// and every manual trigger the model refuses there (each job, and one that does not exist) must be
// answered with its refusing guard's status and code.
import { rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { getShortestPaths } from "@xstate/graph";
import { createActor, fromCallback, fromTransition, type ActorRefFrom, type AnyMachineSnapshot } from "xstate";
import { afterEach, describe, expect, test } from "vitest";
import { refusingGuard } from "../../actors/ask.js";
import { cronJobMachine } from "../../machines/cron-job.machine.js";
import { cronMachine, type CronEvent } from "../../machines/cron.machine.js";
import { ERROR_STATUS } from "../../src/api/errors.js";
import { GUARD_REFUSALS } from "../../src/api/guards.js";
import { startSluice, tempDir, type RunningSluice } from "../helpers/sluice.js";
import { HeldFile, until, withoutPrefixes } from "./harness.js";

const JOBS = ["a", "b", "c"] as const;
type Job = (typeof JOBS)[number];

/** A trigger or the stop the API can cause, or a job's run returning (the test lets its read through). */
type ModelEvent = { type: "CRON.RUN"; job: string } | { type: "CRON.STOP" } | { type: "RAN"; job: Job };

// The runs never return by themselves; the timers never fire (scheduled runs are left to the integration tests).
const model = cronMachine.provide({ actors: { job: cronJobMachine.provide({ actors: { run: fromCallback(() => undefined) } }) } });
const input = { tag: "jobs", clock: () => 0, queueSize: 1, jobs: JOBS.map((job) => ({ job, schedule: "0 3 1 1 *", interval_ms: null, nextRun: () => null })) };
type Cron = ActorRefFrom<typeof model>;

const asked = (e: ModelEvent): CronEvent => ({ ...e, requestId: "r" }) as CronEvent;

/** The live pair after `events`; a refused trigger or stop changes nothing (as the API refuses it). */
function live(events: ModelEvent[]): Cron {
  const cron = createActor(model, { input }).start();
  for (const e of events) {
    const snap = cron.getSnapshot();
    if (e.type === "RAN") snap.context.jobs[e.job].send({ type: "JOB.RAN", output: { status: "completed", executor_error_count: 0 } });
    else if (snap.can(asked(e))) cron.send(asked(e));
  }
  return cron;
}

interface JobView {
  state: string;
  last_run_id: number;
  /** current_run.status in GET jobs/status (null: none). */
  current: string | null;
  last_manual: string | null;
}
interface View {
  events: ModelEvent[];
  value: string;
  manual: string | null;
  queue: string[];
  jobs: Record<Job, JobView>;
}

function viewOf(events: ModelEvent[]): View {
  const cron = live(events);
  const snap = cron.getSnapshot();
  const jobs = Object.fromEntries(
    JOBS.map((j) => {
      const js = snap.context.jobs[j].getSnapshot();
      return [j, { state: String(js.value), last_run_id: js.context.last_run_id, current: js.context.current?.status ?? null, last_manual: js.context.last_manual?.status ?? null }];
    }),
  ) as Record<Job, JobView>;
  const view = { events, value: String(snap.value), manual: snap.context.manual, queue: snap.context.queue, jobs };
  cron.stop();
  return view;
}

function eventsFor(v: View): ModelEvent[] {
  if (v.value === "stopped") return [];
  const ran = JOBS.filter((j) => ["running", "cancelling"].includes(v.jobs[j].state)).map((job): ModelEvent => ({ type: "RAN", job }));
  if (v.value === "stopping") return ran;
  // The jobs are alike: a job is first triggered after the ones before it (a, then b, then c), which
  // keeps the paths that differ only in names out. Every job's trigger is still checked at every step.
  const fresh = JOBS.find((j) => v.jobs[j].last_run_id === 0);
  const triggers = JOBS.filter((j) => v.jobs[j].last_run_id > 0 || j === fresh);
  return [...triggers.map((job): ModelEvent => ({ type: "CRON.RUN", job })), ...ran, { type: "CRON.STOP" }];
}

const logic = fromTransition((v: View, e: ModelEvent) => viewOf([...v.events, e]), viewOf([]));
// The queue, each job's state and whether it has a manual result (so a run the queue started after
// another ended is a state of its own), bounded by stopping after a few events.
const key = (v: View): string => JSON.stringify([v.value, v.manual, v.queue, JOBS.map((j) => [v.jobs[j].state, v.jobs[j].last_manual])]);
const all = getShortestPaths(logic, { events: (s) => eventsFor(s.context), serializeState: (s) => key(s.context), stopWhen: (s) => s.context.events.length >= 5 });
const name = (e: ModelEvent): string => (e.type === "CRON.RUN" ? `run(${e.job})` : e.type === "RAN" ? `ran(${e.job})` : "stop");
const stepsOf = (p: (typeof all)[number]): ModelEvent[] => p.steps.slice(1).map((x) => x.event);
const paths = withoutPrefixes(all, (p) => stepsOf(p).map(name));

/** A Sluice whose three domain sets read FIFOs from the first run on. */
async function start(): Promise<{ s: RunningSluice; held: Record<Job, HeldFile>; dir: string }> {
  const dir = tempDir();
  for (const j of JOBS) writeFileSync(join(dir, `${j}.txt`), "full:start.test\n");
  const s = await startSluice(`api:
  http: 127.0.0.1:0
plugins:
${JOBS.map((j) => `  - { tag: set_${j}, type: domain_set, args: { files: [${join(dir, `${j}.txt`)}] } }`).join("\n")}
  - tag: jobs
    type: cron
    args:
      manual_queue: 1
      jobs:
${JOBS.map((j) => `        - { name: ${j}, schedule: "0 3 1 1 *", executors: ["reload_provider $set_${j}"] }`).join("\n")}
`);
  // Started from plain files; from now on each reload waits for the test.
  const held = Object.fromEntries(
    JOBS.map((j) => {
      rmSync(join(dir, `${j}.txt`));
      return [j, new HeldFile(join(dir, `${j}.txt`))];
    }),
  ) as Record<Job, HeldFile>;
  return { s, held, dir };
}

let current: { s: RunningSluice; held: Record<Job, HeldFile>; dir: string; view: View } | null = null;

afterEach(async () => {
  if (!current) return;
  const { s, held, dir, view } = current;
  current = null;
  // A run still reading is let through, so the shutdown's wait for it ends.
  for (const j of JOBS) if (["running", "cancelling"].includes(view.jobs[j].state)) held[j].grant();
  await s.stop();
  await Promise.all(JOBS.map((j) => held[j].close()));
  rmSync(dir, { recursive: true, force: true });
});

type Status = Record<string, { current_run: { status: string; run_id: number } | null; last_manual_run: { status: string } | null }>;

describe("cron queue model", () => {
  const cases = paths.map((p, i) => {
    const events = stepsOf(p);
    return { name: `#${i} ${events.map(name).join(" → ") || "(initial)"}`, events };
  });

  test("the generator reaches a full queue, every job state and a stop that waits for a run", () => {
    const views = all.map((p) => p.state.context);
    expect(new Set(views.map((v) => v.value))).toEqual(new Set(["active", "stopping", "stopped"]));
    expect(new Set(views.flatMap((v) => JOBS.map((j) => v.jobs[j].state)))).toEqual(new Set(["idle", "pending", "running", "cancelling", "stopped"]));
    expect(views.some((v) => v.value === "active" && v.manual !== null && v.queue.length === 1)).toBe(true);
    expect(views.some((v) => v.value === "stopping" && JOBS.some((j) => v.jobs[j].last_manual === "cancelled"))).toBe(true);
    // The queue starts the waiting run when the one holding the slot ends.
    const dispatched = all.some((p) => {
      const steps = p.steps.map((x) => x.state.context);
      return steps.some((v, i) => i > 0 && v.events.at(-1)?.type === "RAN" && v.value === "active" && JOBS.some((j) => steps[i - 1].jobs[j].state === "pending" && v.jobs[j].state === "running"));
    });
    expect(dispatched).toBe(true);
  });

  test.each(cases)("$name", async ({ events }) => {
    const started = await start();
    const { s, held } = started;
    current = { ...started, view: viewOf([]) };
    const post = (job: string): Promise<Response> => s.api(`/api/plugins/jobs/jobs/${job}/run`, { method: "POST" });
    const finished = (job: string, runId: number, status: string): boolean => s.logs.some((l) => l.msg === "cron run finished" && l.job === job && l.run_id === runId && l.status === status);
    const cancelled = (): number => s.logs.filter((l) => l.msg === "cron run cancelled").length;

    /** GET jobs/status equals the model; every trigger the model refuses is refused with its guard's code. */
    async function check(view: View, cron: AnyMachineSnapshot): Promise<void> {
      const jobs = ((await (await s.api("/api/plugins/jobs/jobs/status")).json()) as { jobs: Status }).jobs;
      for (const j of JOBS) {
        expect({ job: j, current: jobs[j].current_run?.status ?? null, last_manual: jobs[j].last_manual_run?.status ?? null }).toEqual({ job: j, current: view.jobs[j].current, last_manual: view.jobs[j].last_manual });
      }
      for (const job of [...JOBS, "nope"]) {
        const e = asked({ type: "CRON.RUN", job });
        if (cron.can(e)) continue;
        const guard = refusingGuard(cron, e);
        const refusal = GUARD_REFUSALS[guard ?? ""];
        expect(refusal, `guard ${guard} for ${job}`).toBeDefined();
        const res = await post(job);
        expect(res.status, `${job}: ${guard}`).toBe(ERROR_STATUS[refusal.code]);
        expect(await res.json()).toMatchObject({ ok: false, code: refusal.code });
      }
    }

    let before = viewOf([]);
    const initial = live([]);
    await check(before, initial.getSnapshot() as AnyMachineSnapshot);
    initial.stop();
    for (const [i, event] of events.entries()) {
      const after = viewOf(events.slice(0, i + 1));
      switch (event.type) {
        case "CRON.RUN": {
          const res = await post(event.job);
          expect(res.status).toBe(202);
          expect(await res.json()).toEqual({ ok: true, job: event.job, status: "started", trigger: "manual", run_id: after.jobs[event.job as Job].last_run_id });
          break;
        }
        case "RAN": {
          const runId = before.jobs[event.job].last_run_id;
          held[event.job].grant();
          const status = before.jobs[event.job].state === "cancelling" ? "cancelled" : "completed";
          await until(`run ${runId} of ${event.job} to end ${status}`, () => finished(event.job, runId, status));
          break;
        }
        case "CRON.STOP": {
          // Every job with a run (pending or running) logs its cancel when the plugin's destroy stops it.
          const withRun = JOBS.filter((j) => before.jobs[j].current !== null).length;
          const mark = cancelled();
          expect((await s.api("/api/shutdown", { method: "POST" })).status).toBe(202);
          if (withRun > 0) await until("the cron plugin to stop its jobs", () => cancelled() - mark === withRun);
          break;
        }
      }
      current.view = after;
      if (after.value === "stopped") {
        // The plugin has stopped and the process goes: nothing left to ask it.
        await s.app.done;
      } else {
        const cron = live(events.slice(0, i + 1));
        await check(after, cron.getSnapshot() as AnyMachineSnapshot);
        cron.stop();
      }
      before = after;
    }
  });
});
