// The System page's Upgrade card in a real browser. Check: against a release host on 127.0.0.1
// (test/helpers/release-host.ts), the card shows the current and latest version, the asset and the
// release link; a release host token typed into it reaches the release host and nowhere else (not the
// browser's storage, not the server's log); a failing check shows its 502. Install: a real release
// artefact of the next version, built from this checkout, installed by the real program (a child
// process started from an install directory) through the card: 202, the task followed through
// running, the restart survived by the page, and the new version shown from /api/health.
import { randomBytes } from "node:crypto";
import { mkdirSync, readFileSync, readlinkSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { PassThrough } from "node:stream";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { App } from "../../src/app/app.js";
import { buildRelease } from "../../src/release/build.js";
import { createCatalog } from "../../src/plugins/catalog.js";
import { artefactName, thisPlatform } from "../../src/upgrade/release.js";
import { parseSemver } from "../../src/upgrade/semver.js";
import { VERSION } from "../../src/version.js";
import { startCli, type RunningCli } from "../helpers/cli.js";
import { fakeRelease, releasePrivateKeyFile, releasePublicKeyFile } from "../helpers/fake-release.js";
import { releaseOf, signed, startReleaseHost, type ReleaseHost } from "../helpers/release-host.js";
import { tempDir } from "../helpers/sluice.js";
import { freePort } from "../helpers/ports.js";
import { startUpgradable, upgradeYaml } from "../helpers/upgrade.js";
import { DESKTOP, launchBrowser, overflow, PHONE, tabThrough, type TestBrowser } from "./browser.js";

const v = parseSemver(VERSION)!;
const NEXT = `${v.major}.${v.minor + 1}.0`;
const ROOT = join(import.meta.dirname, "..", "..");

let host: ReleaseHost;
let browser: TestBrowser;

beforeAll(async () => {
  host = await startReleaseHost();
  browser = await launchBrowser();
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await host?.close();
});

describe("check", { timeout: 60_000 }, () => {
  test("shows current and latest version, asset and release link; the token goes to the release host only; a failed check shows its 502", async () => {
    const a = fakeRelease("9.9.9");
    host.publish(releaseOf("9.9.9", host.url, { [a.name]: a.body }), { [a.name]: a.body });
    const s = await startUpgradable({ releaseApi: host.api });
    const token = `tok-${randomBytes(12).toString("hex")}`;
    try {
      for (const [name, viewport] of [["desktop", DESKTOP], ["phone", PHONE]] as const) {
        const w = await browser.open(viewport);
        await w.page.goto(`${s.apiUrl}/#/system`);
        const card = w.page.getByTestId("upgrade");
        await card.getByTestId("upgrade-status").getByText("idle").waitFor();
        expect(await card.getByTestId("upgrade-running-version").textContent()).toBe(VERSION);

        await card.locator("summary", { hasText: "Options" }).click();
        await card.getByTestId("upgrade-token").fill(token);
        const before = host.requests.length;
        await card.getByRole("button", { name: "Check for updates" }).click();
        await card.getByTestId("upgrade-latest").getByText("9.9.9").waitFor();
        expect(await card.getByTestId("upgrade-current").textContent()).toBe(VERSION);
        const facts = await card.getByTestId("upgrade-check").textContent();
        expect(facts).toContain("Update availableyes");
        expect(facts).toContain(artefactName("9.9.9", thisPlatform()));
        expect(await card.getByRole("link", { name: "https://example.test/releases/tag/v9.9.9" }).getAttribute("href")).toBe("https://example.test/releases/tag/v9.9.9");
        // Not started from an installed release: install is not offered, and the card says why.
        await card.getByText("This process does not run from an installed release").waitFor();
        expect(await card.getByRole("button", { name: /^Install/ }).count()).toBe(0);

        // The token reached the release host as a Bearer token, and is kept nowhere else.
        expect(host.requests.slice(before).map((r) => r.authorization)).toEqual([`Bearer ${token}`]);
        const stored = await w.page.evaluate(() => JSON.stringify({ ...sessionStorage }) + JSON.stringify({ ...localStorage }) + document.cookie);
        expect(stored).not.toContain(token);
        expect(JSON.stringify(s.logs)).not.toContain(token);

        expect(await overflow(w.page), name).toEqual([]);
        await w.screenshot(`system-upgrade-check-${name}`);
        expect((await tabThrough(w.page, 12)).filter((f) => !f.visible && f.element !== "body"), name).toEqual([]);

        // A release the host does not have: the check fails with 502, shown with its code.
        await card.getByLabel("Release to check or install (latest or a tag such as v0.2.0)").fill("v0.0.1");
        await card.getByRole("button", { name: "Check for updates" }).click();
        await card.getByTestId("upgrade-message").getByText(/^Failed \(502 upgrade_check_failed\): upgrade check failed: .*404/).waitFor();
        expect(w.problems([{ status: 502, path: "/api/upgrade/check" }]), name).toEqual([]);
        await w.page.close();
      }
    } finally {
      await s.stop();
    }
  });

  test("a build without the upgrade feature shows no Upgrade card", async () => {
    const dir = tempDir();
    writeFileSync(join(dir, "sluice.yaml"), upgradeYaml({ releaseApi: host.api }));
    const app = await App.start({ configPath: join(dir, "sluice.yaml"), baseDir: dir, catalog: createCatalog("standard"), stdout: new PassThrough() });
    const w = await browser.open();
    try {
      await w.page.goto(`http://127.0.0.1:${app.apiServer?.address().port ?? 0}/#/system`);
      await w.page.getByTestId("build-version").waitFor();
      await w.page.getByTestId("health-version").getByText(VERSION).waitFor();
      expect(await w.page.getByTestId("upgrade").count()).toBe(0);
      expect(w.problems()).toEqual([]);
    } finally {
      await w.page.close();
      await app.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("install", { timeout: 120_000 }, () => {
  const work = tempDir("sluice-ui-upgrade-");
  const install = join(work, "install");
  let run: RunningCli | null = null;
  const pids = new Set<number>();

  afterAll(() => {
    // The first process and its replacement after the restart: both started by this test.
    for (const l of run?.logs ?? []) if (l.msg === "restarted: the replacement process is running") pids.add(Number(l.pid));
    for (const pid of pids) {
      try {
        process.kill(pid, "SIGKILL");
      } catch {
        /* gone */
      }
    }
    rmSync(work, { recursive: true, force: true });
  });

  /** Waits for `count` log lines matching `pred`: the replacement process writes to the same output. */
  async function logged(pred: (l: Record<string, unknown>) => boolean, count = 1, timeoutMs = 60_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while ((run?.logs ?? []).filter(pred).length < count) {
      if (Date.now() > deadline) throw new Error(`log line not seen; stderr: ${run?.stderr() ?? ""}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  test("Install: 202, the task followed through running, the restart survived, the new version shown from /api/health", async () => {
    // The next version, as a real artefact of this checkout, published by the release host (built while
    // the program starts and the page opens; published before the page checks for updates).
    const published = buildRelease({ root: ROOT, outDir: join(work, "out"), version: NEXT, baseUrl: `${host.url}/dl`, gzipLevel: 1, signKey: releasePrivateKeyFile() }).then((built) => {
      const name = artefactName(NEXT, thisPlatform());
      const files = signed({ [name]: readFileSync(built.artefact) });
      host.publish(releaseOf(NEXT, host.url, files), files);
    });
    // Not left unhandled while the steps below run; awaited before the check.
    published.catch(() => undefined);

    // This checkout runs as the installed release VERSION; the restart goes through the launcher of `current`.
    mkdirSync(join(install, "releases", VERSION), { recursive: true });
    symlinkSync(join("releases", VERSION), join(install, "current"));
    // A fixed API port (found free just now): the page must find the restarted service at the same origin.
    const port = await freePort();
    writeFileSync(
      join(work, "sluice.yaml"),
      `api:\n  http: 127.0.0.1:${port}\nupgrade:\n  release_api: ${host.api}\n  repository: test/sluice\n  timeout: 10s\n  public_key: ${releasePublicKeyFile()}\nplugins:\n  - { tag: main, type: sequence, args: [ { exec: reject 3 } ] }\n  - { tag: udp, type: udp_server, args: { entry: main, listen: "127.0.0.1:0" } }\n`,
    );
    run = startCli(["-c", "sluice.yaml", "-d", work], {
      cwd: work,
      env: { SLUICE_INSTALL_DIR: install, SLUICE_LAUNCHER: join(install, "current", "bin", "sluice"), SLUICE_NODE: process.execPath },
    });
    if (run.child.pid) pids.add(run.child.pid);
    await logged((l) => l.msg === "sluice started");

    const w = await browser.open();
    await w.page.goto(`http://127.0.0.1:${port}/#/system`);
    const card = w.page.getByTestId("upgrade");
    await card.getByTestId("upgrade-status").getByText("idle").waitFor();
    await w.page.getByTestId("health-version").getByText(VERSION).waitFor();
    await published;
    await card.getByRole("button", { name: "Check for updates" }).click();
    await card.getByTestId("upgrade-latest").getByText(NEXT).waitFor();
    await card.getByRole("button", { name: `Install ${NEXT}…` }).click();
    await card.getByRole("button", { name: `Yes, install ${NEXT} and restart` }).click();
    await card.getByTestId("upgrade-progress").getByText("accepted → running").waitFor();
    await w.screenshot("system-upgrade-running");

    // The old process restarts into the new release; the page waits for it and reads the new version.
    await card.getByTestId("upgrade-message").getByText(`Upgraded: Sluice ${NEXT} is serving now (was ${VERSION}).`).waitFor({ timeout: 90_000 });
    await w.page.getByTestId("health-version").getByText(NEXT).waitFor();
    await w.page.getByTestId("build-version").getByText(NEXT).waitFor();
    expect(await card.getByTestId("upgrade-running-version").textContent()).toBe(NEXT);
    await card.getByTestId("upgrade-status").getByText("completed").waitFor();
    const states = ((await card.getByTestId("upgrade-progress").getAttribute("data-states")) ?? "").split(" ");
    expect(states[0]).toBe("accepted");
    expect(states[1]).toBe("running");
    expect(states.slice(-2)).toEqual(["restart", "completed"]);
    await w.screenshot("system-upgrade-done");

    // What the page shows is what the server says.
    const health = (await (await fetch(`http://127.0.0.1:${port}/api/health`)).json()) as { version: string };
    expect(health.version).toBe(NEXT);
    expect(readlinkSync(join(install, "current"))).toBe(`releases/${NEXT}`);
    await logged((l) => l.msg === "upgrade complete: the new release is serving");
    // While the service restarted, the page's requests found no listener (and a not-ready one); nothing else went wrong.
    const gone = ["/api/upgrade/status", "/api/health", "/api/system", "/api/build"].flatMap((path) => [
      { status: "network" as const, path },
      { status: 503, path },
    ]);
    expect(w.problems(gone)).toEqual([]);
    await w.page.close();
  });
});
