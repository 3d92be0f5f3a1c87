// Model-based test of a provider's reload (machines/provider.machine.ts): @xstate/graph generates
// the shortest paths through the machine, and each path is replayed against the real program (a
// child process) through POST /api/plugins/<tag>/reload. The provider's rule file is a FIFO while
// a reload runs, so `reloading` lasts until the test writes the new rules (or broken ones) into it.
// After every step the provider actor's state and record in the API must equal the machine's, a
// reload the machine refuses must be refused by the API with the refusing guard's status and code,
// and DNS must answer from the rules the machine says are serving.
import { execFileSync } from "node:child_process";
import { closeSync, constants, openSync, rmSync, writeFileSync, writeSync } from "node:fs";
import { join } from "node:path";
import { getShortestPaths } from "@xstate/graph";
import type { SnapshotFrom } from "xstate";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { refusingGuard } from "../../actors/ask.js";
import { providerMachine, type ProviderEvent } from "../../machines/provider.machine.js";
import { ERROR_STATUS } from "../../src/api/errors.js";
import { GUARD_REFUSALS } from "../../src/api/guards.js";
import { RCODE } from "../../src/dns/constants.js";
import { startCli, type RunningCli } from "../helpers/cli.js";
import { query, rcodeOf } from "../helpers/dns.js";
import { tempDir } from "../helpers/sluice.js";

type ModelEvent = ProviderEvent | { type: `xstate.${"done" | "error"}.actor.${string}`; output?: unknown; error?: unknown };
type Snap = SnapshotFrom<typeof providerMachine>;

/** Every rule file has two rules: the generation's marker name and one shared name. */
const RULES = 2;
const rulesText = (generation: number): string => `full:gen${generation}.test\nfull:common.test\n`;
const BROKEN = "full:fine.test\nnokind:broken.test\n";

const invokeId = "0.provider.reloading";
const paths = getShortestPaths(providerMachine, {
  input: { tag: "set", rules: RULES },
  events: (s) =>
    (s.value === "idle"
      ? [{ type: "PROVIDER.RELOAD", requestId: "r" }]
      : [
          { type: `xstate.done.actor.${invokeId}`, output: { rules: RULES, duration_ms: 0 } },
          { type: `xstate.error.actor.${invokeId}`, error: new Error("broken") },
        ]) as never,
  // Exact counters (a coarser key would let a path's steps carry another path's snapshot), bounded at two outcomes.
  serializeState: (s) => {
    const c = s.context;
    return JSON.stringify([s.value, c.reloads, c.failures, c.last_error !== null]);
  },
  stopWhen: (s) => {
    const c = s.context;
    return c.reloads + c.failures >= 2;
  },
});

const dir = tempDir();
const rules = join(dir, "rules.txt");
const file = join(dir, "sluice.yaml");
const config = (api: string, udp: string): string => `
api:
  http: "${api}"
plugins:
  - { tag: set, type: domain_set, args: { files: [${rules}] } }
  - tag: main
    type: sequence
    args:
      - { matches: "qname $set", exec: reject 3 }
      - exec: reject 5
  - { tag: udp, type: udp_server, args: { entry: main, listen: "${udp}" } }
`;

let run: RunningCli;
let apiPort = 0;
let dnsPort = 0;
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const api = async (path: string, method = "GET"): Promise<{ status: number; json: Record<string, unknown> }> => {
  const res = await fetch(`http://127.0.0.1:${apiPort}${path}`, { method });
  return { status: res.status, json: (await res.json()) as Record<string, unknown> };
};

/** The rule file as a plain file with `text`. */
function settle(text: string): void {
  rmSync(rules, { force: true });
  writeFileSync(rules, text);
}

/** Writes `text` into the FIFO once the provider has opened it for reading. */
async function feed(text: string): Promise<void> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    let fd: number;
    try {
      fd = openSync(rules, constants.O_WRONLY | constants.O_NONBLOCK);
    } catch (err) {
      // ENXIO: no reader yet.
      if ((err as NodeJS.ErrnoException).code !== "ENXIO" || Date.now() > deadline) throw err;
      await sleep(5);
      continue;
    }
    try {
      writeSync(fd, text);
    } finally {
      closeSync(fd);
    }
    return;
  }
}

beforeAll(async () => {
  settle(rulesText(0));
  writeFileSync(file, config("127.0.0.1:0", "127.0.0.1:0"));
  run = startCli(["-c", file]);
  apiPort = Number((await run.waitForLog((l) => l.msg === "management API listening")).port);
  dnsPort = Number((await run.waitForLog((l) => l.msg === "udp server listening")).port);
  await run.waitForLog((l) => l.msg === "sluice started");
  // Full reloads between paths keep the same sockets.
  writeFileSync(file, config(`127.0.0.1:${apiPort}`, `127.0.0.1:${dnsPort}`));
});
afterAll(async () => {
  // A reader still waiting on the FIFO gets its end of file; then the process stops.
  await feed(rulesText(0)).catch(() => undefined);
  run.child.kill("SIGTERM");
  await run.exited;
  rmSync(dir, { recursive: true, force: true });
});

interface ProviderRecord {
  state: unknown;
  context: Record<string, unknown>;
}

