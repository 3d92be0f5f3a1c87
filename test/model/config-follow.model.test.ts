// Model-based test of a replica following its primary (machines/config-follow.machine.ts):
// @xstate/graph generates a shortest path to every transition (each poll's outcome: the primary's
// version unchanged, a new one, or the primary unreachable; each apply's outcome: applied, refused
// because it does not validate, busy because a save was running; after an apply, the reload it asked
// for ending), and each path that no other
// continues is replayed against the real program: an in-process primary, a replica started with
// --config-from as a child process, and a TCP relay between them that the test can take down (each
// path its own; two paths at a time). Before each poll the test makes the world the next step says
// (a valid or invalid configuration saved on the primary, the old one put back, the relay down, a
// slow save running on the replica); after each poll GET /api/reload/status must show what the
// machine's context says (versions handled, applied and refused, an error or not), and DNS must
// answer with the applied configuration. The machine takes no outside request, so there is no
// refusal to check; `apply` failing outright (not busy, not refused) and `reload` failing (the app
// refuses reloads only while it stops) happen only while the process stops, and are not generated.
import net from "node:net";
import { rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { getShortestPaths } from "@xstate/graph";
import { getInitialSnapshot, getNextSnapshot, type SnapshotFrom } from "xstate";
import { afterAll, describe, expect, test } from "vitest";
import { configFollowMachine } from "../../machines/config-follow.machine.js";
import { startCli, type RunningCli } from "../helpers/cli.js";
import { answerIps, query } from "../helpers/dns.js";
import { startSluice, tempDir, type RunningSluice } from "../helpers/sluice.js";
import { coveringWalks, HeldFile } from "./harness.js";

type Snap = SnapshotFrom<typeof configFollowMachine>;
/** `fetched`: the primary still has the version handled last, or a new one (labelled vN when replayed). */
type ModelEvent = { type: string; output?: { version?: string; fetched?: "same" | "new"; outcome?: string; error?: string }; error?: unknown };

let labels = 0;
function eventsFor(s: Snap): ModelEvent[] {
  switch (s.value) {
    case "waiting":
      return [{ type: "xstate.after.pollInterval.follow.waiting" }];
    case "polling":
      return [
        { type: "xstate.done.actor.fetch", output: { version: s.context.version ?? "v0", fetched: "same" } },
        { type: "xstate.done.actor.fetch", output: { version: `g${++labels}`, fetched: "new" } },
        { type: "xstate.error.actor.fetch", error: new Error("unreachable") },
      ];
    case "applying":
      return (["applied", "refused", "busy"] as const).map((outcome) => ({ type: "xstate.done.actor.apply", output: { outcome, error: outcome } }));
    case "reloading":
      return [{ type: "xstate.done.actor.reload" }];
    default:
      return [];
  }
}

const kind = (e: ModelEvent | undefined): string => {
  if (!e || e.type === "xstate.init") return "start";
  if (e.type.startsWith("xstate.after")) return "poll";
  if (e.type === "xstate.error.actor.fetch") return "unreachable";
  if (e.type === "xstate.done.actor.fetch") return "fetched";
  if (e.type === "xstate.done.actor.reload") return "reloaded";
  return e.output?.outcome ?? e.type;
};

/** The transition into `s` by `e` from `prev`: states that differ only in labels and counters are one. */
const serialize = (s: Snap, e: ModelEvent | undefined, prev: Snap | undefined): string => {
  const c = s.context;
  return JSON.stringify([prev?.value ?? null, kind(e), e?.output?.fetched ?? "", s.value, c.version === c.applied_version, c.version === c.refused_version, c.refused_version !== null, c.last_error === null]);
};

const INPUT = { source: "primary", interval_ms: 1000, clock: () => 0, version: "v0", applied: true, error: null };

const paths = getShortestPaths(configFollowMachine, {
  input: INPUT,
  events: (s) => eventsFor(s) as never,
  serializeState: (s, e, prev) => serialize(s, e as ModelEvent | undefined, prev),
});

const AUTH = { Authorization: `Basic ${Buffer.from("admin:model-pw").toString("base64")}` };
/** The configuration for label `vN`: answers 10.0.0.N, or does not validate. */
const content = (label: string, valid: boolean): string => `api:
  http:
    listen: "127.0.0.1:0"
    auth: { username: admin, password: model-pw }
plugins:
  - tag: main
    type: sequence
    args:
      - exec: black_hole 10.0.${Math.floor(Number(label.slice(1)) / 250)}.${Number(label.slice(1)) % 250} short_circuit
  - { tag: udp, type: udp_server, args: { entry: main, listen: "127.0.0.1:0" } }
${valid ? "" : "  - { tag: broken, type: no_such_type }\n"}`;

/**
 * A save that keeps the replica's config actor busy until the test lets it go: its text includes a FIFO
 * (HeldFile) that validation waits on, costing no CPU; then it is refused (nothing is written).
 */
const heldSave = (include: string): string => JSON.stringify({ content: `include: [${include}]\nplugins:\n  - { tag: zz, type: no_such_type }\n`, validate: true });

const dir = tempDir("sluice-follow-model-");
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** One path's world: an in-process primary and a TCP relay to it that the test can take down (paths run side by side). */
interface World {
  primary: RunningSluice;
  relay: net.Server;
  /** The relay refuses connections (and has dropped the open ones): the primary is unreachable. */
  setDown(down: boolean): void;
  close(): Promise<void>;
}

async function startWorld(): Promise<World> {
  const primary = await startSluice(content("v0", true));
  const target = Number(new URL(primary.apiUrl).port);
  const relayed = new Set<net.Socket>();
  let down = false;
  const relay = net.createServer((client) => {
    if (down) return void client.destroy();
    const upstream = net.connect(target, "127.0.0.1");
    relayed.add(client);
    client.on("close", () => relayed.delete(client));
    client.pipe(upstream).pipe(client);
    client.on("error", () => upstream.destroy());
    upstream.on("error", () => client.destroy());
  });
  await new Promise<void>((r) => relay.listen(0, "127.0.0.1", () => r()));
  return {
    primary,
    relay,
    setDown(d) {
      down = d;
      if (d) for (const c of relayed) c.destroy();
    },
    async close() {
      relay.close();
      for (const c of relayed) c.destroy();
      await primary.stop();
    },
  };
}

async function savePrimary(primary: RunningSluice, text: string): Promise<string> {
  const current = (await (await primary.api("/api/config", { headers: AUTH })).json()) as { version: string };
  const res = await primary.api("/api/config", { method: "PUT", headers: { ...AUTH, "content-type": "application/json" }, body: JSON.stringify({ content: text, base_version: current.version, validate: false }) });
  expect(res.status).toBe(200);
  return ((await res.json()) as { version: string }).version;
}

interface Follow {
  state: string;
  version: string | null;
  applied_version: string | null;
  refused_version: string | null;
  last_error: string | null;
  polls: number;
}

/**
 * The path's events run through the machine again: the traversal keeps one state per serialized key,
 * so a path's stored states may come from another branch with other labels. New versions get labels
 * v1, v2, ... in order; "same" takes the version the replica handled last.
 */
function replay(events: ModelEvent[]): { event: ModelEvent; snap: Snap }[] {
  let snap = getInitialSnapshot(configFollowMachine, INPUT);
  const out = [{ event: { type: "xstate.init" } as ModelEvent, snap }];
  let n = 0;
  for (const e of events.slice(1)) {
    let event = e;
    if (e.type === "xstate.done.actor.fetch") event = { ...e, output: { ...e.output, version: e.output?.fetched === "same" ? (snap.context.version ?? "v0") : `v${++n}` } };
    snap = getNextSnapshot(configFollowMachine, snap, event as never);
    out.push({ event, snap });
  }
  return out;
}

describe("replica follow model", () => {
  // A path ending in polling, applying or reloading stops mid-cycle: it is finished with the simplest
  // outcomes, so what it leads to can be seen (the replica is only observed between polls).
  const reloaded: ModelEvent = { type: "xstate.done.actor.reload" };
  const finish: Record<string, ModelEvent[]> = {
    polling: [{ type: "xstate.done.actor.fetch", output: { fetched: "same" } }],
    applying: [{ type: "xstate.done.actor.apply", output: { outcome: "applied" } }, reloaded],
    reloading: [reloaded],
  };
  const name = (steps: { event: ModelEvent; snap: Snap }[]): string => steps.slice(1).map((s) => `${kind(s.event)}${s.event.output?.fetched ? `(${s.event.output.fetched})` : ""}→${String(s.snap.value)}`).join(" ");
  const cases = paths.map((p) => replay([...p.steps.map((s) => s.event as ModelEvent), ...(finish[String(p.state.value)] ?? [])]));
  /** The transitions a replayed path takes (the model's serialized states). */
  const transitions = (steps: { event: ModelEvent; snap: Snap }[]): string[] => steps.map((s, i) => serialize(s.snap, i === 0 ? undefined : s.event, steps[i - 1]?.snap));
  const shortest = new Set(cases.flatMap(transitions));

  // Each replayed path starts a primary and a replica (most of a short path's time), and is checked after
  // every poll cycle: instead of one path per transition, two walks that go on from where they are to the
  // nearest transition not taken yet, until they have taken every transition of the shortest paths.
  const replayed = coveringWalks<Snap, ModelEvent>({
    start: getInitialSnapshot(configFollowMachine, INPUT),
    events: eventsFor,
    next: (s, e) => getNextSnapshot(configFollowMachine, s, e as never),
    key: serialize,
    cover: [...shortest].filter((k) => k !== serialize(getInitialSnapshot(configFollowMachine, INPUT), undefined, undefined)),
    walks: 2,
  }).map((events, i) => {
    // A walk stops at the transition it took last: one that ends mid-cycle is finished as a path is.
    const end = events.reduce((snap, e) => getNextSnapshot(configFollowMachine, snap, e as never), getInitialSnapshot(configFollowMachine, INPUT));
    const steps = replay([{ type: "xstate.init" }, ...events, ...(finish[String(end.value)] ?? [])]);
    return { name: `walk ${i + 1}: ${name(steps)}`, steps };
  });

  test("the walks take every transition of the shortest paths", () => {
    const taken = new Set(replayed.flatMap((w) => transitions(w.steps)));
    expect([...shortest].filter((k) => !taken.has(k))).toEqual([]);
    expect(shortest.size).toBe(paths.length);
    // Every walk ends with the replica waiting for its next poll, as it is observed.
    for (const w of replayed) expect(w.steps.at(-1)?.snap.value).toBe("waiting");
  });

  test("the generator covers every state and every outcome", () => {
    const kinds = new Set(cases.flatMap((c) => c.map((s) => `${kind(s.event)}${s.event.output?.fetched ?? ""}`)));
    expect([...kinds].sort()).toEqual(["applied", "busy", "fetchednew", "fetchedsame", "poll", "refused", "reloaded", "start", "unreachable"]);
    // Each outcome is followed by further polls somewhere (every state the replica waits in is left again).
    for (const outcome of ["applied", "refused", "busy", "unreachable"]) {
      expect(cases.some((c) => c.some((s, i) => kind(s.event) === outcome && c[i + 1] !== undefined)), `a poll after ${outcome}`).toBe(true);
    }
  });

  // Each path has its own primary, relay and replica, so paths can run side by side (vitest maxConcurrency).
  test.concurrent.each(replayed)("$name", async ({ steps }) => {
    const world = await startWorld();
    const save = (text: string): Promise<string> => savePrimary(world.primary, text);
    // Every path starts from the primary at v0, applied at the replica's start.
    const real = new Map<string, { version: string; text: string; valid: boolean }>();
    const v0 = await save(content("v0", true));
    real.set("v0", { version: v0, text: content("v0", true), valid: true });
    const file = join(dir, `replica-${Math.random().toString(36).slice(2)}.yaml`);
    writeFileSync(file, content("v0", true).replace("model-pw", "local-pw"));
    const run: RunningCli = startCli(["-c", file, "--config-from", `http://127.0.0.1:${(world.relay.address() as net.AddressInfo).port}`, "--config-poll", "250ms"], { env: { SLUICE_CONFIG_FROM_AUTH: "admin:model-pw" } });
    try {
      const apiPort = Number((await run.waitForLog((l) => l.msg === "management API listening")).port);
      const udpPort = (): number => Number([...run.logs].reverse().find((l) => l.msg === "udp server listening")?.port);
      await run.waitForLog((l) => l.msg === "configuration pulled from the primary");
      const status = async (): Promise<{ status: string; follow: Follow }> => (await fetch(`http://127.0.0.1:${apiPort}/api/reload/status`, { headers: AUTH })).json() as Promise<{ status: string; follow: Follow }>;
      const realOf = (label: string | null): string | null => (label === null ? null : (real.get(label)?.version ?? `unknown ${label}`));
      let polls = (await status()).follow.polls;

      for (let i = 1; i < steps.length; i++) {
        if (kind(steps[i].event) !== "poll") continue;
        // One poll cycle: the poll, what it fetched, and the apply when there is one.
        const fetchStep = steps[i + 1];
        const applyStep = steps[i + 2]?.event.type === "xstate.done.actor.apply" ? steps[i + 2] : null;
        // An applied version is then reloaded: the cycle ends when that reload has.
        const reloadStep = applyStep && steps[i + 3]?.event.type === "xstate.done.actor.reload" ? steps[i + 3] : null;
        const end = reloadStep ?? applyStep ?? fetchStep;
        const before = steps[i].snap.context;
        let busy: Promise<void> | null = null;
        let stopBusy = false;
        let held: HeldFile | null = null;
        const outcome = applyStep?.event.output?.outcome;
        const fetchKind = kind(fetchStep.event);
        const label = fetchStep.event.output?.version ?? "";
        if (fetchKind === "unreachable") {
          world.setDown(true);
        } else {
          world.setDown(false);
          if (outcome === "busy") {
            // Slow saves back to back on the replica, started before the primary changes, until this cycle
            // is over: the follower's SAVE finds the config actor busy.
            const include = new HeldFile(join(dir, `held-${Math.random().toString(36).slice(2)}.yaml`), "plugins: []\n");
            held = include;
            busy = (async () => {
              // A save the validation time limit cuts short is followed by the next one.
              while (!stopBusy) await (await fetch(`http://127.0.0.1:${apiPort}/api/config`, { method: "PUT", headers: { ...AUTH, "content-type": "application/json" }, body: heldSave(include.path) })).arrayBuffer();
            })();
            // The replica's config actor is saving (held) before the primary changes.
            const saving = async (): Promise<boolean> =>
              ((await (await fetch(`http://127.0.0.1:${apiPort}/api/actors`, { headers: AUTH })).json()) as { actors: { id: string; state: unknown }[] }).actors.some((a) => a.id === "config" && a.state === "saving");
            while (!(await saving())) await new Promise((r) => setTimeout(r, 20));
          }
          if (!real.has(label)) {
            const valid = outcome !== "refused";
            const text = content(label, valid);
            real.set(label, { version: await save(text), text, valid });
          } else {
            // "Unchanged": the primary holds the version the replica handled last.
            const want = real.get(label);
            if (want) await save(want.text);
          }
        }
        // Wait for the cycle: one more poll counted, the follower waiting again, and what this cycle leaves
        // (a poll that came between two preparations and found nothing new changes nothing it checks).
        const done = (f: Follow): boolean => {
          if (fetchKind === "unreachable") return /could not be read/.test(f.last_error ?? "");
          if (outcome === "busy") return /save was running|config_validation_busy/.test(f.last_error ?? "");
          if (outcome === "refused") return f.refused_version === real.get(label)?.version;
          if (outcome === "applied") return f.applied_version === real.get(label)?.version;
          return true;
        };
        let seen: Follow | null = null;
        const deadline = Date.now() + 15_000;
        while (Date.now() < deadline) {
          const f = (await status()).follow;
          if (f.polls > polls && f.state === "waiting" && done(f)) {
            seen = f;
            break;
          }
          await new Promise((r) => setTimeout(r, 50));
        }
        if (busy) {
          // The primary goes back to what the replica now holds, so polls until the slow save ends find nothing new.
          const back = real.get(end.snap.context.version ?? "v0");
          if (back) await save(back.text);
          stopBusy = true;
          held?.openAll();
          await busy;
          await held?.close();
        }
        expect(seen, `poll cycle at step ${i}`).not.toBeNull();
        const s = seen as Follow;
        polls = (await status()).follow.polls;
        const c = end.snap.context;
        expect({ state: s.state, version: s.version, applied_version: s.applied_version, refused_version: s.refused_version, error: s.last_error !== null }).toEqual({
          state: String(end.snap.value),
          version: realOf(c.version),
          applied_version: realOf(c.applied_version),
          refused_version: realOf(c.refused_version),
          error: c.last_error !== null,
        });
        if (outcome === "refused") expect((await status()).status).toBe("failed");
        // The follower waits again only once the reload it asked for has ended.
        if (reloadStep) expect((await status()).status).toBe("ok");
        if (outcome === "busy") expect(s.last_error).toMatch(/save was running|config_validation_busy/);
        if (fetchKind === "unreachable") expect(s.last_error).toMatch(/could not be read/);
        // DNS answers with the configuration applied last (a reload follows an apply).
        const applied = c.applied_version ?? before.applied_version ?? "v0";
        const n = Number(applied.slice(1));
        const ip = `10.0.${Math.floor(n / 250)}.${n % 250}`;
        const answerDeadline = Date.now() + 5000;
        let got: string[] = [];
        while (Date.now() < answerDeadline) {
          got = answerIps(await query(udpPort(), "x.test"));
          if (got[0] === ip) break;
          await new Promise((r) => setTimeout(r, 50));
        }
        expect(got).toEqual([ip]);
      }
    } finally {
      run.child.kill("SIGTERM");
      await run.exited;
      await world.close();
    }
  });
});
