// `sluice upgrade check|apply|rollback` and `sluice check --self-test`, run as an operator would
// (child processes of the compiled program), against a release host on 127.0.0.1.
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, expect, test } from "vitest";
import { VERSION } from "../../src/version.js";
import { runCli } from "../helpers/cli.js";
import { fakeRelease } from "../helpers/fake-release.js";
import { releaseOf, signed, startReleaseHost, type ReleaseHost } from "../helpers/release-host.js";
import { tempDir } from "../helpers/sluice.js";
import { makeInstallDir, upgradeYaml } from "../helpers/upgrade.js";

let host: ReleaseHost;
beforeAll(async () => {
  host = await startReleaseHost();
  const a = fakeRelease("9.9.9");
  const files = signed({ [a.name]: a.body });
  host.publish(releaseOf("9.9.9", host.url, files), files);
});
afterAll(() => host.close());

function config(settings: Parameters<typeof upgradeYaml>[0]): string {
  const dir = tempDir("sluice-cli-upgrade-");
  writeFileSync(join(dir, "sluice.yaml"), upgradeYaml(settings));
  return dir;
}

test("check prints the comparison; apply installs and switches current; rollback switches back", async () => {
  const inst = makeInstallDir(VERSION);
  const dir = config({ releaseApi: host.api, installDir: inst.dir });
  const check = await runCli(["upgrade", "check", "-c", "sluice.yaml", "-d", dir]);
  expect(check.code, check.stderr).toBe(0);
  expect(check.stdout).toContain(`current ${VERSION}, latest 9.9.9: update available`);

  const token = "cli-token-never-on-the-command-line";
  const before = host.requests.length;
  const apply = await runCli(["upgrade", "apply", "-c", "sluice.yaml", "-d", dir], { env: { SLUICE_RELEASE_HOST_TOKEN: token } });
  expect(apply.code, apply.stderr).toBe(0);
  expect(apply.stdout).toContain(`installed 9.9.9 (was ${VERSION}); restart the service`);
  expect(inst.current()).toBe("releases/9.9.9");
  // The release record, the artefact and its signature, all from the release host's origin here.
  expect(host.requests.slice(before).map((r) => r.authorization)).toEqual([`Bearer ${token}`, `Bearer ${token}`, `Bearer ${token}`]);
  expect(apply.stdout + apply.stderr).not.toContain(token);
  // The progress log goes to stderr; the marker waits for the service's next start.
  expect(apply.stderr).toContain("switched current to the new release");
  expect(JSON.parse(readFileSync(join(inst.dir, "upgrade", "pending.json"), "utf8"))).toMatchObject({ from_version: VERSION, to_version: "9.9.9" });

  const rollback = await runCli(["upgrade", "rollback", "-c", "sluice.yaml", "-d", dir]);
  expect(rollback.code, rollback.stderr).toBe(0);
  expect(rollback.stdout).toContain(`current: ${VERSION} (was 9.9.9)`);
  expect(inst.current()).toBe(`releases/${VERSION}`);
  expect(inst.previous()).toBe("releases/9.9.9");
});

test("mistakes end with a message and a non-zero status", async () => {
  const dir = config({ releaseApi: host.api });
  const cases: [string[], number, RegExp][] = [
    [["upgrade"], 2, /sluice upgrade check/],
    [["upgrade", "frob"], 2, /upgrade needs check, apply or rollback, not 'frob'/],
    [["upgrade", "rollback", "--target", "v1"], 2, /unknown option '--target'/],
    [["upgrade", "apply", "-c", "sluice.yaml", "-d", dir], 1, /does not run from an installed release/],
    [["upgrade", "rollback", "-c", "sluice.yaml", "-d", dir], 1, /does not run from an installed release/],
    [["upgrade", "check", "-c", "sluice.yaml", "-d", dir, "--repository", "nope"], 1, /repository must be <owner>\/<name>/],
    [["upgrade", "check", "-c", "sluice.yaml", "-d", dir, "--repository", "test/missing"], 1, /HTTP 404/],
    [["upgrade", "check", "-c", "sluice.yaml", "-d", dir, "--repository", "../.."], 1, /repository must be <owner>\/<name>/],
  ];
  for (const [args, code, message] of cases) {
    const r = await runCli(args);
    expect({ args, code: r.code }).toEqual({ args, code });
    expect(r.stderr + r.stdout).toMatch(message);
  }
  const noRepo = config({ releaseApi: host.api, repository: null });
  const r = await runCli(["upgrade", "check", "-c", "sluice.yaml", "-d", noRepo]);
  expect(r.code).toBe(1);
  expect(r.stderr).toMatch(/no release repository: set upgrade.repository/);
  // No upgrade section, or no key while signatures are required (the default): nothing is asked of any host.
  const before = host.requests.length;
  const bare = tempDir("sluice-cli-upgrade-");
  writeFileSync(join(bare, "sluice.yaml"), "plugins: []\n");
  const none = await runCli(["upgrade", "check", "-c", "sluice.yaml", "-d", bare, "--repository", "test/sluice"]);
  expect(none.code).toBe(1);
  expect(none.stderr).toMatch(/upgrades are not configured: add an upgrade section/);
  const noKey = await runCli(["upgrade", "apply", "-c", "sluice.yaml", "-d", config({ releaseApi: host.api, publicKey: null, installDir: makeInstallDir(VERSION).dir })]);
  expect(noKey.code).toBe(1);
  expect(noKey.stderr).toMatch(/upgrade\.public_key is not set/);
  expect(host.requests.length).toBe(before);
});

test("check --self-test also loads the native addons", async () => {
  const dir = config({ releaseApi: host.api });
  const r = await runCli(["check", "--self-test", "-c", "sluice.yaml", "-d", dir]);
  expect(r.code, r.stderr).toBe(0);
  expect(r.stdout).toMatch(/^configuration is valid: .*\nself-test passed: better-sqlite3 \(SQLite \d+\.\d+/);
});
