// Builds dist/ once before the suite when any source file is newer than the build, so tests that
// run the real program as a child process (`node dist/bundle/cli.js`, as bin/sluice does) always run the current code,
// and the dashboard (webui/ → dist/webui) that the API serves by default is the current one.
// Every temporary file of the run (the tests', their children's, the browsers') goes under one
// directory, TMPDIR for the workers, removed when the run ends; on a tmpfs when there is one.

import { execFileSync } from "node:child_process";
import { accessSync, chmodSync, constants, existsSync, mkdtempSync, readdirSync, rmSync, statfsSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

function newest(dir: string): number {
  let latest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    latest = Math.max(latest, entry.isDirectory() ? newest(path) : statSync(path).mtimeMs);
  }
  return latest;
}

const builtAt = (file: string): number => (existsSync(file) ? statSync(file).mtimeMs : 0);

/**
 * Where the run's temporary directory goes: a tmpfs (/dev/shm) with room to spare when there is one,
 * else the system's. The suite creates tens of thousands of small files (release trees built, packed
 * and unpacked, SQLite and PostgreSQL databases, configurations): on a disk shared with other work
 * that was a third of upgrade-release.test.ts's time alone. SLUICE_TEST_TMPFS=0 keeps the system's.
 */
function tempRoot(): string {
  const shm = "/dev/shm";
  if (process.env.SLUICE_TEST_TMPFS === "0") return tmpdir();
  try {
    accessSync(shm, constants.W_OK | constants.X_OK);
    const fs = statfsSync(shm);
    if (fs.bavail * fs.bsize >= 4 * 1024 ** 3) return shm;
  } catch {
    // no tmpfs here
  }
  return tmpdir();
}

export default function setup(): () => void {
  const root = join(import.meta.dirname, "..");
  const packageJson = statSync(join(root, "package.json")).mtimeMs;
  const sources = Math.max(...["src", "machines", "actors"].filter((d) => existsSync(join(root, d))).map((d) => newest(join(root, d))), packageJson);
  if (builtAt(join(root, "dist", "src", "cli.js")) < sources) {
    execFileSync(process.execPath, [join(root, "node_modules", "typescript", "bin", "tsc"), "-p", join(root, "tsconfig.build.json")], { stdio: "inherit" });
  }
  if (builtAt(join(root, "dist", "bundle", "cli.js")) < Math.max(builtAt(join(root, "dist", "src", "cli.js")), statSync(join(root, "rolldown.config.mjs")).mtimeMs)) {
    execFileSync(process.execPath, [join(root, "node_modules", "rolldown", "bin", "cli.mjs"), "-c", join(root, "rolldown.config.mjs")], { cwd: root, stdio: ["ignore", "ignore", "inherit"] });
  }
  if (builtAt(join(root, "dist", "webui", "index.html")) < Math.max(newest(join(root, "webui")), packageJson)) {
    execFileSync(process.execPath, [join(root, "node_modules", "vite", "bin", "vite.js"), "build", "--config", join(root, "webui", "vite.config.mjs")], { stdio: "inherit" });
  }
  // Each project of vitest.config.ts runs this setup: the first one makes the directory. Kept short:
  // unix socket paths below it (PostgreSQL's, Chromium's) must stay under 108 bytes.
  if (process.env.SLUICE_TEST_TMP) return () => {};
  const runTmp = mkdtempSync(join(tempRoot(), "sluice-tests-"));
  // Searchable by other users, as /tmp is: the PostgreSQL tests run their server as `postgres` in a directory below.
  chmodSync(runTmp, 0o711);
  process.env.SLUICE_TEST_TMP = runTmp;
  process.env.TMPDIR = runTmp;
  return () => rmSync(runTmp, { recursive: true, force: true });
}
