// Model-based test of a download plugin's batches (machines/download.machine.ts): @xstate/graph
// generates the shortest paths through the machine; each is replayed against a real Sluice with a
// real HTTP file server whose gated path decides when a batch's one download ends and how. A manual
// request is POST download; a pipeline request is a DNS query whose sequence runs the executor.
// After every step GET downloads must say whether a batch runs, every request the machine answered
// must have its answer (200 with the result; the query NXDOMAIN, or SERVFAIL for a failed batch), and
// a manual request the machine refuses must get its guard's status and code.
import { getShortestPaths } from "@xstate/graph";
import { initialTransition, transition, type SnapshotFrom } from "xstate";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { refusingGuard } from "../../actors/ask.js";
import { downloadMachine, type DownloadEvent, type DownloadResult } from "../../machines/download.machine.js";
import { ERROR_STATUS } from "../../src/api/errors.js";
import { GUARD_REFUSALS } from "../../src/api/guards.js";
import { ask, rcodeOf } from "../helpers/dns.js";
import { startFileServer, type FileServer } from "../helpers/file-server.js";
import { startSluice, type RunningSluice } from "../helpers/sluice.js";

type BatchDone = { type: "xstate.done.actor.batch"; output: DownloadResult };
type ModelEvent = DownloadEvent | BatchDone;
type Snap = SnapshotFrom<typeof downloadMachine>;

const input = { tag: "dl", clock: () => 0 };
const MANUAL: DownloadEvent = { type: "DOWNLOAD.RUN", index: null, source: "manual", requestId: "m" };
const PIPELINE: DownloadEvent = { type: "DOWNLOAD.RUN", index: null, source: "pipeline", requestId: "p" };
const OK: BatchDone = { type: "xstate.done.actor.batch", output: { total: 1, succeeded: 1, failed: 0 } };
const FAILED: BatchDone = { type: "xstate.done.actor.batch", output: { total: 1, succeeded: 0, failed: 1 } };

const eventsFor = (s: Snap): ModelEvent[] => (s.value === "idle" ? [MANUAL, PIPELINE] : [PIPELINE, OK, FAILED]);

const paths = getShortestPaths(downloadMachine, {
  input,
  events: (s) => eventsFor(s) as never,
  serializeState: (s) => JSON.stringify([s.value, s.context.waiting.length > 0, s.context.batch?.source ?? null, s.context.last === null ? null : s.context.last.failed > 0]),
});

function replay(events: ModelEvent[]): Snap[] {
  let [snap] = initialTransition(downloadMachine, input);
  return events.map((e) => ([snap] = transition(downloadMachine, snap, e as never))[0]);
}

const name = (e: ModelEvent): string => (e.type === "DOWNLOAD.RUN" ? `run(${e.source})` : e.output.failed > 0 ? "done(failed)" : "done(ok)");

let files: FileServer;
let s: RunningSluice;

beforeAll(async () => {
  files = await startFileServer();
  files.set("d.txt", "full:d.example\n");
  s = await startSluice(`api:
  http: 127.0.0.1:0
plugins:
  - tag: dl
    type: download
    args: { startup_if_missing: false, downloads: [{ url: "${files.url}/gate/d.txt", dir: out }] }
  - tag: main
    type: sequence
    args:
      - { matches: "qname full:fetch.test", exec: $dl }
      - exec: reject 3
  - { tag: udp, type: udp_server, args: { entry: main, listen: "127.0.0.1:0" } }
`);
});
afterAll(async () => {
  await s.stop();
  await files.close();
});

/** A request in flight and what it must come back with once its batch has ended. */
interface Asker {
  kind: "manual" | "pipeline";
  settled: Promise<{ status?: number; body?: unknown; rcode?: number }>;
}

