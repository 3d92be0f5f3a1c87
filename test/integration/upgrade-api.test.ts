// The upgrade routes against a real Sluice (in process) and a real release host on 127.0.0.1: check,
// apply through the `upgrade` actor (one at a time), status, the request body's rules, and every
// way an apply must fail with the running release untouched. Artefacts are small hand-made tars
// (test/helpers/fake-release.ts); the real artefact is exercised by upgrade-release.test.ts.
import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { PassThrough } from "node:stream";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { App } from "../../src/app/app.js";
import { createCatalog } from "../../src/plugins/catalog.js";
import { artefactName, thisPlatform } from "../../src/upgrade/release.js";
import { VERSION } from "../../src/version.js";
import { fakeRelease, type TarEntry } from "../helpers/fake-release.js";
import { releaseOf, signed, startReleaseHost, type ReleaseHost } from "../helpers/release-host.js";
import { tempDir } from "../helpers/sluice.js";
import { makeInstallDir, pollStatus, post, startUpgradable, status, upgradeYaml } from "../helpers/upgrade.js";

let host: ReleaseHost;

beforeAll(async () => {
  host = await startReleaseHost();
});
afterAll(() => host.close());

/** Publishes `version` with one artefact for this platform and its signature by the tests' key. */
function publish(version: string, opts: Parameters<typeof fakeRelease>[1] & { noDigest?: boolean; wrongDigest?: boolean } = {}): void {
  const a = fakeRelease(version, opts);
  const files = signed({ [a.name]: a.body });
  host.publish(releaseOf(version, host.url, files, { noDigest: opts.noDigest ? [a.name] : [], digestOf: opts.wrongDigest ? { [a.name]: Buffer.from("something else") } : {} }), files);
}

describe("check", () => {
  test("reports the newest release and the artefact for this platform; downloads nothing", async () => {
    publish("9.9.9");
    const s = await startUpgradable({ releaseApi: host.api });
    try {
      const before = host.requests.length;
      const res = await post(s.apiUrl, "/api/upgrade/check");
      expect(res.status).toBe(200);
      expect(await res.json()).toEqual({
        ok: true,
        current_version: VERSION,
        latest_version: "9.9.9",
        update_available: true,
        asset_name: artefactName("9.9.9", thisPlatform()),
        release_url: "https://example.test/releases/tag/v9.9.9",
      });
      expect(host.requests.slice(before).map((r) => r.path)).toEqual(["/repos/test/sluice/releases/latest"]);
      // A release without an artefact for this platform: no asset; the same version: no update.
      publish("9.9.9", { target: { platform: "win32", arch: "arm64", nodeMajor: 20 } });
      expect(await (await post(s.apiUrl, "/api/upgrade/check")).json()).toMatchObject({ update_available: true, asset_name: null });
      publish(VERSION);
      expect(await (await post(s.apiUrl, "/api/upgrade/check", {})).json()).toMatchObject({ latest_version: VERSION, update_available: false });
    } finally {
      await s.stop();
    }
  });

  test("bad bodies are 400s with the one error shape; a failing release host is 502 upgrade_check_failed", async () => {
    const s = await startUpgradable({ releaseApi: host.api });
    try {
      const cases: [unknown, number, string][] = [
        ["{not json", 400, "invalid_request"],
        [{ nope: 1 }, 400, "invalid_request"],
        [{ allow_prerelease: "yes" }, 400, "invalid_request"],
        [{ bundle: "minimal" }, 400, "invalid_upgrade_config"],
        [{ outbound: "local" }, 400, "invalid_upgrade_config"],
        [{ repository: "no-slash" }, 400, "upgrade_field_not_allowed"],
        [{ socks5: "http://proxy:1" }, 400, "upgrade_field_not_allowed"],
        [{ target: "../../etc" }, 400, "invalid_upgrade_config"],
        [{ target: "v0.0.1" }, 502, "upgrade_check_failed"],
      ];
      for (const [body, status, code] of cases) {
        const res = await post(s.apiUrl, "/api/upgrade/check", body);
        const json = (await res.json()) as { ok: boolean; code: string; message: string };
        expect({ body, status: res.status, code: json.code, ok: json.ok }).toEqual({ body, status, code, ok: false });
        expect(json.message.length).toBeGreaterThan(0);
      }
      // The 413 names these routes' own limit, not api.http.limits.body_bytes (which does not raise it).
      for (const route of ["check", "apply"]) {
        const big = await post(s.apiUrl, `/api/upgrade/${route}`, { target: "x".repeat(20_000) });
        expect(big.status).toBe(413);
        const body = (await big.json()) as { code: string; message: string };
        expect(body).toMatchObject({ code: "body_too_large", message: `request body is larger than the limit of 16384 bytes for POST /api/upgrade/${route}` });
      }
    } finally {
      await s.stop();
    }
    const unset = await startUpgradable({ releaseApi: host.api, repository: null });
    try {
      const res = await post(unset.apiUrl, "/api/upgrade/check");
      expect(res.status).toBe(400);
      expect(((await res.json()) as { message: string }).message).toMatch(/upgrade\.repository/);
    } finally {
      await unset.stop();
    }
  });

  test("routes exist only in builds with the upgrade feature", async () => {
    const dir = tempDir();
    const path = join(dir, "sluice.yaml");
    writeFileSync(path, upgradeYaml({ releaseApi: host.api }));
    const app = await App.start({ configPath: path, baseDir: dir, catalog: createCatalog("standard"), stdout: new PassThrough() });
    try {
      const port = app.apiServer?.address().port ?? 0;
      for (const [method, route] of [["POST", "check"], ["POST", "apply"], ["GET", "status"]]) {
        const res = await fetch(`http://127.0.0.1:${port}/api/upgrade/${route}`, { method });
        expect(res.status).toBe(404);
      }
    } finally {
      await app.stop();
    }
  });
});

