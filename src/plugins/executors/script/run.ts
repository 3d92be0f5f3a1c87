// One run of a `script` program: spawned without a shell in a process group of its own, the query as
// JSON on stdin, stdout and stderr captured up to a cap (the rest read and discarded, so the program
// never blocks on a full pipe), and at the deadline — or when the plugin goes away — the whole group
// killed with SIGKILL.

import { spawn } from "node:child_process";
import { accessSync, constants, statSync } from "node:fs";
import { delimiter, isAbsolute, join } from "node:path";

export interface RunSpec {
  command: string;
  args: string[];
  env: NodeJS.ProcessEnv;
  cwd: string | undefined;
  input: string;
  timeoutMs: number;
  maxOutputBytes: number;
  signal: AbortSignal;
}

export interface RunResult {
  /** Exit code; null when a signal ended the program. */
  code: number | null;
  signal: NodeJS.Signals | null;
  timedOut: boolean;
  cancelled: boolean;
  stdout: string;
  stderr: string;
  /** Output past max_output_bytes was discarded. */
  truncated: boolean;
}

/** After the program exits, how long its pipes may stay open (held by a child it left running). */
const PIPE_GRACE_MS = 100;

/** Collects up to `cap` bytes of a stream and reads (and drops) the rest. */
function capture(stream: NodeJS.ReadableStream, cap: number): { text: () => string; truncated: () => boolean } {
  const chunks: Buffer[] = [];
  let kept = 0;
  let over = false;
  stream.on("data", (chunk: Buffer) => {
    if (kept >= cap) {
      over = true;
      return;
    }
    const part = chunk.length > cap - kept ? chunk.subarray(0, cap - kept) : chunk;
    if (part.length < chunk.length) over = true;
    chunks.push(part);
    kept += part.length;
  });
  stream.on("error", () => undefined);
  return { text: () => Buffer.concat(chunks).toString("utf8"), truncated: () => over };
}

/** Kills the program's whole process group (what it started too). */
function killGroup(pid: number | undefined): void {
  if (pid === undefined) return;
  try {
    process.kill(-pid, "SIGKILL");
  } catch {
    try {
      process.kill(pid, "SIGKILL");
    } catch {
      // already gone
    }
  }
}

/** Runs the program; rejects only when it cannot be started (ENOENT, EACCES, ...). */
export function runProgram(spec: RunSpec): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    if (spec.signal.aborted) {
      resolve({ code: null, signal: null, timedOut: false, cancelled: true, stdout: "", stderr: "", truncated: false });
      return;
    }
    const child = spawn(spec.command, spec.args, { cwd: spec.cwd, env: spec.env, stdio: ["pipe", "pipe", "pipe"], detached: true, windowsHide: true });
    const out = capture(child.stdout, spec.maxOutputBytes);
    const err = capture(child.stderr, spec.maxOutputBytes);
    let timedOut = false;
    let cancelled = false;
    let exit: { code: number | null; signal: NodeJS.Signals | null } | null = null;
    let settled = false;
    const timer = setTimeout(() => {
      timedOut = true;
      killGroup(child.pid);
    }, spec.timeoutMs);
    const onAbort = (): void => {
      cancelled = true;
      killGroup(child.pid);
    };
    spec.signal.addEventListener("abort", onAbort, { once: true });
    const done = (): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      spec.signal.removeEventListener("abort", onAbort);
    };
    child.on("error", (e) => {
      done();
      reject(e);
    });
    child.on("exit", (code, signal) => {
      exit = { code, signal };
      // A program that left a child holding its stdout would keep "close" from coming.
      setTimeout(() => {
        child.stdout.destroy();
        child.stderr.destroy();
      }, PIPE_GRACE_MS).unref();
    });
    child.on("close", () => {
      if (exit === null) return;
      done();
      resolve({ ...exit, timedOut, cancelled, stdout: out.text(), stderr: err.text(), truncated: out.truncated() || err.truncated() });
    });
    child.stdin.on("error", () => undefined); // a program that does not read its stdin
    child.stdin.end(spec.input);
  });
}

/** Why `command` cannot be run, or null: a path must be an executable file; a bare name must be one on PATH. */
export function commandProblem(command: string, env: NodeJS.ProcessEnv): string | null {
  const executable = (path: string): boolean => {
    try {
      accessSync(path, constants.X_OK);
      return statSync(path).isFile();
    } catch {
      return false;
    }
  };
  if (command.includes("/")) return executable(command) ? null : `${command} is not an executable file`;
  const dirs = (env.PATH ?? "").split(delimiter).filter((d) => d !== "" && isAbsolute(d));
  return dirs.some((d) => executable(join(d, command))) ? null : `'${command}' is not found on PATH`;
}
