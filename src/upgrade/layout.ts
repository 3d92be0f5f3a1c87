// The install layout: <install_dir>/releases/<version>/ holds each release, `current` and
// `previous` are relative symlinks to two of them, and upgrade/ keeps the pending marker, the last
// result, the lock and downloads in flight. Switching a symlink is one rename, so a reader sees the
// old target or the new one, never neither.

import { randomBytes } from "node:crypto";
import { closeSync, existsSync, fsyncSync, lstatSync, mkdirSync, openSync, readdirSync, readFileSync, readlinkSync, renameSync, rmSync, symlinkSync, unlinkSync, writeFileSync } from "node:fs";
import { basename, dirname, isAbsolute, join, resolve } from "node:path";
import { PACKAGE_ROOT } from "../version.js";

export interface InstallLayout {
  dir: string;
  releases: string;
  current: string;
  previous: string;
  /** upgrade/: pending.json, result.json, lock, downloads. */
  state: string;
}

export function installLayout(dir: string): InstallLayout {
  return { dir, releases: join(dir, "releases"), current: join(dir, "current"), previous: join(dir, "previous"), state: join(dir, "upgrade") };
}

/** The file a distribution package puts beside the program (/usr/lib/sluice/sluice-package.json). */
export const PACKAGE_MARKER = "sluice-package.json";

export interface PackageMarker {
  /** The package manager that owns these files: upgrades come from it. */
  manager: string;
  package: string;
  version: string;
  /** "bundled": /usr/lib/sluice/node; "system": the distribution's nodejs. */
  node: "bundled" | "system";
}

/** The marker of a distribution package around this program, or null when it was not installed by one. */
export function packageMarker(root: string = PACKAGE_ROOT): PackageMarker | null {
  const marker = readJson<PackageMarker>(join(root, PACKAGE_MARKER));
  return marker !== null && typeof marker.manager === "string" ? marker : null;
}

/** A version is a directory name here: semver text only, so no tag can name a path. */
export function isVersionName(v: string): boolean {
  return /^[0-9]+\.[0-9]+\.[0-9]+(?:[-+][0-9A-Za-z.-]+)?$/.test(v) && !v.includes("..");
}

/**
 * The install directory: `upgrade.install_dir` (relative to -d), else the one the launcher ran
 * this process from (SLUICE_INSTALL_DIR), else the one around this release's files; null when the
 * process does not run from an installed release (a checkout, a bare tarball).
 */
export function detectInstallDir(configured: string | undefined, baseDir: string, env: NodeJS.ProcessEnv = process.env): string | null {
  if (configured) return isAbsolute(configured) ? configured : resolve(baseDir, configured);
  const fromLauncher = env.SLUICE_INSTALL_DIR;
  if (fromLauncher && isInstallDir(fromLauncher)) return fromLauncher;
  const parent = dirname(PACKAGE_ROOT);
  if (basename(parent) === "releases" && isInstallDir(dirname(parent))) return dirname(parent);
  return null;
}

function isInstallDir(dir: string): boolean {
  try {
    return lstatSync(join(dir, "current")).isSymbolicLink();
  } catch {
    return false;
  }
}

/** The version a link (`current`, `previous`) points at, or null when it does not exist. */
export function linkedVersion(link: string): string | null {
  try {
    return basename(readlinkSync(link));
  } catch {
    return null;
  }
}

/** Points `link` at releases/<version> with one rename over the old link. */
export function pointLink(link: string, version: string): void {
  const tmp = join(dirname(link), `.${basename(link)}-${randomBytes(6).toString("hex")}`);
  symlinkSync(join("releases", version), tmp);
  try {
    renameSync(tmp, link);
  } catch (err) {
    unlinkSync(tmp);
    throw err;
  }
  syncDir(dirname(link));
}

/** Makes a rename durable: the directory entry itself is flushed. */
export function syncDir(dir: string): void {
  const fd = openSync(dir, "r");
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/** Writes a small file atomically (temp file, fsync, rename). */
export function writeFileAtomic(path: string, content: string): void {
  mkdirSync(dirname(path), { recursive: true });
  const tmp = `${path}.${randomBytes(6).toString("hex")}.tmp`;
  const fd = openSync(tmp, "w", 0o600);
  try {
    writeFileSync(fd, content);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  renameSync(tmp, path);
}

export function readJson<T>(path: string): T | null {
  try {
    return JSON.parse(readFileSync(path, "utf8")) as T;
  } catch {
    return null;
  }
}

/** Removes every release but `current`, `previous` and `alsoKeep` (the running one), and unpacks left over by an interrupted upgrade. */
export function pruneReleases(l: InstallLayout, alsoKeep: string[] = []): string[] {
  const keep = new Set([linkedVersion(l.current), linkedVersion(l.previous), ...alsoKeep]);
  const removed: string[] = [];
  for (const name of existsSync(l.releases) ? readdirSync(l.releases) : []) {
    if (keep.has(name)) continue;
    rmSync(join(l.releases, name), { recursive: true, force: true });
    removed.push(name);
  }
  return removed;
}

/** Runs `fn` holding upgrade/lock, so two processes (the service and the CLI) never upgrade at once. */
export async function withInstallLock<T>(l: InstallLayout, fn: () => Promise<T>): Promise<T> {
  mkdirSync(l.state, { recursive: true });
  const lock = join(l.state, "lock");
  for (let attempt = 0; ; attempt++) {
    try {
      writeFileSync(lock, String(process.pid), { flag: "wx", mode: 0o600 });
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST" || attempt > 0) throw new Error(`another upgrade holds ${lock}: ${(err as Error).message}`, { cause: err });
      const holder = Number(readFileSync(lock, "utf8"));
      if (Number.isInteger(holder) && holder > 0 && holder !== process.pid && alive(holder)) throw new Error(`another upgrade is running (process ${holder} holds ${lock})`, { cause: err });
      // Left by a process that is gone.
      rmSync(lock, { force: true });
    }
  }
  try {
    return await fn();
  } finally {
    rmSync(lock, { force: true });
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}
