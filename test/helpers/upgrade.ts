// Shared by the upgrade tests: an install directory holding a running release, a Sluice (in
// process) configured to upgrade from a test release host into it (releases signed by the tests'
// key, test/helpers/fake-release.ts), and status polling.

import { existsSync, mkdirSync, readdirSync, readFileSync, readlinkSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { VERSION } from "../../src/version.js";
import { startCli, type RunningCli } from "./cli.js";
import { releasePublicKeyFile } from "./fake-release.js";
import { startSluice, tempDir, type RunningSluice } from "./sluice.js";

export interface InstallDir {
  dir: string;
  current(): string;
  previous(): string | null;
  releases(): string[];
}

/** <dir>/releases/<version>/ (a placeholder) and current → releases/<version>. */
export function makeInstallDir(version: string): InstallDir {
  const dir = tempDir("sluice-install-");
  mkdirSync(join(dir, "releases", version), { recursive: true });
  writeFileSync(join(dir, "releases", version, "placeholder"), version);
  symlinkSync(join("releases", version), join(dir, "current"));
  const link = (name: string): string | null => {
    try {
      return readlinkSync(join(dir, name));
    } catch {
      return null;
    }
  };
  return {
    dir,
    current: () => link("current") ?? "",
    previous: () => link("previous"),
    releases: () => readdirSync(join(dir, "releases")).sort(),
  };
}

/** Every file under `dir` (recursively), for looking for things that must not be there. */
export function filesUnder(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    const st = statSync(path, { throwIfNoEntry: false });
    if (!st) return [];
    return st.isDirectory() ? filesUnder(path) : [path];
  });
}

export interface UpgradeSettings {
  releaseApi: string;
  installDir?: string;
  repository?: string | null;
  timeout?: string;
  /** upgrade.public_key: the tests' key (test/helpers/fake-release.ts) unless a path is given; null: none. */
  publicKey?: string | null;
  extra?: string;
  /** The `api.http` value (default 127.0.0.1:0). */
  apiHttp?: string;
}

export function upgradeYaml(u: UpgradeSettings): string {
  const lines = [`  release_api: ${u.releaseApi}`];
  if (u.repository !== null) lines.push(`  repository: ${u.repository ?? "test/sluice"}`);
  if (u.installDir) lines.push(`  install_dir: ${u.installDir}`);
  lines.push(`  timeout: ${u.timeout ?? "3s"}`);
  if (u.publicKey !== null) lines.push(`  public_key: ${u.publicKey ?? releasePublicKeyFile()}`);
  if (u.extra) lines.push(u.extra);
  return `api:
  http: ${u.apiHttp ?? "127.0.0.1:0"}
upgrade:
${lines.join("\n")}
plugins:
  - tag: main
    type: sequence
    args:
      - exec: reject 3
  - { tag: udp, type: udp_server, args: { entry: main, listen: "127.0.0.1:0" } }
`;
}

export function startUpgradable(u: UpgradeSettings): Promise<RunningSluice> {
  return startSluice(upgradeYaml(u));
}

export interface StatusRecord {
  ok: boolean;
  state: string;
  started_at_ms: number | null;
  completed_at_ms: number | null;
  error: string | null;
  installed_version: string;
  restart_required: boolean;
  target_version: string | null;
  installed_release: boolean;
}

export async function status(base: string): Promise<StatusRecord> {
  return (await (await fetch(`${base}/api/upgrade/status`)).json()) as StatusRecord;
}

/** Polls GET /api/upgrade/status until `done` holds; returns every distinct state seen and the last record. */
export async function pollStatus(base: string, done: (s: StatusRecord) => boolean, timeoutMs = 20_000): Promise<{ seen: string[]; last: StatusRecord }> {
  const seen: string[] = [];
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const s = await status(base);
    if (seen[seen.length - 1] !== s.state) seen.push(s.state);
    if (done(s)) return { seen, last: s };
    if (Date.now() > deadline) throw new Error(`upgrade status still ${s.state} after ${timeoutMs} ms (seen ${seen.join(" → ")})`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

export const post = (base: string, path: string, body?: unknown): Promise<Response> =>
  fetch(base + path, { method: "POST", ...(body === undefined ? {} : { headers: { "content-type": "application/json" }, body: typeof body === "string" ? body : JSON.stringify(body) }) });

/** The release an install directory of a trial was upgraded from. */
export const OLD = "0.0.9";

export interface TrialInstall {
  dir: string;
  install: string;
  link(name: string): string;
  file(name: string): Record<string, unknown> | null;
}

/** An install directory upgraded from OLD to this version, with the marker `pending` (merged into a default one) and a configuration. */
export function trialInstall(pending: Record<string, unknown> | null, yaml: (dir: string) => string): TrialInstall {
  const dir = tempDir("sluice-trial-");
  const install = join(dir, "install");
  for (const v of [OLD, VERSION]) mkdirSync(join(install, "releases", v), { recursive: true });
  symlinkSync(join("releases", VERSION), join(install, "current"));
  symlinkSync(join("releases", OLD), join(install, "previous"));
  mkdirSync(join(install, "upgrade"));
  if (pending) writeFileSync(join(install, "upgrade", "pending.json"), JSON.stringify({ from_version: OLD, to_version: VERSION, started_at_ms: 1_700_000_000_000, start_deadline_ms: 60_000, attempts: 0, ...pending }));
  writeFileSync(join(dir, "sluice.yaml"), yaml(dir));
  return {
    dir,
    install,
    link: (name) => readlinkSync(join(install, name)),
    file: (name) => (existsSync(join(install, "upgrade", name)) ? (JSON.parse(readFileSync(join(install, "upgrade", name), "utf8")) as Record<string, unknown>) : null),
  };
}

/** The real program started from the install directory; a restart exits with 75 (no re-exec). */
export function startTrial(f: TrialInstall): RunningCli {
  return startCli(["-c", "sluice.yaml", "-d", f.dir], { cwd: f.dir, env: { SLUICE_INSTALL_DIR: f.install, SLUICE_RESTART: "exit", SLUICE_LAUNCHER: "" } });
}
