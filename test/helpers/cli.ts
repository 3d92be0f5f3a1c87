// Runs the built program (dist/bundle, as bin/sluice does) as a child process, as an operator would.

import { spawn, type ChildProcess } from "node:child_process";
import { join } from "node:path";

export const CLI = join(import.meta.dirname, "..", "..", "dist", "bundle", "cli.js");

export interface CliResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/** `input`: written to the child's stdin, which then ends (without it, stdin stays open and unused). */
export function runCli(args: string[], options: { cwd?: string; env?: NodeJS.ProcessEnv; timeoutMs?: number; input?: string } = {}): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI, ...args], { cwd: options.cwd, env: { ...process.env, ...options.env } });
    if (options.input !== undefined) child.stdin.end(options.input);
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`sluice ${args.join(" ")} did not exit in time\n${stdout}\n${stderr}`));
    }, options.timeoutMs ?? 15_000);
    child.on("exit", (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr });
    });
  });
}

export interface RunningCli {
  child: ChildProcess;
  /** Parsed JSON log lines seen so far. */
  logs: Record<string, unknown>[];
  stderr(): string;
  /** Resolves with the first log line satisfying `pred`. */
  waitForLog(pred: (line: Record<string, unknown>) => boolean, timeoutMs?: number): Promise<Record<string, unknown>>;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/**
 * Starts `sluice start ...` and follows its JSON log on stdout. `openFiles` starts it under
 * `ulimit -n` (through sh, which execs node: the child's pid is node's); `launcher` runs an
 * installed release's bin/sluice instead of the checkout's dist/; `wrapper` runs all that through
 * another program (e.g. setpriv, as the Debian package's unit starts it).
 */
export function startCli(args: string[], options: { cwd?: string; env?: NodeJS.ProcessEnv; openFiles?: number; launcher?: string; wrapper?: string[] } = {}): RunningCli {
  const argv = [CLI, "start", ...args];
  const [command, commandArgs] =
    options.launcher !== undefined
      ? [options.launcher, ["start", ...args]]
      : options.openFiles === undefined
        ? [process.execPath, argv]
        : ["/bin/sh", ["-c", `ulimit -n ${options.openFiles} && exec "$0" "$@"`, process.execPath, ...argv]];
  // `wrapper`: a program that runs the command (setpriv ... as a service user), execing it: the pid stays.
  const [file, fileArgs] = options.wrapper ? [options.wrapper[0], [...options.wrapper.slice(1), command, ...commandArgs]] : [command, commandArgs];
  const child = spawn(file, fileArgs, { cwd: options.cwd, env: { ...process.env, ...options.env } });
  const logs: Record<string, unknown>[] = [];
  const waiters: { pred: (l: Record<string, unknown>) => boolean; resolve: (l: Record<string, unknown>) => void }[] = [];
  let partial = "";
  let err = "";
  child.stderr?.on("data", (d: Buffer) => (err += d.toString()));
  child.stdout?.on("data", (d: Buffer) => {
    partial += d.toString();
    const lines = partial.split("\n");
    partial = lines.pop() ?? "";
    for (const line of lines) {
      if (!line.trim()) continue;
      let parsed: Record<string, unknown>;
      try {
        parsed = JSON.parse(line) as Record<string, unknown>;
      } catch {
        parsed = { raw: line };
      }
      logs.push(parsed);
      for (const w of waiters.slice()) {
        if (w.pred(parsed)) {
          waiters.splice(waiters.indexOf(w), 1);
          w.resolve(parsed);
        }
      }
    }
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.on("exit", (code, signal) => resolve({ code, signal })));
  return {
    child,
    logs,
    stderr: () => err,
    exited,
    waitForLog(pred, timeoutMs = 10_000) {
      const seen = logs.find(pred);
      if (seen) return Promise.resolve(seen);
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`log line not seen in ${timeoutMs} ms; stderr: ${err}`)), timeoutMs);
        waiters.push({ pred, resolve: (l) => (clearTimeout(timer), resolve(l)) });
        void exited.then(() => reject(new Error(`process exited before the log line; stderr: ${err}`)));
      });
    },
  };
}
