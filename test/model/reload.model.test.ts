// Model-based test of the reload status machine: @xstate/graph generates paths through
// machines/reload.machine.ts (to every state, and on from `ok` and `failed` to every state again);
// each path is replayed against the real program through POST /api/reload and the configuration
// file, and checked against the machine after every step: the state sequence (from the log), the
// reload status record, and — wherever the machine refuses a request — a 409 from the API.
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { getShortestPaths } from "@xstate/graph";
import { createActor } from "xstate";
import { afterAll, describe, expect, test } from "vitest";
import { reloadMachine, type ReloadEvent } from "../../machines/reload.machine.js";
import { contentVersion } from "../../src/config/load.js";
import { startCli } from "../helpers/cli.js";
import { tempDir } from "../helpers/sluice.js";
import { collapse, modelConfig, statesAtLeast, writeSlowRules } from "./harness.js";

const EVENTS: ReloadEvent[] = [
  { type: "RELOAD.REQUEST" },
  { type: "RELOAD.START", at: 1, version: "v" },
  { type: "RELOAD.SUCCEEDED", at: 2, version: "v" },
  { type: "RELOAD.FAILED", at: 2, error: "e" },
];

type PathStep = ReturnType<typeof getShortestPaths<typeof reloadMachine>>[number]["steps"][number];
const first = getShortestPaths(reloadMachine, { events: EVENTS });
// From each resting state reached by a first path, every state again (a second reload). The
// continuation's first step is its starting point, already the last step of the first path.
const second = first
  .filter((p) => p.state.matches("ok") || p.state.matches("failed"))
  .flatMap((p) =>
    getShortestPaths(reloadMachine, { events: EVENTS, fromState: p.state })
      .filter((q) => q.steps.length > 1)
      .map((q) => ({ steps: [...p.steps, ...q.steps.slice(1)] })),
  );
const paths: { steps: PathStep[] }[] = [...first, ...second];

const dir = tempDir();
// Long enough for the 409 checks, which are sent as soon as the log shows the state.
writeSlowRules(dir, 100_000);
afterAll(() => rmSync(dir, { recursive: true, force: true }));

interface Step {
  event: string;
  state: string;
}

describe("reload status model", () => {
  test("the generator reaches every state, and every state again after a first reload", () => {
    expect(new Set(first.map((p) => String(p.state.value)))).toEqual(new Set(["idle", "pending", "in_progress", "ok", "failed"]));
    expect(second.length).toBeGreaterThanOrEqual(6);
  });

  const cases = paths.map((p, i) => {
    const steps: Step[] = p.steps.map((s) => ({ event: s.event.type, state: String(s.state.value) }));
    return { name: `#${i} ${steps.map((s) => `${s.event.replace("RELOAD.", "")}→${s.state}`).join(" ")}`, steps };
  });

  test.each(cases)("$name", async ({ steps }) => {
    // The outcome of each reload is known from the path; the file is prepared before the request.
    const outcomes = steps.filter((s) => s.event === "RELOAD.SUCCEEDED" || s.event === "RELOAD.FAILED").map((s) => s.event);
    const file = join(dir, `reload-${Math.random().toString(36).slice(2)}.yaml`);
    // The first request arrives while generation 1 is still being built: `pending` lasts until it is serving.
    writeFileSync(file, modelConfig(dir, { apiListen: "127.0.0.1:0", slow: true, broken: false, answer: 1 }));
    const run = startCli(["-c", file]);
    const model = createActor(reloadMachine).start();
    try {
      const apiPort = Number((await run.waitForLog((l) => l.msg === "management API listening")).port);
      const api = (path: string, method = "GET"): Promise<Response> => fetch(`http://127.0.0.1:${apiPort}${path}`, { method });
      const status = async (): Promise<Record<string, unknown>> => (await (await api("/api/reload/status")).json()) as Record<string, unknown>;
      const expected: string[] = [];
      let reloads = 0;
      let requests = 0;
      for (const step of steps) {
        switch (step.event) {
          case "xstate.init":
            break;
          case "RELOAD.REQUEST": {
            const outcome = outcomes[reloads++];
            if (requests++ > 0) writeFileSync(file, modelConfig(dir, { apiListen: `127.0.0.1:${apiPort}`, slow: true, broken: outcome === "RELOAD.FAILED", answer: 2 }));
            else if (outcome === "RELOAD.FAILED") {
              // Generation 1 has already read the file; the pending reload will read this one.
              writeFileSync(file, modelConfig(dir, { apiListen: `127.0.0.1:${apiPort}`, slow: true, broken: true, answer: 2 }));
            }
            expect((await api("/api/reload", "POST")).status).toBe(202);
            model.send({ type: "RELOAD.REQUEST" });
            break;
          }
          case "RELOAD.START":
            model.send({ type: "RELOAD.START", at: 0, version: null });
            break;
          case "RELOAD.SUCCEEDED":
            model.send({ type: "RELOAD.SUCCEEDED", at: 0, version: "v" });
            break;
          case "RELOAD.FAILED":
            model.send({ type: "RELOAD.FAILED", at: 0, error: "e" });
            break;
          default:
            throw new Error(`no adapter for ${step.event}`);
        }
        expected.push(step.state);
        const want = collapse(expected);
        const seen = await statesAtLeast(run, "reload", want);
        expect(seen.slice(0, want.length)).toEqual(want);

        // Wherever the machine refuses a request, so must the API — checked while the real state still holds.
        const snap = model.getSnapshot();
        if (!snap.can({ type: "RELOAD.REQUEST" })) {
          const stable = step.state === "in_progress" || (step.state === "pending" && requests === 1);
          if (stable) {
            const res = await api("/api/reload", "POST");
            expect(res.status).toBe(409);
            expect(await res.json()).toEqual({ ok: false, code: "reload_busy", message: "a reload is already pending or in progress" });
          }
        }
        if (step.state === "ok" || step.state === "failed") {
          const record = await status();
          expect(record.status).toBe(step.state);
          expect(record.pending).toBe(false);
          expect(record.in_progress).toBe(false);
          if (step.state === "ok") {
            expect(record.last_error).toBeNull();
            expect(record.last_success_ms).toBe(record.last_completed_ms);
            expect(record.running_version).toBe(contentVersion(readFileSync(file, "utf8")));
          } else {
            expect(String(record.last_error)).toContain("missing-hosts.txt");
            expect(record.target_version).toBe(contentVersion(readFileSync(file, "utf8")));
          }
        }
      }
    } finally {
      run.child.kill("SIGKILL");
      await run.exited;
    }
  });
});
