// POST /api/restart, after the graceful shutdown: the same command line runs again.
// Where the runtime offers process.execve (Node ≥ 22.15 / 23.11) the process image is replaced and
// the PID is kept; otherwise (Node 20) a replacement process is started before this one exits.

import { spawn } from "node:child_process";

type Execve = (file: string, args: string[], env: NodeJS.ProcessEnv) => never;

/** Runs the program again with the original arguments, from the original working directory. */
export function replaceProcess(originalCwd: string): { pid: number | undefined; samePid: boolean } {
  const args = [...process.execArgv, ...process.argv.slice(1)];
  const execve = (process as unknown as { execve?: Execve }).execve;
  if (typeof execve === "function") {
    process.chdir(originalCwd);
    execve.call(process, process.execPath, [process.execPath, ...args], process.env);
  }
  const child = spawn(process.execPath, args, { cwd: originalCwd, env: process.env, stdio: "inherit" });
  child.unref();
  return { pid: child.pid, samePid: false };
}