describe("apply", () => {
  test("not running from an installed release: status says so (installed_release false), apply is 409 upgrade_not_installed, nothing fetched", async () => {
    publish("9.9.9");
    const s = await startUpgradable({ releaseApi: host.api });
    try {
      expect(await status(s.apiUrl)).toMatchObject({ state: "idle", installed_release: false });
      type Doc = { paths: Record<string, { get: { responses: Record<string, { content: Record<string, { schema: { properties: Record<string, { type: string }> } }> }> } }> };
      const doc = (await (await fetch(`${s.apiUrl}/api/openapi.json`)).json()) as Doc;
      expect(doc.paths["/api/upgrade/status"].get.responses["200"].content["application/json"].schema.properties.installed_release.type).toBe("boolean");
      const before = host.requests.length;
      const res = await post(s.apiUrl, "/api/upgrade/apply");
      expect(res.status).toBe(409);
      expect(await res.json()).toMatchObject({ ok: false, code: "upgrade_not_installed" });
      expect(host.requests.length).toBe(before);
    } finally {
      await s.stop();
    }
  });

  test("installs a newer release: 202, a second apply is 409, then current is switched and the app restarts", async () => {
    publish("9.9.9");
    const inst = makeInstallDir(VERSION);
    const s = await startUpgradable({ releaseApi: host.api, installDir: inst.dir });
    const upgrader = s.app.upgradeActor;
    const open = host.hold();
    try {
      expect(await status(s.apiUrl)).toMatchObject({ state: "idle", installed_release: true });
      const res = await post(s.apiUrl, "/api/upgrade/apply", { target: "latest", bundle: "auto", outbound: "remote", allow_prerelease: false });
      expect(res.status).toBe(202);
      expect(await res.json()).toMatchObject({ ok: true, action: "upgrade_apply", status: "accepted" });
      const running = await pollStatus(s.apiUrl, (st) => st.state === "running");
      expect(running.last).toMatchObject({ ok: true, restart_required: false, error: null, installed_version: VERSION });
      expect(running.last.started_at_ms).toBeGreaterThan(0);
      const second = await post(s.apiUrl, "/api/upgrade/apply");
      expect(second.status).toBe(409);
      expect(await second.json()).toMatchObject({ ok: false, code: "upgrade_in_progress", message: "an upgrade is already in progress" });
      open();
      // A client polling every 200 ms sees restarting (for RESTART_ANNOUNCE_MS), until the API goes with the process.
      const seen: string[] = [];
      for (;;) {
        const st = await status(s.apiUrl).catch(() => null);
        if (st === null) break;
        if (seen[seen.length - 1] !== st.state) seen.push(st.state);
        if (st.state === "restarting") expect(st).toMatchObject({ restart_required: true, installed_version: "9.9.9" });
        await new Promise((r) => setTimeout(r, 200));
      }
      expect(seen.slice(-2)).toEqual(["running", "restarting"]);
      const outcome = await s.app.done;
      expect(outcome).toEqual({ restart: true, error: null });
      const snap = upgrader.getSnapshot();
      expect(snap.value).toBe("restarting");
      expect(snap.context.installed_version).toBe("9.9.9");
      expect(s.logs.filter((l) => l.actor === "upgrade").map((l) => l.state)).toEqual(["idle", "running", "restarting"]);
      expect(inst.current()).toBe("releases/9.9.9");
      expect(inst.previous()).toBe(`releases/${VERSION}`);
      const pending = JSON.parse(readFileSync(join(inst.dir, "upgrade", "pending.json"), "utf8")) as Record<string, unknown>;
      expect(pending).toMatchObject({ from_version: VERSION, to_version: "9.9.9", attempts: 0, start_deadline_ms: 120_000 });
      // The new release was smoke-tested on the running configuration before the switch.
      expect(readFileSync(join(inst.dir, "releases", "9.9.9", "smoke-args"), "utf8").trim()).toBe(`check --self-test -c ${join(s.dir, "sluice.yaml")} -d ${s.dir}`);
      expect(existsSync(join(inst.dir, "upgrade", "lock"))).toBe(false);
    } finally {
      open();
      await s.stop();
    }
  });

  test("already the newest release: skipped, nothing downloaded", async () => {
    publish(VERSION);
    const inst = makeInstallDir(VERSION);
    const s = await startUpgradable({ releaseApi: host.api, installDir: inst.dir });
    try {
      const before = host.requests.length;
      expect((await post(s.apiUrl, "/api/upgrade/apply")).status).toBe(202);
      const { last } = await pollStatus(s.apiUrl, (st) => st.state !== "running" && st.state !== "idle");
      expect(last).toMatchObject({ ok: true, state: "skipped", error: null, installed_version: VERSION, restart_required: false, target_version: VERSION });
      expect(last.completed_at_ms).toBeGreaterThanOrEqual(last.started_at_ms ?? Infinity);
      expect(host.requests.slice(before).every((r) => !r.path.startsWith("/dl/"))).toBe(true);
      expect(inst.current()).toBe(`releases/${VERSION}`);
    } finally {
      await s.stop();
    }
  });
});

