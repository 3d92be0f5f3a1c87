// Model-based test of the auth state file writer (machines/auth-state.machine.ts): @xstate/graph gives
// the shortest path to every state (idle; touched, after a touch or a failed write; writing with or
// without requests it answers, requests asked meanwhile, touches meanwhile, an error before it), each
// extended by every event possible there, and each path is replayed against the real machine provided
// with the real write: the service's (src/api/auth/service.ts) — the tokens and sessions of a real
// Credentials, serialized when the write begins, replaceFileAtomically'd into a real file, mode 0600.
// Each write is held inside replaceFileAtomically (its temp file open) until the step that ends it,
// which lets it finish or makes it fail; the touch delay runs on xstate's SimulatedClock.
// A save is a token made (then AUTH.SAVE), a touch a token checked (its last use changes).
// After every step: the actor's state and context are the model's, as many writes began as the model
// says, the file holds the content of the last write that finished (nothing before the first), every
// request is answered once it is out of the model's lists and not before; and whenever an answer comes,
// a write that began after its request was asked has just finished, and the file holds every token
// saved up to that request.
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { getShortestPaths } from "@xstate/graph";
import { createActor, fromPromise, getInitialSnapshot, getNextSnapshot, SimulatedClock, type SnapshotFrom } from "xstate";
import { afterAll, describe, expect, test } from "vitest";
import { authStateMachine, type AuthStateEvent } from "../../machines/auth-state.machine.js";
import type { Answer } from "../../machines/concern.js";
import { Credentials, type TokenRecord } from "../../src/api/auth/credentials.js";
import { replaceFileAtomically } from "../../src/config/atomic-file.js";
import { withoutPrefixes } from "./harness.js";

type Snap = SnapshotFrom<typeof authStateMachine>;
type ModelEvent = AuthStateEvent | { type: typeof DONE } | { type: typeof FAILED; error: Error } | { type: typeof AFTER };
type Labelled = ModelEvent & { label: string };

const DONE = "xstate.done.actor.0.auth-state.writing";
const FAILED = "xstate.error.actor.0.auth-state.writing";
const AFTER = "xstate.after.touchDelay.auth-state.touched";
const DELAY = 60_000;
/** A touch comes this long after the step before it (the clock moves; a touch in `touched` must not restart the delay). */
const TOUCH_GAP = 1000;
const FAILURE = "No space left on device (held write made to fail)";
const input = { touchDelayMs: DELAY };

/** The model's write never ends by itself: the done and error events say when. */
const model = authStateMachine.provide({ actors: { write: fromPromise(() => new Promise<void>(() => undefined)) } });

const stateOf = (s: Snap): string => {
  const c = s.context;
  const err = c.last_error === null ? "" : "+error";
  if (s.value !== "writing") return `${String(s.value)}${err}`;
  return `writing(${c.writing.length > 0 ? "asked" : "none"},${c.next.length > 0 ? "next" : "-"},${c.touched ? "touched" : "-"})${err}`;
};

function eventsFor(s: Snap, id = "g"): Labelled[] {
  const save: Labelled = { type: "AUTH.SAVE", requestId: `${id}s`, label: "SAVE" };
  const flush: Labelled = { type: "AUTH.FLUSH", requestId: `${id}f`, label: "FLUSH" };
  const touch: Labelled = { type: "AUTH.TOUCHED", label: "TOUCHED" };
  switch (s.value) {
    case "idle":
      return [save, touch, flush];
    case "touched":
      return [save, touch, flush, { type: AFTER, label: "touch delay" }];
    default:
      return [save, touch, flush, { type: DONE, label: "written" }, { type: FAILED, error: new Error(FAILURE), label: "failed" }];
  }
}

interface Step {
  label: string;
  event: Labelled;
  from: Snap;
  state: Snap;
}

/** A path's steps made again from the start (each request with an id of its own), checked to lead through the same states. */
function walk(labels: string[], states: string[]): Step[] {
  let snap = getInitialSnapshot(model, input);
  return labels.map((label, i) => {
    const event = eventsFor(snap, `r${i}`).find((e) => e.label === label);
    if (event === undefined) throw new Error(`no ${label} in ${stateOf(snap)}`);
    const from = snap;
    snap = getNextSnapshot(model, snap, event as never);
    if (stateOf(snap) !== states[i]) throw new Error(`${label} from ${stateOf(from)} led to ${stateOf(snap)}, not ${states[i]}`);
    return { label, event, from, state: snap };
  });
}

