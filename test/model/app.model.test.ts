// Model-based test of the application lifecycle: @xstate/graph generates the shortest paths through
// machines/app.machine.ts; each path is replayed against the real program (a child process) through
// its HTTP API and its log, and after every step the app's observed state sequence must equal the
// machine's. Events are limited, per state, to what an operator or the system can really cause.
import net from "node:net";
import { readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { getShortestPaths } from "@xstate/graph";
import { afterAll, describe, expect, test } from "vitest";
import { appMachine, type AppEvent } from "../../machines/app.machine.js";
import { startCli } from "../helpers/cli.js";
import { tempDir } from "../helpers/sluice.js";
import { collapse, modelConfig, observedStates, statesAtLeast, until, writeSlowRules } from "./harness.js";

type ModelEvent = AppEvent | { type: `xstate.${"done" | "error"}.actor.${string}`; output?: unknown; error?: unknown };
const done = (id: string, output?: unknown): ModelEvent => ({ type: `xstate.done.actor.${id}`, output });
const fail = (id: string): ModelEvent => ({ type: `xstate.error.actor.${id}`, error: new Error(id) });

function eventsFor(state: string): ModelEvent[] {
  switch (state) {
    case "starting":
      return [done("startApi"), fail("startApi")];
    case "initializing":
      return [done("startRuntime", { version: "v" }), fail("startRuntime"), { type: "SHUTDOWN" }, { type: "RESTART" }];
    case "serving":
      return [{ type: "RELOAD.PENDING" }, { type: "SHUTDOWN" }, { type: "RESTART" }];
    case "reloading":
      return [done("reloadRuntime", { at: 1, version: "v" }), fail("reloadRuntime"), { type: "SHUTDOWN" }, { type: "RESTART" }];
    case "shutting_down":
    case "restarting":
      return [done("stopRuntime")];
    default:
      return [];
  }
}

const paths = getShortestPaths(appMachine, { events: (s) => eventsFor(String(s.value)) as never });

interface Step {
  event: string;
  state: string;
  /** state before the event */
  from: string;
}

/** What a path needs from the environment, decided before the process starts. */
function scenario(steps: Step[]) {
  const stopDuring = (state: string): boolean => steps.some((s) => s.from === state && (s.event === "SHUTDOWN" || s.event === "RESTART"));
  return {
    apiPortTaken: steps.some((s) => s.event === "xstate.error.actor.startApi"),
    initFails: steps.some((s) => s.event === "xstate.error.actor.startRuntime"),
    slowInit: stopDuring("initializing"),
    slowReload: stopDuring("reloading"),
    reloadOutcomes: steps.filter((s) => s.event.endsWith("actor.reloadRuntime")).map((s) => (s.event.startsWith("xstate.done") ? "ok" : "fail")),
  };
}

const dir = tempDir();
// Long enough that a stop request sent when the API is up lands while plugins are still being built.
writeSlowRules(dir, 500_000);
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

describe("app lifecycle model", () => {
  test("the generator covers every state of the machine", () => {
    const reached = new Set(paths.map((p) => String(p.state.value)));
    expect(reached).toEqual(new Set(["starting", "initializing", "serving", "reloading", "shutting_down", "restarting", "stopped"]));
  });

  const cases = paths
    .map((p) => {
      const steps: Step[] = [];
      let from = "";
      for (const s of p.steps) {
        steps.push({ event: s.event.type, state: String(s.state.value), from });
        from = String(s.state.value);
      }
      return steps;
    })
    // The machine must reach a final state for the process to be cleaned up by the path itself; paths that stop
    // in the middle are still replayed, and the process is shut down afterwards.
    .map((steps, i) => ({ name: `#${i} ` + steps.map((s) => `${s.event.replace("xstate.", "").replace(".actor", "")}→${s.state}`).join(" "), steps }));

  test.each(cases)("$name", async ({ steps }) => {
    const sc = scenario(steps);
    let blocker: net.Server | null = null;
    let apiListen = "127.0.0.1:0";
    if (sc.apiPortTaken) {
      blocker = net.createServer();
      await new Promise<void>((r) => blocker!.listen(0, "127.0.0.1", () => r()));
      apiListen = `127.0.0.1:${(blocker.address() as net.AddressInfo).port}`;
    }
    const file = join(dir, `app-${Math.random().toString(36).slice(2)}.yaml`);
    writeFileSync(file, modelConfig(dir, { apiListen, slow: sc.slowInit, broken: sc.initFails, answer: 1 }));
    const run = startCli(["-c", file]);
    let apiPort = 0;
    const api = (path: string, method = "GET"): Promise<Response> => fetch(`http://127.0.0.1:${apiPort}${path}`, { method });
    const expected: string[] = [];
    let reloads = 0;
    let exit: { code: number | null } | null = null;
    void run.exited.then((e) => (exit = e));
    try {
      for (const step of steps) {
        switch (step.event) {
          case "xstate.init":
            break;
          case "xstate.done.actor.startApi":
            apiPort = Number((await run.waitForLog((l) => l.msg === "management API listening")).port);
            break;
          case "xstate.error.actor.startApi":
          case "xstate.done.actor.stopRuntime":
            await until("the process to exit", () => exit !== null);
            break;
          case "xstate.done.actor.startRuntime":
            await run.waitForLog((l) => l.msg === "sluice started");
            break;
          case "xstate.error.actor.startRuntime":
            await run.waitForLog((l) => l.msg === "startup failed");
            break;
          case "SHUTDOWN":
          case "RESTART": {
            const res = await api(step.event === "SHUTDOWN" ? "/api/shutdown" : "/api/restart", "POST");
            expect(res.status).toBe(202);
            if (step.from === "initializing" || step.from === "reloading") {
              // Deferred: the work under way finishes first, and the control record says a stop is coming.
              const control = (await (await api("/api/control")).json()) as { status: string };
              expect(control.status, JSON.stringify(control)).toBe("shutdown_requested");
            }
            break;
          }
          case "RELOAD.PENDING": {
            const outcome = sc.reloadOutcomes[reloads++];
            writeFileSync(file, modelConfig(dir, { apiListen: `127.0.0.1:${apiPort}`, slow: sc.slowReload, broken: outcome === "fail", answer: 2 }));
            expect((await api("/api/reload", "POST")).status).toBe(202);
            break;
          }
          case "xstate.done.actor.reloadRuntime":
            await run.waitForLog((l) => l.msg === "reload succeeded");
            break;
          case "xstate.error.actor.reloadRuntime":
            await run.waitForLog((l) => typeof l.msg === "string" && l.msg.startsWith("reload failed"));
            break;
          default:
            throw new Error(`no adapter for ${step.event}`);
        }
        expected.push(step.state);
        const want = collapse(expected);
        expect((await statesAtLeast(run, "app", want)).slice(0, want.length)).toEqual(want);
      }
      const final = steps[steps.length - 1];
      if (final.state === "stopped") {
        expect(exit).not.toBeNull();
        const failed = steps.some((s) => s.event.startsWith("xstate.error.actor.start"));
        expect(exit!.code, run.stderr()).toBe(failed ? 1 : 0);
        if (steps.some((s) => s.state === "restarting")) {
          await run.waitForLog((l) => l.msg === "restarted: the replacement process is running");
          // The replacement runs the same command line: it starts and serves again.
          await until("the replacement to start", () => run.logs.filter((l) => l.msg === "sluice started").length >= 2);
        }
        // After a restart the replacement logs to the same output; only this process's states are compared.
        expect(observedStates(run, "app").slice(0, collapse(expected).length)).toEqual(collapse(expected));
      }
    } finally {
      blocker?.close();
      if (exit === null) run.child.kill("SIGKILL");
      await run.exited;
      // A path may end while the real process is still restarting: whatever replacement it started is ours to
      // stop. Its "restarted" line was written just before the exit; give the pipe a moment to deliver it.
      await new Promise((r) => setTimeout(r, 150));
      for (const l of run.logs) if (l.msg === "restarted: the replacement process is running") replacementPids.push(Number(l.pid));
    }
  });
});
