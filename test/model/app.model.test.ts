// Model-based test of the application lifecycle and reload status: @xstate/graph generates the
// shortest paths through machines/app.machine.ts; each path that no other continues is replayed
// against the real program (a child process) through its HTTP API, its configuration file and its
// log. After every step the observed app states and reload states must equal the machine's, every
// request the machine refuses at a step that lasts must be refused by the API with the guard's code,
// and after every swap DNS must answer with the new configuration.
import net from "node:net";
import { readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { getShortestPaths } from "@xstate/graph";
import { enqueueActions, type SnapshotFrom } from "xstate";
import { afterAll, describe, expect, test } from "vitest";
import { refusingGuard } from "../../actors/ask.js";
import { appMachine, lifecycleState, type AppEvent, type Prepared } from "../../machines/app.machine.js";
import type { RuntimeHost } from "../../machines/runtime.machine.js";
import { GUARD_REFUSALS } from "../../src/api/guards.js";
import { startCli } from "../helpers/cli.js";
import { query, rcodeOf } from "../helpers/dns.js";
import { tempDir } from "../helpers/sluice.js";
import { collapse, HeldFile, modelConfig, observedStates, statesAtLeast, until, withoutPrefixes } from "./harness.js";

type ModelEvent = AppEvent | { type: `xstate.${"done" | "error"}.actor.${string}`; output?: unknown; error?: unknown };
type Snap = SnapshotFrom<typeof appMachine>;

// The traversal never starts the runtime actors it spawns; their host is never called.
const idleHost: RuntimeHost = { order: [], createPlugin: () => new Promise(() => {}), destroyPlugin: () => Promise.resolve(), start: () => Promise.resolve() };
const done = (id: string, output?: unknown): ModelEvent => ({ type: `xstate.done.actor.${id}`, output });
const fail = (id: string): ModelEvent => ({ type: `xstate.error.actor.${id}`, error: new Error(id) });
const stops: ModelEvent[] = [{ type: "SHUTDOWN" }, { type: "RESTART" }];

/** What an operator or the system can really cause in each state. */
function eventsFor(s: Snap): ModelEvent[] {
  const c = s.context;
  const building = c.building?.generation;
  const gone = c.live.map((g: number): ModelEvent => ({ type: "RUNTIME.GONE", generation: g }));
  switch (lifecycleState(s.value)) {
    case "starting":
      return [done("startApi"), fail("startApi")];
    case "initializing":
      // Reading the initial configuration is instant; requests land while its plugins are built.
      if (building === undefined) return [done("prepare", { version: "v", host: idleHost })];
      return [{ type: "RUNTIME.READY", generation: building }, { type: "RUNTIME.FAILED", generation: building, error: new Error("init") }, ...stops, { type: "RELOAD.REQUEST" }];
    case "serving":
      return [{ type: "RELOAD.REQUEST" }, ...stops];
    case "reloading":
      if (building === undefined) return [done("prepare", { version: "v", host: idleHost }), fail("prepare")];
      return [{ type: "RUNTIME.READY", generation: building }, { type: "RUNTIME.FAILED", generation: building, error: new Error("reload") }, ...stops];
    case "shutting_down":
    case "restarting":
      return JSON.stringify(s.value).includes("closing") ? [done("stopServices")] : gone;
    default:
      return [];
  }
}

/** States that differ only in counters the test cannot see are one state (at most 3 generations apart). */
const serialize = (s: Snap): string =>
  JSON.stringify([
    s.value,
    s.context.reload.status,
    s.context.reload.last_success_ms !== null,
    s.context.shutdownRequested,
    s.context.restartRequested,
    s.context.building !== null,
    Math.min(s.context.generations, 3),
  ]);

// The traversal runs every branch in one actor system, where two branches that each build generation n
// would register systemId runtime:<n> twice; the model spawns its (never started) runtimes by id only.
const modelMachine = appMachine.provide({
  actions: {
    buildGeneration: enqueueActions(({ enqueue, context, event }) => {
      const prepared = (event as unknown as { output: Prepared }).output;
      const generation = context.generations + 1;
      enqueue.assign({ generations: generation, building: { generation, version: prepared.version }, live: [...context.live, generation] });
      enqueue.spawnChild("runtime", { id: `runtime:${generation}`, input: { generation, version: prepared.version, host: prepared.host } });
    }),
  },
});

const paths = getShortestPaths(modelMachine, {
  input: { clock: () => 0, describe: String },
  events: (s) => eventsFor(s) as never,
  serializeState: (s) => serialize(s),
});

interface Step {
  event: ModelEvent;
  state: string;
  reload: string;
  /** Lifecycle state before the event. */
  from: string;
  snapshot: Snap;
}

type ReloadOutcome = "ok" | "invalid" | "broken";

/** What a path needs from the environment, decided before the process starts. */
function scenario(steps: Step[]) {
  const during = (state: string, types: string[]): boolean => steps.some((s) => s.from === state && types.includes(s.event.type));
  // Each reload request's outcome: the first reload-ending step after it.
  const outcomes: ReloadOutcome[] = [];
  steps.forEach((s, i) => {
    if (s.event.type !== "RELOAD.REQUEST") return;
    const end = steps.slice(i + 1).find((x) => x.from === "reloading" && ["xstate.error.actor.prepare", "RUNTIME.READY", "RUNTIME.FAILED"].includes(x.event.type));
    outcomes.push(end?.event.type === "xstate.error.actor.prepare" ? "invalid" : end?.event.type === "RUNTIME.FAILED" ? "broken" : "ok");
  });
  return {
    apiPortTaken: steps.some((s) => s.event.type === "xstate.error.actor.startApi"),
    initFails: steps.some((s) => s.from === "initializing" && s.event.type === "RUNTIME.FAILED"),
    slowInit: during("initializing", ["SHUTDOWN", "RESTART", "RELOAD.REQUEST"]),
    slowReload: during("reloading", ["SHUTDOWN", "RESTART"]) || steps.some((s) => s.state === "reloading" && s.reload === "in_progress"),
    outcomes,
  };
}

const dir = tempDir();
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const replacementPids: number[] = [];
afterAll(() => {
  // Replacements a restart spawned: those whose "restarted" line arrived, and any process still running
  // one of this file's configurations (its line can be lost when a path kills the parent mid-restart).
  for (const pid of [...replacementPids, ...processesMentioning(dir)]) {
    try {
      process.kill(pid, "SIGKILL");
    } catch {
      /* already gone */
    }
  }
});

/** PIDs whose command line mentions `text` (Linux /proc; elsewhere none are found). */
function processesMentioning(text: string): number[] {
  let entries: string[];
  try {
    entries = readdirSync("/proc");
  } catch {
    return [];
  }
  const found: number[] = [];
  for (const e of entries) {
    if (!/^\d+$/.test(e) || Number(e) === process.pid) continue;
    try {
      if (readFileSync(`/proc/${e}/cmdline`, "utf8").includes(text)) found.push(Number(e));
    } catch {
      /* exited meanwhile */
    }
  }
  return found;
}

const shortName = (e: ModelEvent): string => e.type.replace("xstate.", "").replace(".actor", "").replace("RUNTIME.", "");

describe("app lifecycle and reload model", () => {
  const cases = paths.map((p, i) => {
    const steps: Step[] = [];
    let from = "";
    for (const s of p.steps) {
      const snap = s.state;
      const state = snap.status === "done" ? "stopped" : lifecycleState(snap.value);
      steps.push({ event: s.event, state, reload: snap.context.reload.status, from, snapshot: snap });
      from = state;
    }
    return { name: `#${i} ${steps.slice(1).map((s) => `${shortName(s.event)}→${s.state}${s.reload !== "idle" ? `/${s.reload}` : ""}`).join(" ")}`, steps };
  });
  // Each path is checked after every step, so one that another path continues adds nothing: replay the longest.
  const replayed = withoutPrefixes(cases, (c) => c.steps.map((s) => `${JSON.stringify(s.event)} ${s.state} ${s.reload}`));

  test("the generator covers every state and every reload status, and reloads again after ok and failed", () => {
    expect(new Set(cases.flatMap((c) => c.steps.map((s) => s.state)))).toEqual(new Set(["starting", "initializing", "serving", "reloading", "shutting_down", "restarting", "stopped"]));
    expect(new Set(cases.flatMap((c) => c.steps.map((s) => s.reload)))).toEqual(new Set(["idle", "pending", "in_progress", "ok", "failed"]));
    const again = (after: string): boolean => cases.some((c) => c.steps.some((s, i) => s.reload === after && c.steps.slice(i + 1).some((x) => x.reload === "in_progress")));
    expect(again("ok") && again("failed")).toBe(true);
  });

  test.concurrent.each(replayed)("$name", async ({ steps }) => {
    const sc = scenario(steps);
    let blocker: net.Server | null = null;
    let apiListen = "127.0.0.1:0";
    if (sc.apiPortTaken) {
      blocker = net.createServer();
      await new Promise<void>((r) => blocker!.listen(0, "127.0.0.1", () => r()));
      apiListen = `127.0.0.1:${(blocker.address() as net.AddressInfo).port}`;
    }
    const id = Math.random().toString(36).slice(2);
    const file = join(dir, `app-${id}.yaml`);
    // A slow build reads this FIFO and waits until the step that ends it grants the read: requests sent
    // meanwhile land while plugins are being built, however busy the machine is.
    const rules = new HeldFile(join(dir, `rules-${id}.fifo`));
    // Whether each build still to end reads the FIFO, in the order the builds run.
    const builds: boolean[] = [sc.slowInit];
    writeFileSync(file, modelConfig(dir, { apiListen, held: sc.slowInit ? rules.path : null, broken: sc.initFails, answer: 1 }));
    const run = startCli(["-c", file]);
    let apiPort = 0;
    let dnsPort = 0;
    let answer = 1;
    let nextAnswer = 1;
    const api = (path: string, method = "GET"): Promise<Response> => fetch(`http://127.0.0.1:${apiPort}${path}`, { method });
    const apps: string[] = [];
    const reloads: string[] = [];
    let requests = 0;
    let fileOutcome: ReloadOutcome = sc.initFails ? "broken" : "ok";
    let exit: { code: number | null } | null = null;
    void run.exited.then((e) => (exit = e));
    /** Where the model refuses a request at a step that lasts, the API must refuse it with the guard's code. */
    const checkRefusals = async (step: Step): Promise<void> => {
      const lasting = (step.state === "initializing" && sc.slowInit && step.snapshot.context.building !== null) || (step.state === "reloading" && sc.slowReload && step.snapshot.context.building !== null);
      if (!lasting || apiPort === 0) return;
      for (const [type, path] of [["RELOAD.REQUEST", "/api/reload"], ["SHUTDOWN", "/api/shutdown"], ["RESTART", "/api/restart"]] as const) {
        if (step.snapshot.can({ type })) continue;
        const guard = refusingGuard(step.snapshot, { type });
        const res = await api(path, "POST");
        expect(res.status, `${path} refused by ${guard}`).toBe(type === "RELOAD.REQUEST" && guard === "notStopping" ? 503 : 409);
        expect(await res.json()).toMatchObject({ ok: false, code: GUARD_REFUSALS[guard ?? ""]?.code });
      }
    };
    try {
      for (const step of steps) {
        const type = step.event.type;
        if (String(type) === "xstate.init") {
          apps.push(step.state);
          reloads.push(step.reload);
          continue;
        }
        switch (type) {
          case "RUNTIME.GONE":
            break;
          case "xstate.done.actor.startApi":
            apiPort = Number((await run.waitForLog((l) => l.msg === "management API listening")).port);
            break;
          case "xstate.error.actor.startApi":
          case "xstate.done.actor.stopServices":
            await until("the process to exit", () => exit !== null);
            break;
          case "xstate.done.actor.prepare":
            break;
          case "xstate.error.actor.prepare":
            await run.waitForLog((l) => typeof l.msg === "string" && l.msg.startsWith("reload failed"));
            break;
          case "RUNTIME.READY": {
            if (builds.shift()) rules.grant();
            if (step.from === "initializing") {
              await run.waitForLog((l) => l.msg === "sluice started");
              dnsPort = Number((await run.waitForLog((l) => l.msg === "udp server listening")).port);
            } else {
              await until("reload success", () => run.logs.filter((l) => l.msg === "reload succeeded").length >= requests);
              answer = nextAnswer;
            }
            // The generation that just became current answers (unless a stop asked for meanwhile is already under way).
            const c = step.snapshot.context;
            if (!c.shutdownRequested && !c.restartRequested) expect(rcodeOf(await query(dnsPort, "any.example", "A"))).toBe(answer);
            break;
          }
          case "RUNTIME.FAILED":
            if (builds.shift()) rules.grant();
            await run.waitForLog((l) => (step.from === "initializing" ? l.msg === "startup failed" : typeof l.msg === "string" && l.msg.startsWith("reload failed")));
            break;
          case "SHUTDOWN":
          case "RESTART": {
            const res = await api(type === "SHUTDOWN" ? "/api/shutdown" : "/api/restart", "POST");
            expect(res.status).toBe(202);
            if (step.from === "initializing" || step.from === "reloading") {
              // Deferred: the work under way finishes first, and the control record says a stop is coming.
              const control = (await (await api("/api/control")).json()) as { status: string };
              expect(control.status, JSON.stringify(control)).toBe("shutdown_requested");
            }
            break;
          }
          case "RELOAD.REQUEST": {
            const outcome = sc.outcomes[requests++];
            nextAnswer = requests + 1;
            fileOutcome = outcome;
            if (outcome !== "invalid") builds.push(sc.slowReload);
            writeFileSync(file, modelConfig(dir, { apiListen: `127.0.0.1:${apiPort}`, held: sc.slowReload ? rules.path : null, broken: outcome === "broken", invalid: outcome === "invalid", answer: nextAnswer }));
            expect((await api("/api/reload", "POST")).status).toBe(202);
            break;
          }
          default:
            throw new Error(`no adapter for ${type}`);
        }
        apps.push(step.state);
        reloads.push(step.reload);
        const wantApp = collapse(apps);
        expect((await statesAtLeast(run, "app", wantApp)).slice(0, wantApp.length)).toEqual(wantApp);
        // The log shows reload states from the first change on (idle is where every process starts).
        const wantReload = collapse(reloads).filter((s, i) => i > 0 || s !== "idle");
        if (wantReload.length > 0) expect((await statesAtLeast(run, "reload", wantReload)).slice(0, wantReload.length)).toEqual(wantReload);
        await checkRefusals(step);
      }
      const final = steps[steps.length - 1];
      // Whatever builds now (a replacement a restart started) reads the file at once.
      rules.openAll();
      if (final.state === "stopped") {
        expect(exit).not.toBeNull();
        const failed = steps.some((s) => s.event.type === "xstate.error.actor.startApi" || (s.from === "initializing" && s.event.type === "RUNTIME.FAILED"));
        expect(exit!.code, run.stderr()).toBe(failed ? 1 : 0);
        if (steps.some((s) => s.state === "restarting")) {
          await run.waitForLog((l) => l.msg === "restarted: the replacement process is running");
          // The replacement runs the same command line: it starts and serves again, if the file it reads is good.
          if (fileOutcome === "ok") await until("the replacement to start", () => run.logs.filter((l) => l.msg === "sluice started").length >= 2);
          // An invalid file stops the replacement at the configuration check (stderr); a plugin that fails, at startup (log).
          else if (fileOutcome === "invalid") await until("the replacement to refuse the file", () => run.stderr().includes("no_such_type"));
          else await until("the replacement to fail to start", () => run.logs.some((l) => l.msg === "startup failed"));
        }
        // After a restart the replacement logs to the same output; only this process's states are compared.
        expect(observedStates(run, "app").slice(0, collapse(apps).length)).toEqual(collapse(apps));
      }
    } finally {
      rules.openAll();
      blocker?.close();
      if (exit === null) run.child.kill("SIGKILL");
      await run.exited;
      // A path may end while the real process is still restarting: whatever replacement it started is ours to
      // stop. Its "restarted" line was written just before the exit; give the pipe a moment to deliver it
      // (only a path that asked for a restart can have one).
      if (steps.some((s) => s.event.type === "RESTART")) await new Promise((r) => setTimeout(r, 150));
      for (const l of run.logs) if (l.msg === "restarted: the replacement process is running") replacementPids.push(Number(l.pid));
      await rules.close();
    }
  });
});
