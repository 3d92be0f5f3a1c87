// Running `ipset` or `nft` without a shell: the program is found once, when the plugin is made (a
// missing program or another system than Linux fails the start, saying so), and each batch is one
// spawn with an argument array and the batch on stdin.

import { spawn } from "node:child_process";
import { accessSync, constants } from "node:fs";
import { delimiter, join } from "node:path";
import { ArgError } from "../../../registry/types.js";

/** A tool that has not finished by then is killed, and its batch counts as failed. */
export const TOOL_TIMEOUT_MS = 10_000;
/** Enough of stderr to say why. */
const MAX_STDERR = 4096;
/** Where Debian and others put ipset and nft, often not on a service user's PATH. */
const SBIN = ["/usr/sbin", "/sbin", "/usr/local/sbin"];

function executable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/**
 * The argv prefix to run: `command` as configured (its first word found on PATH, or a path resolved
 * against the working directory), or `fallback` found on PATH and in the sbin directories. Throws
 * when this is not Linux or the program is missing.
 */
export function resolveProgram(type: string, fallback: string, command: string[] | null, resolvePath: (p: string) => string, debianPackage: string): string[] {
  if (process.platform !== "linux") throw new Error(`${type} writes Linux kernel sets; this system is ${process.platform}`);
  const [program, ...rest] = command ?? [fallback];
  if (program.includes("/")) {
    const path = resolvePath(program);
    if (!executable(path)) throw new ArgError(`'${program}' (${path}) is not an executable file`, ["command"]);
    return [path, ...rest];
  }
  const dirs = [...(process.env.PATH ?? "").split(delimiter).filter((d) => d !== ""), ...SBIN];
  for (const dir of dirs) if (executable(join(dir, program))) return [join(dir, program), ...rest];
  const where = `PATH and ${SBIN.join(", ")}`;
  if (command !== null) throw new ArgError(`program '${program}' not found (looked in ${where})`, ["command"]);
  throw new Error(`${type} needs the '${program}' program, which is not installed (looked in ${where}); install the ${debianPackage} package, or set command`);
}

/** Runs `argv` with `input` on stdin; rejects with the tool's own words when it fails. */
export function runTool(argv: readonly string[], input: string, timeoutMs = TOOL_TIMEOUT_MS): Promise<void> {
  return new Promise((resolve, reject) => {
    const [program, ...args] = argv;
    const child = spawn(program, args, { stdio: ["pipe", "ignore", "pipe"] });
    let stderr = "";
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill("SIGKILL");
    }, timeoutMs);
    child.stderr.on("data", (d: Buffer) => {
      if (stderr.length < MAX_STDERR) stderr += d.toString("utf8", 0, Math.min(d.length, MAX_STDERR - stderr.length));
    });
    // A tool that exits before reading everything closes the pipe: its exit status says why.
    child.stdin.on("error", () => undefined);
    child.on("error", (err) => {
      clearTimeout(timer);
      reject(new Error(`${program}: ${err.message}`));
    });
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      if (timedOut) reject(new Error(`${program} did not finish within ${timeoutMs} ms (killed)`));
      else if (code === 0) resolve();
      else reject(new Error(`${program} ${signal !== null ? `was killed by ${signal}` : `exited with status ${String(code)}`}${stderr.trim() ? `: ${stderr.trim()}` : ""}`));
    });
    child.stdin.end(input);
  });
}
