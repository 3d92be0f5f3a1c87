// Builds dist/ once before the suite when any source file is newer than the build, so tests that
// run the real program as a child process (`node dist/src/cli.js`) always run the current code.

import { execFileSync } from "node:child_process";
import { existsSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";

function newest(dir: string): number {
  let latest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    latest = Math.max(latest, entry.isDirectory() ? newest(path) : statSync(path).mtimeMs);
  }
  return latest;
}

export default function setup(): void {
  const root = join(import.meta.dirname, "..");
  const built = join(root, "dist", "src", "cli.js");
  const sources = Math.max(...["src", "machines", "actors"].filter((d) => existsSync(join(root, d))).map((d) => newest(join(root, d))), statSync(join(root, "package.json")).mtimeMs);
  if (existsSync(built) && statSync(built).mtimeMs >= sources) return;
  execFileSync(process.execPath, [join(root, "node_modules", "typescript", "bin", "tsc"), "-p", join(root, "tsconfig.build.json")], { stdio: "inherit" });
}