test("current already switched to the newest release (by the CLI, before a restart): skipped, nothing replaced", async () => {
  publish("9.9.9");
  const inst = makeInstallDir(VERSION);
  mkdirSync(join(inst.dir, "releases", "9.9.9"));
  writeFileSync(join(inst.dir, "releases", "9.9.9", "placeholder"), "installed by the CLI");
  rmSync(join(inst.dir, "current"));
  symlinkSync("releases/9.9.9", join(inst.dir, "current"));
  const s = await startUpgradable({ releaseApi: host.api, installDir: inst.dir });
  try {
    expect((await post(s.apiUrl, "/api/upgrade/apply")).status).toBe(202);
    const { last } = await pollStatus(s.apiUrl, (st) => st.state !== "running" && st.state !== "idle");
    expect(last).toMatchObject({ state: "skipped", target_version: "9.9.9" });
    expect(readFileSync(join(inst.dir, "releases", "9.9.9", "placeholder"), "utf8")).toBe("installed by the CLI");
    expect(inst.releases()).toEqual([VERSION, "9.9.9"].sort());
  } finally {
    await s.stop();
  }
});

/** Applies with what `prepare` published; the task must fail with `error` and leave the install as it was. */
async function expectRefused(prepare: () => void, error: RegExp, settings: { timeout?: string; extra?: string } = {}): Promise<void> {
  prepare();
  const inst = makeInstallDir(VERSION);
  const s = await startUpgradable({ releaseApi: host.api, installDir: inst.dir, ...settings });
  try {
    expect((await post(s.apiUrl, "/api/upgrade/apply")).status).toBe(202);
    const { last } = await pollStatus(s.apiUrl, (st) => st.state === "failed" || st.state === "restarting" || st.state === "skipped");
    expect(last.state).toBe("failed");
    expect(last.ok).toBe(false);
    expect(last.error).toMatch(error);
    expect(last.installed_version).toBe(VERSION);
    // The running release is untouched: still current, still serving, nothing left behind.
    expect(inst.current()).toBe(`releases/${VERSION}`);
    expect(inst.previous()).toBeNull();
    expect(inst.releases()).toEqual([VERSION]);
    expect(existsSync(join(inst.dir, "upgrade", "pending.json"))).toBe(false);
    expect(existsSync(join(inst.dir, "upgrade", "lock"))).toBe(false);
    expect((await fetch(`${s.apiUrl}/api/readyz`)).status).toBe(200);
    // A failed task does not block the next one.
    expect((await post(s.apiUrl, "/api/upgrade/apply")).status).toBe(202);
    await pollStatus(s.apiUrl, (st) => st.state === "failed" && st.completed_at_ms !== null);
  } finally {
    host.stall(null);
    await s.stop();
  }
}