/** The provider's concern actor as GET /api/actors shows it, and its state as GET /api/plugins shows it. */
async function record(): Promise<ProviderRecord> {
  const generation = (await api("/api/control")).json.generation as number;
  const found = ((await api("/api/actors")).json.actors as { id: string; state: unknown; context: Record<string, unknown> }[]).find((a) => a.id === `runtime:${generation}/plugin:set/provider:set`);
  const listed = ((await api("/api/plugins")).json.plugins as { tag: string; concern_state: unknown }[]).find((p) => p.tag === "set");
  expect(found, "provider actor listed").toBeDefined();
  expect(listed?.concern_state).toEqual(found?.state);
  return { state: found?.state, context: found?.context ?? {} };
}

function expectRecord(r: ProviderRecord, snap: Snap): void {
  expect(r.state).toBe(snap.value);
  expect(r.context).toMatchObject({ tag: "set", reloads: snap.context.reloads, failures: snap.context.failures, rules: snap.context.rules });
  expect(r.context.last_error === null, String(r.context.last_error)).toBe(snap.context.last_error === null);
}

/** A fresh provider actor (reloads 0, idle): a full reload builds the configuration again. */
async function freshGeneration(): Promise<void> {
  const before = (await api("/api/control")).json.generation as number;
  expect((await api("/api/reload", "POST")).status).toBe(202);
  const deadline = Date.now() + 10_000;
  while (((await api("/api/control")).json.generation as number) === before || (await api("/api/reload/status")).json.status !== "ok") {
    if (Date.now() > deadline) throw new Error(`full reload did not finish: ${JSON.stringify((await api("/api/reload/status")).json)}`);
    await sleep(10);
  }
}

const shortName = (e: ModelEvent): string => e.type.replace(`.actor.${invokeId}`, "").replace("xstate.", "").replace("PROVIDER.", "");

describe("provider reload model", () => {
  const cases = paths.map((p, i) => ({ name: `#${i} ${p.steps.slice(1).map((s) => `${shortName(s.event as ModelEvent)}→${String(s.state.value)}`).join(" ") || "(initial)"}`, steps: p.steps }));

  test("the generator reaches both states, success and failure, and a reload after each", () => {
    const seqs = cases.map((c) => c.steps.map((s) => shortName(s.event as ModelEvent)).join(" "));
    expect(new Set(cases.flatMap((c) => c.steps.map((s) => s.state.value)))).toEqual(new Set(["idle", "reloading"]));
    expect(seqs.some((q) => q.includes("done RELOAD error"))).toBe(true);
    expect(seqs.some((q) => q.includes("error RELOAD done"))).toBe(true);
  });

  test.each(cases)("$name", async ({ steps }) => {
    let serving = 0;
    settle(rulesText(serving));
    await freshGeneration();
    let pending: Promise<{ status: number; json: Record<string, unknown> }> | null = null;
    let next = serving;
    try {
      for (const step of steps) {
        const snap: Snap = step.state;
        const type: string = step.event.type;
        if (type === "PROVIDER.RELOAD") {
          next++;
          rmSync(rules, { force: true });
          execFileSync("mkfifo", [rules]);
          pending = api("/api/plugins/set/reload", "POST");
          const deadline = Date.now() + 10_000;
          while ((await record()).state !== "reloading" && Date.now() < deadline) await sleep(10);
        } else if (type.startsWith("xstate.done.actor.") || type.startsWith("xstate.error.actor.")) {
          const good = type.startsWith("xstate.done");
          await feed(good ? rulesText(next) : BROKEN);
          const res = await (pending as Promise<{ status: number; json: Record<string, unknown> }>);
          pending = null;
          if (good) {
            expect([res.status, res.json]).toEqual([200, { ok: true, provider: "set", rules: RULES, duration_ms: expect.any(Number) as number }]);
            serving = next;
          } else {
            expect([res.status, res.json.code]).toEqual([ERROR_STATUS.provider_reload_failed, "provider_reload_failed"]);
          }
          settle(rulesText(serving));
        }
        expectRecord(await record(), snap);
        // Wherever the machine refuses a reload, the API refuses it with the guard's status and code.
        const refusal = { type: "PROVIDER.RELOAD" as const, requestId: "probe" };
        if (!snap.can(refusal)) {
          const guard = refusingGuard(snap, refusal);
          const want = GUARD_REFUSALS[guard ?? ""];
          expect(want, `guard ${guard}`).toBeDefined();
          const res = await api("/api/plugins/set/reload", "POST");
          expect([res.status, res.json.code]).toEqual([ERROR_STATUS[want.code], want.code]);
          expectRecord(await record(), snap);
        }
        // DNS answers from the rules the machine says are serving.
        expect(rcodeOf(await query(dnsPort, `gen${serving}.test`))).toBe(RCODE.NXDOMAIN);
        if (serving > 0) expect(rcodeOf(await query(dnsPort, `gen${serving - 1}.test`))).toBe(RCODE.REFUSED);
        expect(rcodeOf(await query(dnsPort, "fine.test"))).toBe(RCODE.REFUSED);
      }
    } finally {
      // A path that ends while reloading: let that reload finish before the next path starts.
      if (pending) {
        await feed(rulesText(serving));
        await pending;
        settle(rulesText(serving));
      }
    }
  });
});
