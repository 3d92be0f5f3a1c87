// Shared by the model-based tests: configurations whose build waits for the test (so a request can
// arrive while a generation is being built), reading state sequences from the program's log, and waiting.

import { execFileSync } from "node:child_process";
import { closeSync, constants, openSync } from "node:fs";
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import type { RunningCli } from "../helpers/cli.js";

/**
 * A rule file (a FIFO) that a generation's build reads and waits on: opening it for reading blocks
 * until the test grants a read, so a build lasts exactly until the test lets it finish — no CPU spent
 * making it slow, and no guess of how long is long enough. Each grant serves one reader; `openAll`
 * serves every reader from then on (for replacements a restart starts).
 */
export class HeldFile {
  private grants = 0;
  private all = false;
  private pumping = false;
  private closed = false;

  constructor(
    readonly path: string,
    private readonly content = "full:held.test\n",
  ) {
    execFileSync("mkfifo", ["-m", "600", path]);
  }

  /** Lets one more reader (one build) through. */
  grant(): void {
    this.grants++;
    void this.pump();
  }

  /** Lets every reader through from now on. */
  openAll(): void {
    this.all = true;
    void this.pump();
  }

  private async pump(): Promise<void> {
    if (this.pumping) return;
    this.pumping = true;
    // Opening for writing blocks (on a libuv thread) until a reader opens; the reader gets the content, then EOF.
    while (!this.closed && (this.all || this.grants > 0)) {
      try {
        await writeFile(this.path, this.content);
      } catch {
        // The reader went away before reading (a process killed at the end of a path): serve the next.
        await new Promise((r) => setTimeout(r, 5));
        continue;
      }
      if (!this.all) this.grants--;
    }
    this.pumping = false;
  }

  /** Stops serving; a write still waiting for a reader gets one (this), so its thread is freed. */
  async close(): Promise<void> {
    this.closed = true;
    if (!this.pumping) return;
    const fd = openSync(this.path, constants.O_RDONLY | constants.O_NONBLOCK);
    try {
      while (this.pumping) await new Promise((r) => setTimeout(r, 5));
    } finally {
      closeSync(fd);
    }
  }
}

/**
 * A configuration with an API and a UDP server. `held` adds a domain set read from that file (a
 * HeldFile), so the build waits for the test; `broken` adds a hosts plugin whose file is missing,
 * created after that set, so the build fails late; `invalid` names a plugin type that does not exist,
 * so the configuration is refused before anything is built.
 */
export function modelConfig(dir: string, opts: { apiListen: string; held: string | null; broken: boolean; answer: number; invalid?: boolean }): string {
  if (opts.invalid) return `api:\n  http: "${opts.apiListen}"\nplugins:\n  - { tag: nope, type: no_such_type }\n`;
  return `
api:
  http: "${opts.apiListen}"
plugins:
${opts.held !== null ? `  - { tag: big, type: domain_set, args: { files: [${opts.held}] } }\n` : ""}${opts.broken ? `  - { tag: zz_hosts, type: hosts, args: { files: [${join(dir, "missing-hosts.txt")}] } }\n` : ""}  - tag: main
    type: sequence
    args:
${opts.held !== null ? "      - { matches: \"qname $big\", exec: reject 3 }\n" : ""}${opts.broken ? "      - { exec: $zz_hosts }\n" : ""}      - exec: reject ${opts.answer}
  - { tag: udp, type: udp_server, args: { entry: main, listen: "127.0.0.1:0" } }
`;
}

/** The states an actor (app or reload) went through, from the program's "state changed" log lines. */
export function observedStates(run: RunningCli, actor: "app" | "reload"): string[] {
  return run.logs.filter((l) => l.msg === "state changed" && l.actor === actor).map((l) => String(l.state));
}

/** Consecutive repeats collapse: the log shows changes of state value only. */
export function collapse(states: string[]): string[] {
  return states.filter((s, i) => i === 0 || s !== states[i - 1]);
}

