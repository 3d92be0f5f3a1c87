// Model-based test of one configuration generation: the runtime machine (machines/runtime.machine.ts)
// with its plugin actors (machines/plugin.machine.ts) and their quick-setup children
// (machines/quick.machine.ts). @xstate/graph walks the runtime of a reload from its first plugin's
// creation to its end, and each path is replayed against a real Sluice. The first plugin reads a
// rule file that is a FIFO (HeldFile), so the build rests while it is created; the test ends that
// creation with a good or a broken rule file (the model's PLUGIN.READY / PLUGIN.FAILED), and retires
// an active generation with one more reload. What follows without the test (the other plugins, the
// servers, a drain) runs on its own: at every state where the model waits for the test, the real
// runtime, its plugins and their quick-setup children must be in the states the model says.
import { rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { getShortestPaths } from "@xstate/graph";
import type { AnyActorRef, AnyMachineSnapshot, SnapshotFrom } from "xstate";
import { afterAll, describe, expect, test } from "vitest";
import { runtimeMachine, type RuntimeEvent, type RuntimeHost } from "../../machines/runtime.machine.js";
import { pluginMachine } from "../../machines/plugin.machine.js";
import { quickMachine } from "../../machines/quick.machine.js";
import { startSluice, tempDir, type RunningSluice } from "../helpers/sluice.js";
import { HeldFile, until, withoutPrefixes } from "./harness.js";

type Snap = SnapshotFrom<typeof runtimeMachine>;
type ModelEvent = RuntimeEvent | { type: string; actorId?: string };

const ORDER = ["rules", "main", "udp"];
/** The traversal never starts the plugin actors it spawns; their host is never called. */
const idleHost: RuntimeHost = { order: ORDER, createPlugin: () => new Promise(() => {}), destroyPlugin: () => Promise.resolve(), start: () => Promise.resolve() };

const creating = (s: Snap): string | undefined => (s.matches("building") ? ORDER[s.context.next - 1] : undefined);
/** Where the runtime waits for the test: the rule file's creation, an active generation, an end. */
const rests = (s: Snap): boolean => creating(s) === "rules" || s.matches("active") || s.status === "done";

/** The test's events where the runtime rests; elsewhere the one event that follows on its own. */
function eventsFor(s: Snap): ModelEvent[] {
  const tag = creating(s);
  if (tag === "rules") return [{ type: "PLUGIN.READY", tag }, { type: "PLUGIN.FAILED", tag, error: new Error("bad rule") }];
  if (tag !== undefined) return [{ type: "PLUGIN.READY", tag }];
  if (s.matches("starting")) return [{ type: "xstate.done.actor.0.runtime.starting" }];
  if (s.matches("active")) return [{ type: "RUNTIME.RETIRE" }];
  const last = s.context.created.at(-1);
  if (last !== undefined) return [{ type: `xstate.done.actor.plugin:${last}`, actorId: `plugin:${last}` }];
  return [];
}

// Walked without a parent: what the runtime tells the app actor is checked on the real program instead.
const model = runtimeMachine.provide({ actions: { reportReady: () => undefined, reportFailed: () => undefined, reportGone: () => undefined } });
const paths = getShortestPaths(model, {
  input: { generation: 2, version: "v", host: idleHost },
  events: eventsFor as never,
  serializeState: (s) => JSON.stringify([s.value, s.context.next, s.context.created]),
});

const dir = tempDir("sluice-runtime-model-");
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const config = (rules: string, port: number): string => `
api:
  http: "127.0.0.1:0"
plugins:
  - { tag: rules, type: domain_set, args: { files: [${rules}] } }
  - tag: main
    type: sequence
    args:
      - { matches: "qname $rules", exec: reject 3 }
      - { exec: "forward 127.0.0.1:${port}" }
  - { tag: udp, type: udp_server, args: { entry: main, listen: "127.0.0.1:0" } }
`;

interface Seen {
  runtime: unknown;
  plugins: Record<string, unknown>;
  quick: unknown[];
}

/** The model's runtime, its plugins and the quick-setup child of `main`, as the real system should show them. */
function expected(s: Snap): Seen | null {
  if (s.status === "done") return null;
  const plugins: Record<string, unknown> = Object.fromEntries(s.context.created.map((t) => [t, "ready"]));
  const tag = creating(s);
  if (tag !== undefined) plugins[tag] = "creating";
  // main's two quick-setup instances: the matcher `qname $rules` and the executor `forward …`.
  return { runtime: s.value, plugins, quick: s.context.created.includes("main") ? ["ready", "ready"] : [] };
}

function seen(sluice: RunningSluice, g: number): Seen | null {
  const system = sluice.app.actor.system;
  const runtime = system.get(`runtime:${g}`) as AnyActorRef | undefined;
  const snap = runtime?.getSnapshot() as AnyMachineSnapshot | undefined;
  if (!snap || snap.status !== "active") return null;
  const plugins: Record<string, unknown> = {};
  let quick: unknown[] = [];
  for (const [id, child] of Object.entries(snap.children as Record<string, AnyActorRef | undefined>)) {
    const p = child?.getSnapshot() as AnyMachineSnapshot | undefined;
    if (!p || !id.startsWith("plugin:")) continue;
    plugins[id.slice("plugin:".length)] = p.value;
    if (id === "plugin:main") {
      quick = Object.entries(p.children as Record<string, AnyActorRef | undefined>)
        .filter(([cid]) => cid.startsWith("quick:"))
        .map(([, q]): unknown => (q?.getSnapshot() as AnyMachineSnapshot | undefined)?.value);
    }
  }
  return { runtime: snap.value, plugins, quick };
}

describe("configuration generation model", () => {
  const cases = paths.map((p, i) => {
    const steps = p.steps.map((s) => ({ event: s.event, snap: s.state }));
    return { name: `#${i} ${steps.slice(1).map((s) => `${s.event.type.replace("xstate.done.actor.", "done:")}→${JSON.stringify(s.snap.value)}`).join(" ")}`, steps };
  });
  const replayed = withoutPrefixes(cases, (c) => c.steps.map((s) => `${s.event.type} ${JSON.stringify(s.snap.value)}`));

  test("the generator reaches every runtime state, and the plugin and quick-setup states beside them", () => {
    const states = new Set(cases.flatMap((c) => c.steps.map((s) => JSON.stringify(s.snap.value))));
    // `unwinding` is passed through: the plugin that fails here is the first, so nothing is left to destroy.
    expect([...states].sort()).toEqual(['"active"', '"building"', '"destroyed"', '"draining"', '"failed"', '"starting"'].sort());
    // The plugin and quick machines have the states the replay checks (a rename here fails this test).
    expect(Object.keys(pluginMachine.root.states)).toEqual(expect.arrayContaining(["creating", "ready", "destroying", "destroyed", "failed"]));
    expect(Object.keys(quickMachine.root.states)).toEqual(["ready", "destroying"]);
  });

  test.each(replayed)("$name", async ({ steps }) => {
    const port = 9; // nothing is asked of the upstream: the test reads actors, not answers
    const first = join(dir, `rules-${Math.random().toString(36).slice(2)}.txt`);
    writeFileSync(first, "full:first.test\n");
    const s = await startSluice(config(first, port));
    const file = join(s.dir, "sluice.yaml");
    const held: HeldFile[] = [];
    let generation = 1;
    /** Starts a reload whose rule file is held: `ok` decides whether it parses. */
    const reload = async (ok: boolean): Promise<number> => {
      const h = new HeldFile(join(dir, `rules-${Math.random().toString(36).slice(2)}.txt`), ok ? "full:held.test\n" : "nokind:broken\n");
      held.push(h);
      writeFileSync(file, config(h.path, port));
      const res = await s.api("/api/reload", { method: "POST" });
      expect(res.status).toBe(202);
      generation++;
      return generation;
    };
    try {
      const g = await reload(steps.some((st) => st.event.type === "PLUGIN.READY"));
      for (let i = 0; i < steps.length; i++) {
        const { event, snap } = steps[i];
        if (event.type === "PLUGIN.READY" && (event as { tag?: string }).tag === "rules") held[0].grant();
        if (event.type === "PLUGIN.FAILED") held[0].grant();
        if (event.type === "RUNTIME.RETIRE") {
          // Another reload that succeeds retires this generation.
          const next = await reload(true);
          held.at(-1)?.grant();
          await until(`generation ${next} to serve`, () => (seen(s, next)?.runtime === "active" ? true : undefined));
        }
        if (!rests(snap)) continue;
        const want = expected(snap);
        let last: Seen | null = null;
        await until(`generation ${g} to be ${JSON.stringify(want)}`, () => {
          last = seen(s, g);
          return JSON.stringify(last) === JSON.stringify(want) ? true : undefined;
        }).catch((err: unknown) => {
          throw new Error(`${(err as Error).message}; it is ${JSON.stringify(last)}`);
        });
        if (snap.status === "done") {
          // Gone from the system with every plugin actor it had (their quick-setup children are theirs).
          expect(["", ...ORDER.map((t) => `/plugin:${t}`)].filter((id) => s.app.actor.system.get(`runtime:${g}${id}`) !== undefined)).toEqual([]);
        }
      }
    } finally {
      for (const h of held) h.openAll();
      await s.stop();
      for (const h of held) await h.close();
    }
  });
});
