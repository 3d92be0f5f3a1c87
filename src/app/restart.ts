// POST /api/restart (and the restart after an upgrade), after the graceful shutdown: the same
// command line runs again. Started by the launcher (bin/sluice), the launcher itself runs again, so
// it resolves <install_dir>/current anew and a restart after an upgrade runs the new release.
// Where the runtime offers process.execve (Node ≥ 22.15 / 23.11) the process image is replaced and
// the PID is kept; otherwise (Node 20) a replacement process is started before this one exits.
// SLUICE_RESTART=exit leaves the restart to a supervisor instead: the process exits with status 75.

import { spawn } from "node:child_process";

type Execve = (file: string, args: string[], env: NodeJS.ProcessEnv) => never;

/** Exit status that asks a supervisor (systemd Restart=always) to start the service again. */
export const RESTART_EXIT_STATUS = 75;

export type Handover = { kind: "spawned"; pid: number | undefined } | { kind: "exit"; status: number };

/** The program, its arguments and environment to run again. */
function command(): { file: string; args: string[]; env: NodeJS.ProcessEnv } {
  const launcher = process.env.SLUICE_LAUNCHER;
  if (launcher) {
    // The same node and node options, through the launcher.
    const env = { ...process.env, SLUICE_NODE: process.execPath, SLUICE_NODE_ARGS: process.execArgv.join(" ") };
    return { file: launcher, args: process.argv.slice(2), env };
  }
  return { file: process.execPath, args: [...process.execArgv, ...process.argv.slice(1)], env: process.env };
}

/** Runs the program again with the original arguments, from the original working directory. */
export function replaceProcess(originalCwd: string): Handover {
  if (process.env.SLUICE_RESTART === "exit") return { kind: "exit", status: RESTART_EXIT_STATUS };
  const { file, args, env } = command();
  const execve = (process as unknown as { execve?: Execve }).execve;
  if (typeof execve === "function") {
    process.chdir(originalCwd);
    execve.call(process, file, [file, ...args], env);
  }
  const child = spawn(file, args, { cwd: originalCwd, env, stdio: "inherit" });
  child.unref();
  return { kind: "spawned", pid: child.pid };
}
