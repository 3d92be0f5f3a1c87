// A throwaway PostgreSQL server for tests: initdb into a temp directory, listening only on a unix
// socket in that directory, fsync off, run as the `postgres` OS user when the tests run as root
// (PostgreSQL refuses root). Stopped (pg_ctl stop -m immediate, a crash to its clients) and started
// again on the same socket by the test; removed in afterAll.

import { execFileSync } from "node:child_process";
import { chmodSync, chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir, userInfo } from "node:os";
import { join } from "node:path";
import { requireTool } from "./tools.js";

/** The directory of initdb, pg_ctl and postgres (newest version installed), or null. */
export function postgresBin(): string | null {
  const root = "/usr/lib/postgresql";
  if (!existsSync(root)) return null;
  const versions = readdirSync(root)
    .filter((v) => /^\d+$/.test(v))
    .sort((a, b) => Number(b) - Number(a));
  for (const v of versions) {
    const bin = join(root, v, "bin");
    if (["initdb", "pg_ctl", "postgres"].every((f) => existsSync(join(bin, f)))) return bin;
  }
  return null;
}

/** Fails, naming the Debian package, when the tests cannot run a server (npm test installs it). */
export function requirePostgres(): void {
  requireTool("initdb");
  if (postgresBin() === null) throw new Error("initdb is there, but not pg_ctl and postgres beside it: is the Debian package postgresql installed whole?");
}

function owner(): { uid: number; gid: number } | null {
  if (userInfo().uid !== 0) return null;
  const id = (flag: string): number => Number(execFileSync("id", [flag, "postgres"], { encoding: "utf8" }).trim());
  return { uid: id("-u"), gid: id("-g") };
}

export class PostgresServer {
  private constructor(
    private readonly bin: string,
    readonly dir: string,
    private readonly asUser: { uid: number; gid: number } | null,
  ) {}

  /** Unix socket directory (the server's only listener). */
  get socketDir(): string {
    return this.dir;
  }

  /** A connection URL for database `db` (default `postgres`) over the socket. */
  url(db = "postgres"): string {
    return `postgres://postgres@/${db}?host=${encodeURIComponent(this.dir)}`;
  }

  private run(cmd: string, args: string[]): string {
    const full = join(this.bin, cmd);
    return this.asUser ? execFileSync("runuser", ["-u", "postgres", "--", full, ...args], { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] }) : execFileSync(full, args, { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
  }

  static async start(): Promise<PostgresServer> {
    const bin = postgresBin();
    if (bin === null) throw new Error("PostgreSQL is needed: apt-get install postgresql");
    const dir = mkdtempSync(join(tmpdir(), "sluice-pg-"));
    const asUser = owner();
    if (asUser) chownSync(dir, asUser.uid, asUser.gid);
    chmodSync(dir, 0o700);
    const s = new PostgresServer(bin, dir, asUser);
    s.run("initdb", ["-D", join(dir, "data"), "-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8", "--locale=C"]);
    await s.resume();
    return s;
  }

  /** Starts the server (again); resolves once it accepts connections. */
  async resume(): Promise<void> {
    const opts = `-c listen_addresses='' -c unix_socket_directories='${this.dir}' -c fsync=off -c max_connections=50`;
    this.run("pg_ctl", ["-D", join(this.dir, "data"), "-o", opts, "-l", join(this.dir, "log"), "-w", "-t", "30", "start"]);
    return Promise.resolve();
  }

  /** Stops it at once, as a crash would look to its clients. */
  stop(): void {
    try {
      this.run("pg_ctl", ["-D", join(this.dir, "data"), "-m", "immediate", "-w", "stop"]);
    } catch {
      // Not running.
    }
  }

  /** Stops it and removes its files. */
  destroy(): void {
    this.stop();
    rmSync(this.dir, { recursive: true, force: true });
  }
}
