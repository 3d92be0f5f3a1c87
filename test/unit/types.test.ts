// The program's types, checked as the suite's build used to check them before emitting (test/global-setup.ts
// now emits with --noCheck): here the check runs beside the other files instead of before all of them.
// `npm run typecheck` checks the dashboard and the browser tests besides.
import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { expect, test } from "vitest";

const root = join(import.meta.dirname, "..", "..");

test("src/, machines/ and actors/ type-check (tsc --noEmit -p tsconfig.build.json)", async () => {
  const tsc = join(root, "node_modules", "typescript", "bin", "tsc");
  const out = await promisify(execFile)(process.execPath, [tsc, "--noEmit", "-p", join(root, "tsconfig.build.json")], { cwd: root, maxBuffer: 16 * 1024 * 1024 }).then(
    () => "",
    (err: { stdout?: string; message: string }) => err.stdout || err.message,
  );
  expect(out).toBe("");
}, 120_000);
