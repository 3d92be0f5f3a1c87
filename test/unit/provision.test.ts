// test/provision.mjs, the first step of `npm test`: silent when every tool of test/tools.json is
// there; with one missing and installing switched off, it stops before any test with the package
// and the command to install it. (Installing itself is what `npm test` does on a fresh machine.)
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect, test } from "vitest";
import { requireTool } from "../helpers/tools.js";

const SCRIPT = join(import.meta.dirname, "..", "provision.mjs");
const COMMANDS = ["dig", "kdig", "unbound", "openssl", "curl", "jq", "promtool", "chromium", "redis-server", "redis-cli", "dnsdist", "lintian", "dpkg-shlibdeps", "systemd-analyze"];

/** Runs the script with a PATH holding links to every listed command but `without`. */
function provision(without: string | null): { status: number | null; stdout: string; stderr: string } {
  const bin = mkdtempSync(join(tmpdir(), "sluice-provision-"));
  try {
    for (const c of COMMANDS.filter((c) => c !== without)) symlinkSync(requireTool(c), join(bin, c));
    const run = spawnSync(process.execPath, [SCRIPT], { env: { PATH: bin, SLUICE_TEST_INSTALL: "0" }, encoding: "utf8" });
    return { status: run.status, stdout: run.stdout, stderr: run.stderr };
  } finally {
    rmSync(bin, { recursive: true, force: true });
  }
}

test("every tool present: exit 0, nothing printed", () => {
  expect(provision(null)).toEqual({ status: 0, stdout: "", stderr: "" });
});

test("dig missing with SLUICE_TEST_INSTALL=0: exit 1 naming the package and the command that installs it", () => {
  const run = provision("dig");
  expect(run.status).toBe(1);
  expect(run.stderr).toContain("missing here: dig (bind9-dnsutils).");
  expect(run.stderr).toContain("SLUICE_TEST_INSTALL=0: not installing them.");
  expect(run.stderr).toContain("sudo apt-get update && sudo apt-get install -y --no-install-recommends bind9-dnsutils");
});
