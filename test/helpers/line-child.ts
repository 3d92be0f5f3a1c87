// A child process (a Node script of a load test) whose stdout is scanned line by line only while
// someone waits for a line; otherwise its output is drained unread, so a chatty child costs the
// test nothing.

import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";

export interface LineChild {
  proc: ChildProcessWithoutNullStreams;
  /** Resolves with the first stdout line matching `re` from now on (its match). */
  line(re: RegExp, timeoutMs?: number): Promise<RegExpMatchArray>;
  stop(): Promise<void>;
}

/** Runs `node ...args` with `env` added to this process's environment. */
export function lineChild(args: string[], env: NodeJS.ProcessEnv = {}): LineChild {
  const proc = spawn(process.execPath, args, { env: { ...process.env, ...env } });
  let buffered = "";
  let stderr = "";
  const waiters: { re: RegExp; resolve: (m: RegExpMatchArray) => void }[] = [];
  proc.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
  proc.stdout.on("data", (d: Buffer) => {
    if (waiters.length === 0) return;
    buffered += d.toString();
    const lines = buffered.split("\n");
    buffered = lines.pop() ?? "";
    for (const l of lines) {
      for (const w of waiters.slice()) {
        const m = w.re.exec(l);
        if (m) {
          waiters.splice(waiters.indexOf(w), 1);
          w.resolve(m);
        }
      }
    }
    if (waiters.length === 0) buffered = "";
  });
  const exited = new Promise<void>((r) => proc.on("exit", () => r()));
  return {
    proc,
    line: (re, timeoutMs = 15_000) =>
      new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`no line ${re} in ${timeoutMs} ms; stderr: ${stderr}`)), timeoutMs);
        waiters.push({ re, resolve: (m) => (clearTimeout(timer), resolve(m)) });
      }),
    stop: async () => {
      proc.kill("SIGKILL");
      await exited;
    },
  };
}