export async function until<T>(what: string, fn: () => T | undefined | false, timeoutMs = 15_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = fn();
    if (v !== undefined && v !== false) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** Waits until `actor` has shown at least as many states as `want`, then returns what it showed. */
export async function statesAtLeast(run: RunningCli, actor: "app" | "reload", want: string[]): Promise<string[]> {
  return until(`${actor} states ${want.join(" → ")}`, () => {
    const s = observedStates(run, actor);
    return s.length >= want.length ? s : undefined;
  });
}

/**
 * The paths that are not a prefix of another (nor a copy of one): a test that checks after every step
 * covers, with a longer path, every step of each of its prefixes, so replaying the prefixes again
 * against a real process only costs time. `steps` names each step of a path (its event and the state it leads to).
 */
export function withoutPrefixes<T>(paths: T[], steps: (path: T) => string[]): T[] {
  const keys = paths.map((p) => steps(p).join("\n"));
  return paths.filter((_, i) => !keys.some((other, j) => j !== i && (other.startsWith(`${keys[i]}\n`) || (other === keys[i] && j < i))));
}

/**
 * Walks from the start state that, between them, take every transition named in `cover` — for a model
 * test whose every path starts a process: replaying the shortest path to each transition starts one
 * process per transition, while a walk that goes on from where the last transition left it reaches
 * the next in a step or two. Greedy: the walk to extend is the one that reaches a transition no walk
 * has taken yet in the fewest steps (the shorter walk on a tie, so `walks` walks grow side by side);
 * a transition no walk can reach any more (one reachable only before a step that cannot be undone)
 * starts a new walk. `key` names the transition into `s` by `e` from `prev` (the model's serializer).
 * Throws when a transition of `cover` cannot be reached from the start within `maxDepth` steps.
 */
export function coveringWalks<S, E>(opts: {
  start: S;
  events: (s: S) => E[];
  next: (s: S, e: E) => S;
  key: (s: S, e: E, prev: S) => string;
  cover: Iterable<string>;
  walks: number;
  maxDepth?: number;
}): E[][] {
  const left = new Set(opts.cover);
  const maxDepth = opts.maxDepth ?? 12;
  /** The fewest events from `from` to a transition still in `left`, or null. */
  const nearest = (from: S): E[] | null => {
    let frontier: { s: S; path: E[] }[] = [{ s: from, path: [] }];
    const seen = new Set<string>();
    for (let depth = 0; depth < maxDepth && frontier.length > 0; depth++) {
      const nextFrontier: { s: S; path: E[] }[] = [];
      for (const { s, path } of frontier) {
        for (const e of opts.events(s)) {
          const to = opts.next(s, e);
          const k = opts.key(to, e, s);
          if (left.has(k)) return [...path, e];
          if (seen.has(k)) continue;
          seen.add(k);
          nextFrontier.push({ s: to, path: [...path, e] });
        }
      }
      frontier = nextFrontier;
    }
    return null;
  };
  const walks: { end: S; events: E[] }[] = Array.from({ length: opts.walks }, () => ({ end: opts.start, events: [] }));
  while (left.size > 0) {
    let best: { walk: { end: S; events: E[] }; path: E[] } | null = null;
    for (const walk of walks) {
      const path = nearest(walk.end);
      if (path && (!best || path.length < best.path.length || (path.length === best.path.length && walk.events.length < best.walk.events.length))) best = { walk, path };
    }
    if (!best) {
      const fresh = { end: opts.start, events: [] as E[] };
      if (!nearest(fresh.end)) throw new Error(`not reachable in ${maxDepth} steps: ${[...left].join(", ")}`);
      walks.push(fresh);
      continue;
    }
    for (const e of best.path) {
      const to = opts.next(best.walk.end, e);
      left.delete(opts.key(to, e, best.walk.end));
      best.walk.events.push(e);
      best.walk.end = to;
    }
  }
  return walks.filter((w) => w.events.length > 0).map((w) => w.events);
}