describe("an apply that must fail leaves the running release untouched", () => {
  test("corrupted artefact (digest mismatch)", () => expectRefused(() => publish("9.9.9", { wrongDigest: true }), /digest mismatch/));
  test("no digest in the release", () => expectRefused(() => publish("9.9.9", { noDigest: true }), /no digest; refusing/));
  test("a release for another platform only", () => expectRefused(() => publish("9.9.9", { target: { platform: "win32", arch: "arm64", nodeMajor: 20 } }), /no artefact for .*win32-arm64-node20/));
  test("a download that never finishes (upgrade.timeout)", () =>
    expectRefused(
      () => {
        publish("9.9.9");
        host.stall(fakeRelease("9.9.9").name);
      },
      /no answer within 1s \(upgrade\.timeout\)/,
      { timeout: "1s" },
    ));
  test("an artefact larger than upgrade.max_download_bytes", () =>
    expectRefused(() => publish("9.9.9", { extra: [{ path: "sluice-9.9.9/big.bin", content: randomBytes(2 << 20) }] }), /limit of 1048576 bytes/, {
      extra: "  max_download_bytes: 1048576",
    }));
  test("an artefact whose manifest names another version", () => expectRefused(() => publish("9.9.9", { manifest: { version: "9.9.8" } }), /holds version 9\.9\.8, not 9\.9\.9/));
  test("an artefact built for another Node ABI", () => expectRefused(() => publish("9.9.9", { manifest: { node_abi: "1" } }), /Node ABI 1/));
  test("a new release that fails its smoke test", () => expectRefused(() => publish("9.9.9", { smokeExit: 3 }), /smoke test: .*exited 3/));

  const hostile: [string, TarEntry, RegExp][] = [
    ["a symbolic link", { path: "sluice-9.9.9/config", type: "2", link: "/etc" }, /SymbolicLink entries are not allowed/],
    ["a hard link", { path: "sluice-9.9.9/passwd", type: "1", link: "/etc/passwd" }, /Link entries are not allowed/],
    ["a character device", { path: "sluice-9.9.9/dev", type: "3" }, /CharacterDevice entries are not allowed/],
    ["a FIFO", { path: "sluice-9.9.9/fifo", type: "6" }, /FIFO entries are not allowed/],
    ["a path with ..", { path: "sluice-9.9.9/../../escaped", content: "x" }, /leaves the release directory/],
    ["an absolute path", { path: "/tmp/sluice-escaped-absolute", content: "x" }, /leaves the release directory/],
    ["a path outside the top directory", { path: "other/file", content: "x" }, /outside the artefact's top directory/],
    ["a setuid file", { path: "sluice-9.9.9/bin/helper", content: "x", mode: 0o4755 }, /setuid/],
  ];
  for (const [what, entry, error] of hostile) {
    test(`an artefact with ${what}`, async () => {
      await expectRefused(() => publish("9.9.9", { extra: [entry] }), error);
      expect(existsSync("/tmp/sluice-escaped-absolute")).toBe(false);
    });
  }
});
