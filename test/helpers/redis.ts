// A real redis-server for tests: its own port on 127.0.0.1 and its own temp directory, no
// persistence, stopped (or killed, paused, restarted on the same port) by the test through its PID.

import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort } from "./ports.js";
import { requireTool } from "./tools.js";

/** Throws with the package to install when redis-server is missing (npm test installs it). */
export function requireRedis(): void {
  requireTool("redis-server");
}

function canConnect(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const c = net.connect(port, "127.0.0.1");
    c.once("connect", () => {
      c.destroy();
      resolve(true);
    });
    c.once("error", () => resolve(false));
  });
}

export class RedisServer {
  private proc: ChildProcess | null = null;
  private constructor(
    readonly port: number,
    readonly dir: string,
  ) {}

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  get pid(): number | undefined {
    return this.proc?.pid;
  }

  static async start(): Promise<RedisServer> {
    requireRedis();
    const dir = mkdtempSync(join(tmpdir(), "sluice-redis-"));
    for (let attempt = 0; ; attempt++) {
      const r = new RedisServer(await freePort(), dir);
      try {
        await r.run();
        return r;
      } catch (err) {
        if (attempt >= 4) throw err;
      }
    }
  }

  /** Starts (again) on the same port; resolves once it accepts connections. */
  async run(): Promise<void> {
    const proc = spawn("redis-server", ["--port", String(this.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", this.dir], { stdio: "ignore" });
    this.proc = proc;
    const deadline = Date.now() + 5000;
    while (Date.now() < deadline) {
      if (proc.exitCode !== null) throw new Error(`redis-server exited with ${proc.exitCode} (port ${this.port} taken?)`);
      if (await canConnect(this.port)) return;
      await new Promise((r) => setTimeout(r, 30));
    }
    throw new Error("redis-server did not start within 5 s");
  }

  /** Kills it at once (SIGKILL): what a crash looks like to its clients. */
  async kill(): Promise<void> {
    const proc = this.proc;
    if (!proc || proc.exitCode !== null) return;
    const gone = new Promise((r) => proc.once("exit", r));
    proc.kill("SIGKILL");
    await gone;
  }

  /** SIGSTOP / SIGCONT: a Redis that accepts bytes but does not answer. */
  pause(): void {
    this.proc?.kill("SIGSTOP");
  }

  resume(): void {
    this.proc?.kill("SIGCONT");
  }

  /** Runs one redis-cli command against it. */
  cli(...args: string[]): string {
    return execFileSync("redis-cli", ["-p", String(this.port), ...args], { encoding: "utf8" }).trim();
  }

  async stop(): Promise<void> {
    this.resume();
    await this.kill();
    rmSync(this.dir, { recursive: true, force: true });
  }
}
