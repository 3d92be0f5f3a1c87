// The launchers (bin/sluice, the Debian package's /usr/bin/sluice) start node with the young
// generation at its full size unless the operator's node options size it: the flag has to be on
// node's command line (v8.setFlagsFromString after start does not stop V8 shrinking it).

import { execFileSync } from "node:child_process";
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, test } from "vitest";

const ROOT = join(import.meta.dirname, "..", "..");
const tmp = mkdtempSync(join(tmpdir(), "sluice-launcher-"));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

// A checkout-shaped copy of bin/sluice whose dist/bundle/cli.js reports what node was started with.
const checkout = join(tmp, "checkout");
mkdirSync(join(checkout, "bin"), { recursive: true });
mkdirSync(join(checkout, "dist", "bundle"), { recursive: true });
copyFileSync(join(ROOT, "bin", "sluice"), join(checkout, "bin", "sluice"));
writeFileSync(
  join(checkout, "dist", "bundle", "cli.js"),
  'import v8 from "node:v8";\nconst s = v8.getHeapSpaceStatistics().find((x) => x.space_name === "new_space");\nconsole.log(JSON.stringify({ execArgv: process.execArgv, argv: process.argv.slice(2), newSpaceMiB: s.space_size / 1048576 }));\n',
);
writeFileSync(join(checkout, "package.json"), '{ "type": "module" }\n');
// The Debian launcher with its placeholder filled as the package build does; SLUICE_NODE replaces it here.
const debLauncher = join(tmp, "deb-launcher");
writeFileSync(debLauncher, readFileSync(join(ROOT, "packaging", "deb", "launcher"), "utf8").replaceAll("@NODE@", "/usr/lib/sluice/node"));

interface Started {
  execArgv: string[];
  argv: string[];
  newSpaceMiB: number;
}

function run(launcher: string, env: Record<string, string>, node = process.execPath): string {
  return execFileSync("sh", [launcher, "start", "-c", "x.yaml"], { env: { PATH: process.env.PATH ?? "", SLUICE_NODE: node, ...env }, encoding: "utf8" });
}

describe("bin/sluice", () => {
  test("starts node with --min-semi-space-size=16, which node takes: the young generation is at 16 MB from the start", () => {
    const started = JSON.parse(run(join(checkout, "bin", "sluice"), {})) as Started;
    expect(started.execArgv).toEqual(["--min-semi-space-size=16"]);
    expect(started.argv).toEqual(["start", "-c", "x.yaml"]);
    expect(started.newSpaceMiB).toBeGreaterThanOrEqual(16);
    // Without the launcher's option node starts it at 1 MB: the check above can fail.
    const bare = JSON.parse(execFileSync(process.execPath, [join(checkout, "dist", "bundle", "cli.js")], { encoding: "utf8", env: { PATH: process.env.PATH ?? "" } })) as Started;
    expect(bare.newSpaceMiB).toBeLessThan(16);
  });

  test("the operator's own semi-space options (SLUICE_NODE_ARGS or NODE_OPTIONS, either spelling) win", () => {
    const own = JSON.parse(run(join(checkout, "bin", "sluice"), { SLUICE_NODE_ARGS: "--max-semi-space-size=8 --max-old-space-size=512" })) as Started;
    expect(own.execArgv).toEqual(["--max-semi-space-size=8", "--max-old-space-size=512"]);
    expect(run(join(checkout, "bin", "sluice"), { NODE_OPTIONS: "--max_semi_space_size=4" }, "echo").trim()).toBe(`${join(checkout, "dist", "bundle", "cli.js")} start -c x.yaml`);
    // Other node options keep the default.
    expect((JSON.parse(run(join(checkout, "bin", "sluice"), { SLUICE_NODE_ARGS: "--max-old-space-size=512" })) as Started).execArgv).toEqual(["--min-semi-space-size=16", "--max-old-space-size=512"]);
  });
});

describe("the Debian package's launcher", () => {
  test("adds the same option, and leaves it to the operator's", () => {
    expect(run(debLauncher, {}, "echo").trim()).toBe("--min-semi-space-size=16 /usr/lib/sluice/dist/bundle/cli.js start -c x.yaml");
    expect(run(debLauncher, { SLUICE_NODE_ARGS: "--min-semi-space-size=2" }, "echo").trim()).toBe("--min-semi-space-size=2 /usr/lib/sluice/dist/bundle/cli.js start -c x.yaml");
  });
});
