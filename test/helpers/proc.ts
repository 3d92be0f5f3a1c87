// Sluice as a child process, and what /proc says about it: resident memory, CPU time, open
// file descriptors, threads' priorities.

import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startCli, type RunningCli } from "./cli.js";

/** Resident set size in MiB (VmRSS). */
export function rssMb(pid: number): number {
  const m = /^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  if (!m) throw new Error(`no VmRSS for pid ${pid}`);
  return Number(m[1]) / 1024;
}

/** User plus system CPU time in ms (utime and stime from /proc/<pid>/stat, at 100 ticks per second). */
export function cpuMs(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  // Fields after the command name (which may hold spaces) start at state, field 3.
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

export function openFds(pid: number): number {
  return readdirSync(`/proc/${pid}/fd`).length;
}

export interface ChildSluice {
  pid: number;
  cli: RunningCli;
  /** Port of a server plugin by tag. */
  port(tag: string): number;
  apiUrl: string;
  stop(): Promise<void>;
}

/** Runs `yaml` in a child process (optionally under `ulimit -n openFiles`) and waits until it serves. */
export async function startChild(yaml: string, options: { openFiles?: number } = {}): Promise<ChildSluice> {
  const dir = mkdtempSync(join(tmpdir(), "sluice-child-"));
  writeFileSync(join(dir, "sluice.yaml"), yaml);
  const cli = startCli(["-c", "sluice.yaml", "-d", dir], { cwd: dir, openFiles: options.openFiles });
  await cli.waitForLog((l) => l.msg === "sluice started", 15_000);
  const pid = cli.child.pid;
  if (pid === undefined) throw new Error("no pid");
  const api = cli.logs.find((l) => l.msg === "management API listening");
  return {
    pid,
    cli,
    port(tag) {
      const line = cli.logs.find((l) => l.target === `plugin:${tag}` && typeof l.port === "number");
      if (!line) throw new Error(`no listening line for '${tag}'`);
      return line.port as number;
    },
    apiUrl: api ? `http://127.0.0.1:${api.port as number}` : "",
    async stop() {
      if (cli.child.exitCode === null && cli.child.signalCode === null) {
        cli.child.kill("SIGTERM");
        const timer = setTimeout(() => cli.child.kill("SIGKILL"), 5_000);
        await cli.exited;
        clearTimeout(timer);
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** One sample of a Prometheus text exposition: the value of `name{labels…}` (labels matched as a substring). */
export function metricValue(text: string, name: string, labels = ""): number {
  for (const line of text.split("\n")) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
    if (labels && !line.includes(labels)) continue;
    return Number(line.slice(line.lastIndexOf(" ") + 1));
  }
  return NaN;
}

/** Nice value and scheduling policy of every thread of `pid` (fields 19 and 41 of /proc/<pid>/task/<tid>/stat). */
export function threadPriorities(pid: number): { nice: number; policy: number }[] {
  return readdirSync(`/proc/${pid}/task`).map((tid) => {
    const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, "utf8");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return { nice: Number(fields[16]), policy: Number(fields[38]) };
  });
}

/** Linux's SCHED_IDLE. */
export const SCHED_IDLE = 5;
