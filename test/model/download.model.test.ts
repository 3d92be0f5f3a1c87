// Model-based test of a download plugin's actor (machines/download.machine.ts): @xstate/graph
// generates the shortest paths through the machine; each is replayed against a real Sluice with a
// real HTTP file server whose gated path decides when a download ends and how.
// Batches: a manual request is POST download; a pipeline request is a DNS query whose sequence runs
// the executor. After every step GET downloads must say whether a batch runs, every request the
// machine answered must have its answer (200 with the result; the query NXDOMAIN, or SERVFAIL for a
// failed batch), and a manual request the machine refuses must get its guard's status and code.
// Start-up (startup_if_missing): a reload to a configuration whose download target is missing; while
// the file is held the new generation waits in `starting` (its reader not created, the old
// configuration serving); a fetched file completes the reload with the reader using it, a failed one
// fails the reload with the located message and leaves no file.
import { existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { getShortestPaths } from "@xstate/graph";
import { initialTransition, transition, type SnapshotFrom } from "xstate";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { refusingGuard } from "../../actors/ask.js";
import { downloadMachine, type DownloadEvent, type DownloadInput, type ItemOutcome } from "../../machines/download.machine.js";
import { ERROR_STATUS } from "../../src/api/errors.js";
import { GUARD_REFUSALS } from "../../src/api/guards.js";
import { query, rcodeOf } from "../helpers/dns.js";
import { startFileServer, type FileServer } from "../helpers/file-server.js";
import { startSluice, type RunningSluice } from "../helpers/sluice.js";
import { withoutPrefixes } from "./harness.js";

type FetchDone = { type: "xstate.done.actor.fetch"; output: ItemOutcome };
type ModelEvent = DownloadEvent | FetchDone;
type Snap = SnapshotFrom<typeof downloadMachine>;

const input: DownloadInput = { tag: "dl", clock: () => 0, items: 1, missing: [] };
const MANUAL: DownloadEvent = { type: "DOWNLOAD.RUN", index: null, source: "manual", requestId: "m" };
const PIPELINE: DownloadEvent = { type: "DOWNLOAD.RUN", index: null, source: "pipeline", requestId: "p" };
const OK: FetchDone = { type: "xstate.done.actor.fetch", output: { error: null } };
const FAILED: FetchDone = { type: "xstate.done.actor.fetch", output: { error: "HTTP 500" } };

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

const name = (e: ModelEvent): string => (e.type === "DOWNLOAD.RUN" ? `run(${e.source})` : e.output.error !== null ? "done(failed)" : "done(ok)");

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
  return { kind, settled: query(s.udpPort, "fetch.test", "A", { timeoutMs: 20_000 }).then((r) => ({ rcode: rcodeOf(r) })) };
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
        const failed = event.output.error !== null;
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

type StartupEvent = { type: "xstate.done.actor.fetchMissing"; output: ItemOutcome } | { type: "xstate.error.actor.fetchMissing"; error: Error };
const startupInput: DownloadInput = { tag: "boot", clock: () => 0, items: 1, missing: [0] };
const FETCHED: StartupEvent = { type: "xstate.done.actor.fetchMissing", output: { error: null } };
const BROKEN: StartupEvent = { type: "xstate.error.actor.fetchMissing", error: new Error("HTTP 500") };

// Walked without a parent: what it tells its plugin actor is checked on the program (the reload's outcome).
const startupModel = downloadMachine.provide({ actions: { reportStarted: () => undefined, reportStartFailed: () => undefined } });
// Only the fetch's end moves `starting`: no request reaches a generation that is not ready yet.
const startupPaths = getShortestPaths(startupModel, {
  input: startupInput,
  events: (snap) => (snap.value === "starting" ? [FETCHED, BROKEN] : []) as never,
  serializeState: (snap) => JSON.stringify(snap.value),
});

describe("download start-up model", () => {
  let b: RunningSluice;
  const base = (udp: string): string => `api:
  http: 127.0.0.1:0
plugins:
  - { tag: main, type: sequence, args: [{ exec: reject 5 }] }
  - { tag: udp, type: udp_server, args: { entry: main, listen: "${udp}" } }
`;
  // \`blocked\` sorts before \`boot\`: only the download plugins' place first in the creation order lets it read the file.
  const withDownload = (n: number): string => `api:
  http: 127.0.0.1:0
plugins:
  - tag: boot
    type: download
    args: { downloads: [{ url: "${files.url}/gate/boot.txt", dir: lists${n} }] }
  - { tag: blocked, type: domain_set, args: { files: [lists${n}/boot.txt] } }
  - tag: main
    type: sequence
    args:
      - { matches: "qname $blocked", exec: reject 3 }
      - exec: reject 5
  - { tag: udp, type: udp_server, args: { entry: main, listen: "127.0.0.1:${b.udpPort}" } }
`;
  interface Actor {
    id: string;
    state: unknown;
  }
  const actors = async (): Promise<Actor[]> => ((await (await b.api("/api/actors")).json()) as { actors: Actor[] }).actors;
  const reloadStatus = async (): Promise<{ status: string; last_completed_ms: number | null; last_error: string | null }> =>
    (await (await b.api("/api/reload/status")).json()) as { status: string; last_completed_ms: number | null; last_error: string | null };
  const rcode = async (): Promise<number> => rcodeOf(await query(b.udpPort, "boot.example", "A"));

  beforeAll(async () => {
    files.set("boot.txt", "full:boot.example\n");
    b = await startSluice(base("127.0.0.1:0"));
  });
  afterAll(async () => {
    // A path that failed while its download was held must not keep the reload (and so the stop) waiting.
    while (files.held("boot.txt") > 0) files.release("boot.txt", 500);
    await b.stop();
  });

  // Each path is checked in `starting` before its end, so the path that stays there is covered by the others.
  const cases = withoutPrefixes(startupPaths, (p) => p.steps.map((x) => `${x.event.type} ${JSON.stringify(x.state.value)}`)).map((p, n) => {
    const events = p.steps.slice(1).map((x) => x.event as unknown as StartupEvent);
    return { name: `#${n} starting → ${events.map((e) => (e.type === FETCHED.type ? "fetched" : "failed")).join(" → ")}`, events, n };
  });

  test("the generator leaves starting both ways", () => {
    expect(initialTransition(startupModel, startupInput)[0].value).toBe("starting");
    const ends = cases.map((c) => c.events.reduce((snap, e) => transition(startupModel, snap, e as never)[0], initialTransition(startupModel, startupInput)[0]).value);
    expect(new Set(ends)).toEqual(new Set(["idle", "failed"]));
  });

  test.each(cases)("$name", async ({ events, n }) => {
    const serving = await rcode();
    const since = Date.now();
    writeFileSync(join(b.dir, "sluice.yaml"), withDownload(n));
    expect((await b.api("/api/reload", { method: "POST" })).status).toBe(202);
    await files.waitHeld("boot.txt");
    // starting: the plugin waits for its file, its reader is not created, the old configuration serves.
    const during = await actors();
    // The generation being built is the newest one (an earlier path's may still serve).
    const generation = Math.max(...during.map((a) => Number(/^runtime:(\d+)$/.exec(a.id)?.[1] ?? 0)));
    const download = during.find((a) => a.id === `runtime:${generation}/plugin:boot/download:boot`);
    expect(download?.state).toBe("starting");
    expect(during.find((a) => a.id === `runtime:${generation}/plugin:boot`)?.state).toBe("starting");
    expect(during.some((a) => a.id === `runtime:${generation}/plugin:blocked`)).toBe(false);
    expect(await rcode()).toBe(serving);
    expect((await reloadStatus()).status).toBe("in_progress");

    expect(events).toHaveLength(1);
    const broken = events[0].type === BROKEN.type;
    files.release("boot.txt", broken ? 500 : 200);
    let done = await reloadStatus();
    while (!((done.status === "ok" || done.status === "failed") && (done.last_completed_ms ?? 0) >= since)) {
      await new Promise((r) => setTimeout(r, 10));
      done = await reloadStatus();
    }
    if (broken) {
      expect(done.status).toBe("failed");
      expect(done.last_error).toMatch(/sluice\.yaml:4:\d+: error: plugin 'boot' \(download\) could not prepare: startup_if_missing: downloading http:\/\/127\.0\.0\.1:\d+\/gate\/boot\.txt to .*boot\.txt failed: HTTP 500/);
      expect(existsSync(join(b.dir, `lists${n}`, "boot.txt"))).toBe(false);
      expect((await actors()).some((a) => a.id.startsWith(`runtime:${generation}/`))).toBe(false);
      expect(await rcode()).toBe(serving);
    } else {
      expect(done.status).toBe("ok");
      expect(await rcode()).toBe(3);
      expect((await actors()).find((a) => a.id === download?.id)?.state).toBe("idle");
      const items = ((await (await b.api("/api/plugins/boot/downloads")).json()) as { items: Record<string, unknown>[] }).items;
      expect(items[0]).toMatchObject({ running: false, last_error: null, size_bytes: "full:boot.example\n".length });
      expect(items[0].last_success_ms as number).toBeGreaterThanOrEqual(since);
    }
  });
});
