// Shared by the model-based tests: configurations that build slowly (so a request can arrive while a
// generation is being built), reading state sequences from the program's log, and waiting.

import { writeFileSync } from "node:fs";
import { join } from "node:path";
import type { RunningCli } from "../helpers/cli.js";

/** Writes the rule file that makes building a generation slow: about 0.3 s per 100 000 lines. */
export function writeSlowRules(dir: string, lines: number): void {
  writeFileSync(join(dir, "big.txt"), Array.from({ length: lines }, (_, i) => `full:n${i}.big.test`).join("\n"));
}

/**
 * A configuration with an API and a UDP server. `slow` adds the big rule file; `broken` adds a hosts
 * plugin whose file is missing, created after the big set, so the build fails late; `invalid` names
 * a plugin type that does not exist, so the configuration is refused before anything is built.
 */
export function modelConfig(dir: string, opts: { apiListen: string; slow: boolean; broken: boolean; answer: number; invalid?: boolean }): string {
  if (opts.invalid) return `api:\n  http: "${opts.apiListen}"\nplugins:\n  - { tag: nope, type: no_such_type }\n`;
  return `
api:
  http: "${opts.apiListen}"
plugins:
${opts.slow ? `  - { tag: big, type: domain_set, args: { files: [${join(dir, "big.txt")}] } }\n` : ""}${opts.broken ? `  - { tag: zz_hosts, type: hosts, args: { files: [${join(dir, "missing-hosts.txt")}] } }\n` : ""}  - tag: main
    type: sequence
    args:
${opts.slow ? "      - { matches: \"qname $big\", exec: reject 3 }\n" : ""}${opts.broken ? "      - { exec: $zz_hosts }\n" : ""}      - exec: reject ${opts.answer}
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