function send(kind: Asker["kind"]): Asker {
  if (kind === "manual") {
    const settled = s
      .api("/api/plugins/dl/download", { method: "POST", headers: { "content-type": "application/json" }, body: "{}" })
      .then(async (r) => ({ status: r.status, body: (await r.json()) }));
    return { kind, settled };
  }
  return { kind, settled: ask(s.udpPort, "fetch.test", "A", { timeoutMs: 20_000 }).then((r) => ({ rcode: rcodeOf(r) })) };
}

const running = async (): Promise<boolean> => ((await (await s.api("/api/plugins/dl/downloads")).json()) as { items: { running: boolean }[] }).items[0].running;

describe("download batch model", () => {
  const cases = paths.map((p, i) => {
    const events = p.steps.slice(1).map((x) => x.event as ModelEvent);
    return { name: `#${i} ${events.map(name).join(" → ") || "(initial)"}`, events };
  });

  test("the generator covers both states, waiting pipelines, follow-up batches and both outcomes", () => {
    const all = cases.flatMap((c) => replay(c.events));
    expect(new Set(all.map((x) => x.value))).toEqual(new Set(["idle", "downloading"]));
    expect(all.some((x) => x.context.waiting.length > 0)).toBe(true);
    expect(all.some((x) => x.value === "downloading" && x.context.batches > 1 && x.context.batch?.source === "pipeline")).toBe(true);
    expect(new Set(all.map((x) => (x.context.last === null ? null : x.context.last.failed > 0)))).toEqual(new Set([null, false, true]));
  });

  test.each(cases)("$name", async ({ events }) => {
    let current: Asker[] = [];
    let waiting: Asker[] = [];
    const snaps = replay(events);
    let before = initialTransition(downloadMachine, input)[0];
    expect(await running()).toBe(false);
    for (const [i, event] of events.entries()) {
      const after = snaps[i];
      if (event.type === "DOWNLOAD.RUN") {
        const asker = send(event.source);
        if (before.value === "idle") {
          current = [asker];
          await files.waitHeld("d.txt");
        } else {
          waiting.push(asker);
          // The pipeline's request reaches the actor (nothing to see until the batch ends).
          await new Promise((r) => setTimeout(r, 100));
          expect(files.held("d.txt")).toBe(1);
        }
      } else {
        const failed = event.output.failed > 0;
        files.release("d.txt", failed ? 500 : 200);
        for (const a of current) {
          const got = await a.settled;
          if (a.kind === "manual") expect(got).toEqual({ status: 200, body: { ok: !failed, total: 1, succeeded: failed ? 0 : 1, failed: failed ? 1 : 0 } });
          else expect(got).toEqual({ rcode: failed ? 2 : 3 });
        }
        current = waiting;
        waiting = [];
        // Pipelines that waited get a batch of their own, at once.
        if (after.value === "downloading") await files.waitHeld("d.txt");
      }
      expect(await running()).toBe(after.value === "downloading");
      if (after.context.last !== null) {
        const items = ((await (await s.api("/api/plugins/dl/downloads")).json()) as { items: { last_error: string | null }[] }).items;
        if (after.value === "idle") expect(items[0].last_error === null).toBe(after.context.last.failed === 0);
      }
      // A manual request the machine refuses here is refused by the API with the guard's code.
      if (!after.can(MANUAL)) {
        const guard = refusingGuard(after, MANUAL);
        const refusal = GUARD_REFUSALS[guard ?? ""];
        expect(refusal, `guard ${guard}`).toBeDefined();
        const res = await send("manual").settled;
        expect(res.status).toBe(ERROR_STATUS[refusal.code]);
        expect(res.body).toMatchObject({ ok: false, code: refusal.code });
        expect(files.held("d.txt")).toBe(1);
      }
      before = after;
    }
    // Leave the plugin idle for the next path.
    while (current.length > 0) {
      files.release("d.txt");
      await Promise.all(current.map((a) => a.settled));
      current = waiting;
      waiting = [];
      if (current.length > 0) await files.waitHeld("d.txt");
    }
    expect(await running()).toBe(false);
  });
});