const shortest = getShortestPaths(model, { input, events: (s) => eventsFor(s) as never, serializeState: (s) => stateOf(s) });
const extended = shortest.flatMap((p) => {
  const last = p.steps[p.steps.length - 1].state;
  const steps = p.steps.slice(1).map((st) => ({ label: (st.event as Labelled).label, state: stateOf(st.state) }));
  return eventsFor(last).map((event) => walk([...steps.map((st) => st.label), event.label], [...steps.map((st) => st.state), stateOf(getNextSnapshot(model, last, event as never))]));
});
const stepName = (st: Step): string => `${st.label}→${stateOf(st.state)}`;
const paths = withoutPrefixes(extended, (p) => p.map(stepName));

/** A step begins a write when it enters `writing`, or ends one and stays there (the next write). */
const beginsWrite = (st: Step): boolean => st.state.value === "writing" && (st.from.value !== "writing" || st.event.type === DONE || st.event.type === FAILED);

const dir = mkdtempSync(join(tmpdir(), "auth-state-model-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let pathNo = 0;

/** One write of the real actor, held until the test lets it end. */
interface HeldWrite {
  index: number;
  content: string;
  /** Resolves once the write is inside replaceFileAtomically, its temp file open. */
  reached: Promise<void>;
  release(ok: boolean): void;
  /** Resolves when replaceFileAtomically has returned or thrown. */
  settled: Promise<void>;
  outcome: "written" | "failed" | null;
}

interface Asked {
  type: "AUTH.SAVE" | "AUTH.FLUSH";
  /** Writes begun before it was asked. */
  begunBefore: number;
  /** Tokens saved up to this request (its own, for a save). */
  tokens: string[];
  atOnce: boolean;
  answers: Answer[];
}

/** The real actor with the service's write, on a simulated clock. */
function realActor(file: string) {
  const clock = new SimulatedClock();
  clock.set(1_700_000_000_000);
  const credentials = new Credentials(() => clock.now());
  const writes: HeldWrite[] = [];
  let lastFinished: HeldWrite | null = null;
  const write = fromPromise(async () => {
    // As the service does: the content is what the credentials hold when the write begins.
    const content = credentials.serialize();
    let reached = (): void => undefined;
    let release: (ok: boolean) => void = () => undefined;
    let settle = (): void => undefined;
    const gate = new Promise<boolean>((r) => (release = r));
    const w: HeldWrite = { index: writes.length, content, reached: new Promise((r) => (reached = r)), release: (ok) => release(ok), settled: new Promise((r) => (settle = r)), outcome: null };
    writes.push(w);
    try {
      await replaceFileAtomically(
        file,
        async (handle) => {
          reached();
          if (!(await gate)) throw new Error(FAILURE);
          await handle.writeFile(content);
        },
        "auth",
        { mode: 0o600 },
      );
      w.outcome = "written";
    } catch (err) {
      w.outcome = "failed";
      throw err;
    } finally {
      lastFinished = w;
      settle();
    }
  });
  const actor = createActor(authStateMachine.provide({ actors: { write } }), { input, clock });
  return { actor, clock, credentials, writes, lastFinished: () => lastFinished };
}

/** The token names in the file now (read by a Credentials of its own, as a restart would). */
function tokensInFile(file: string): string[] {
  const c = new Credentials(() => 0);
  c.load(file);
  return c.activeTokens().map((t) => t.name);
}

const fileText = (file: string): string => readFileSync(file, "utf8");

const settle = (): Promise<void> => new Promise((r) => setImmediate(r));

describe("auth state file writer model", () => {
  test("the generator reaches every state and takes every transition", () => {
    const states = new Set(paths.flatMap((p) => p.map((st) => stateOf(st.state))));
    expect([...states].sort()).toEqual(
      [
        "idle",
        "touched",
        "touched+error",
        "writing(asked,-,-)",
        "writing(asked,-,touched)",
        "writing(asked,next,-)",
        "writing(asked,next,touched)",
        "writing(none,-,-)",
        "writing(none,-,touched)",
        "writing(none,next,-)",
        "writing(none,next,touched)",
        "writing(asked,-,-)+error",
        "writing(asked,-,touched)+error",
        "writing(asked,next,-)+error",
        "writing(asked,next,touched)+error",
        "writing(none,-,-)+error",
        "writing(none,-,touched)+error",
        "writing(none,next,-)+error",
        "writing(none,next,touched)+error",
      ].sort(),
    );
    const edges = new Set(paths.flatMap((p) => p.map((st) => `${String(st.from.value)} ${st.label}→${String(st.state.value)}`)));
    expect([...edges].sort()).toEqual(
      [
        "idle SAVE→writing",
        "idle TOUCHED→touched",
        "idle FLUSH→idle",
        "touched SAVE→writing",
        "touched FLUSH→writing",
        "touched TOUCHED→touched",
        "touched touch delay→writing",
        "writing SAVE→writing",
        "writing FLUSH→writing",
        "writing TOUCHED→writing",
        "writing written→writing",
        "writing written→touched",
        "writing written→idle",
        "writing failed→writing",
        "writing failed→touched",
      ].sort(),
    );
    // Nothing asked is ever refused (the API maps no guard of this actor); only a touch while the delay
    // already runs is not taken (it does not start the delay again).
    for (const p of paths) {
      for (const st of p) {
        for (const e of eventsFor(st.state)) expect(st.state.can(e as never), `${stateOf(st.state)} ${e.label}`).toBe(st.state.value !== "touched" || e.type !== "AUTH.TOUCHED");
      }
    }
  });

  test.each(paths.map((p) => ({ name: p.map(stepName).join(", "), steps: p })))("$name", async ({ steps }) => {
    const file = join(dir, `auth-${++pathNo}.json`);
    const real = realActor(file);
    const { actor, clock, credentials, writes } = real;
    // The file the service found at start (its credentials loaded from it), with a token the touches use.
    const base = credentials.createToken({ name: "base", role: "viewer", scopes: null, expires_at_ms: null, created_by: "test" });
    await replaceFileAtomically(file, credentials.serialize(), "auth", { mode: 0o600 });
    const saved: string[] = [];
    const asked = new Map<string, Asked>();
    const problems: string[] = [];
    actor.on("answer", (a) => {
      const q = asked.get(a.requestId);
      if (!q) return void problems.push(`an answer to ${a.requestId}, never asked`);
      q.answers.push(a);
      const w = real.lastFinished();
      if (!q.atOnce && (w === null || w.index < q.begunBefore)) problems.push(`${a.requestId} answered with no write begun after it finished`);
      if (a.ok) {
        if (!q.atOnce && w?.outcome !== "written") problems.push(`${a.requestId} answered ok after a failed write`);
        // The file holds the change of this request and of every one before it, the moment it is answered.
        const inFile = tokensInFile(file);
        const missing = q.tokens.filter((t) => !inFile.includes(t));
        if (missing.length > 0) problems.push(`${a.requestId} answered while the file lacks ${missing.join(", ")}`);
      } else if (w?.outcome !== "failed" || (a.error as Error).message !== FAILURE) problems.push(`${a.requestId} failed but its write did not`);
    });
    actor.start();
    let begun = 0;
    let lastWritten = fileText(file);
    let touchedAt = 0;
    try {
      for (const st of steps) {
        const { event, from, state } = st;
        switch (event.type) {
          case "AUTH.SAVE":
          case "AUTH.FLUSH":
            if (event.type === "AUTH.SAVE") {
              credentials.createToken({ name: event.requestId, role: "operator", scopes: null, expires_at_ms: null, created_by: "test" });
              saved.push(event.requestId);
            }
            asked.set(event.requestId, { type: event.type, begunBefore: writes.length, tokens: [...saved], atOnce: from.value === "idle" && event.type === "AUTH.FLUSH", answers: [] });
            actor.send({ type: event.type, requestId: event.requestId });
            break;
          case "AUTH.TOUCHED":
            // Time passes between a request and the next (in `touched` it counts toward the delay).
            clock.increment(TOUCH_GAP);
            expect(credentials.checkToken(base.secret).ok).toBe(true);
            actor.send({ type: "AUTH.TOUCHED" });
            break;
          case AFTER:
            // The delay counts from entering `touched`, whatever touches came since.
            clock.increment(touchedAt + DELAY - clock.now() - 1);
            expect([actor.getSnapshot().value, writes.length]).toEqual(["touched", begun]);
            clock.increment(1);
            break;
          case DONE:
          case FAILED: {
            const w = writes[writes.length - 1];
            w.release(event.type === DONE);
            await w.settled;
            // The done event reaches the actor from the promise's settlement.
            await settle();
            if (event.type === DONE) lastWritten = w.content;
            break;
          }
        }
        if (beginsWrite(st)) begun++;
        if (state.value === "touched" && from.value !== "touched") touchedAt = clock.now();
        const snap = actor.getSnapshot();
        expect({ state: snap.value, context: snap.context }).toEqual({ state: state.value, context: state.context });
        expect(writes.length, "writes begun").toBe(begun);
        if (state.value === "writing") {
          // The write runs now: held inside replaceFileAtomically, its temp file beside the target.
          await writes[writes.length - 1].reached;
          expect(readdirSync(dir).filter((f) => f.startsWith(`.auth-${pathNo}.json.auth-`))).toHaveLength(1);
        } else expect(readdirSync(dir).filter((f) => f.startsWith(`.auth-${pathNo}.json.`))).toEqual([]);
        expect(fileText(file), "the file holds the last write that finished").toBe(lastWritten);
        expect(statSync(file).mode & 0o777).toBe(0o600);
        // In idle nothing is left unwritten: the file is the credentials as they are now.
        if (state.value === "idle") expect(fileText(file)).toBe(credentials.serialize());
        // Answered: every request asked that the model no longer holds, once each; the others not yet.
        const waiting = new Set([...state.context.writing, ...state.context.next]);
        for (const [id, q] of asked) expect(q.answers.length, `answers to ${id}`).toBe(waiting.has(id) ? 0 : 1);
        expect(problems).toEqual([]);
      }
      // Let the rest finish: every request is then answered once, and the file holds everything.
      for (let i = 0; i < 10 && actor.getSnapshot().value !== "idle"; i++) {
        if (actor.getSnapshot().value === "touched") {
          // To the millisecond again: a path may end with a touch while the delay runs.
          clock.increment(touchedAt + DELAY - clock.now() - 1);
          expect(actor.getSnapshot().value).toBe("touched");
          clock.increment(1);
          expect(actor.getSnapshot().value).toBe("writing");
        }
        const w = writes[writes.length - 1];
        w.release(true);
        await w.settled;
        await settle();
        if (actor.getSnapshot().value === "touched") touchedAt = clock.now();
      }
      expect(actor.getSnapshot().value).toBe("idle");
      for (const [id, q] of asked) expect(q.answers.map((a) => a.ok), id).toHaveLength(1);
      expect(problems).toEqual([]);
      expect(fileText(file)).toBe(credentials.serialize());
      expect(tokensInFile(file).sort()).toEqual(["base", ...saved].sort());
      const touchedFile = JSON.parse(fileText(file)) as { tokens: TokenRecord[] };
      expect(touchedFile.tokens.find((t) => t.name === "base")?.last_used_at_ms).toBe(credentials.activeTokens().find((t) => t.name === "base")?.last_used_at_ms);
    } finally {
      for (const w of writes) w.release(false);
      actor.stop();
    }
  });

  test("idle waits for nothing: no timer runs and nothing is written however long; a flush there is answered at once", () => {
    const real = realActor(join(dir, "idle.json"));
    const answers: Answer[] = [];
    real.actor.on("answer", (a) => answers.push(a));
    real.actor.start();
    real.clock.increment(100 * DELAY);
    real.actor.send({ type: "AUTH.FLUSH", requestId: "f" });
    expect([real.actor.getSnapshot().value, real.writes.length, answers]).toEqual(["idle", 0, [{ type: "answer", requestId: "f", ok: true, output: null }]]);
    real.actor.stop();
  });
});
