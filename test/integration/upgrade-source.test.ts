// Issue 22, defect 1 (remote code execution through upgrade apply) and the upgrade part of defect 8,
// against a real Sluice (in process) and a real release host on 127.0.0.1 that counts every request.
// The host serves an attacker's repository whose release would run the attacker's bin/sluice (it
// leaves a marker file); the process is configured for another repository on the same host. A body
// naming the repository (or a proxy, a release host, ...) used to install it; now it is refused
// with 400 naming the setting to use, and nothing at all is fetched. Without an `upgrade` section
// check and apply answer 409 upgrade_not_configured; on a listener others can reach without auth
// they answer 403 upgrade_requires_auth. Status answers throughout.
import { existsSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { VERSION } from "../../src/version.js";
import { fakeRelease } from "../helpers/fake-release.js";
import { releaseOf, startReleaseHost, type ReleaseHost } from "../helpers/release-host.js";
import { startSluice, tempDir } from "../helpers/sluice.js";
import { makeInstallDir, post, startUpgradable, status } from "../helpers/upgrade.js";

let host: ReleaseHost;
const marker = join(tempDir("sluice-rce-"), "attacker-code-ran");

beforeAll(async () => {
  // The attacker's repository: a release whose program, once run (the smoke test runs it), leaves a marker.
  host = await startReleaseHost("attacker/evil");
  const script = `#!/bin/sh\ntouch ${marker}\nexit 0\n`;
  // The later bin/sluice entry replaces the well-behaved one when unpacked.
  const evil = fakeRelease("9.9.9", { extra: [{ path: "sluice-9.9.9/bin/sluice", content: script, mode: 0o755 }] });
  // Unsigned: the attacker has no key (a digest the attacker's own release states is all it had to pass).
  const files = { [evil.name]: evil.body };
  host.publish(releaseOf("9.9.9", host.url, files), files);
});
afterAll(() => host.close());

const SOURCE_BODIES: [Record<string, unknown>, string, string][] = [
  [{ repository: "attacker/evil" }, "repository", "upgrade.repository"],
  [{ repository: "../.." }, "repository", "upgrade.repository"],
  [{ socks5: "socks5://127.0.0.1:22" }, "socks5", "upgrade.socks5"],
  [{ release_api: "http://127.0.0.1:1" }, "release_api", "upgrade.release_api"],
  [{ public_key: "-----BEGIN PUBLIC KEY-----" }, "public_key", "upgrade.public_key"],
  [{ require_signature: false }, "require_signature", "upgrade.require_signature"],
  [{ install_dir: "/tmp" }, "install_dir", "upgrade.install_dir"],
];

describe("a request cannot choose where code comes from", () => {
  test("the filed attack: apply with the attacker's repository is refused; nothing fetched, nothing installed, nothing run", async () => {
    const inst = makeInstallDir(VERSION);
    // Configured for another repository on the same host (it has no release there), with a signing key.
    const s = await startUpgradable({ releaseApi: host.api, repository: "test/sluice", installDir: inst.dir });
    try {
      for (const route of ["apply", "check"]) {
        for (const [body, field, key] of SOURCE_BODIES) {
          const res = await post(s.apiUrl, `/api/upgrade/${route}`, { target: "latest", ...body });
          const json = (await res.json()) as { ok: boolean; code: string; message: string };
          expect({ route, body, status: res.status, code: json.code }).toEqual({ route, body, status: 400, code: "upgrade_field_not_allowed" });
          expect(json.message).toMatch(new RegExp(`^${field} cannot be chosen by a request .*set ${key.replace(".", "\\.")} in the configuration instead$`));
        }
      }
      // Give a task that should not exist the time to run.
      await new Promise((r) => setTimeout(r, 300));
      expect(await status(s.apiUrl)).toMatchObject({ state: "idle", installed_version: VERSION });
      expect(host.requests).toEqual([]);
      expect(inst.current()).toBe(`releases/${VERSION}`);
      expect(inst.releases()).toEqual([VERSION]);
      expect(existsSync(marker)).toBe(false);
    } finally {
      await s.stop();
    }
  });

  test("without an upgrade section: check and apply are 409 upgrade_not_configured, a source in the body 400; status answers; nothing fetched", async () => {
    const s = await startSluice(`api:\n  http: 127.0.0.1:0\nplugins:\n  - { tag: main, type: sequence, args: [ { exec: reject 3 } ] }\n`);
    try {
      for (const route of ["check", "apply"]) {
        const res = await post(s.apiUrl, `/api/upgrade/${route}`);
        expect(res.status).toBe(409);
        expect(await res.json()).toEqual({ ok: false, code: "upgrade_not_configured", message: expect.stringMatching(/^upgrades are not configured: add an upgrade section with repository .* and public_key/) as unknown });
        const withTarget = await post(s.apiUrl, `/api/upgrade/${route}`, { target: "v9.9.9" });
        expect(withTarget.status).toBe(409);
        const attack = await post(s.apiUrl, `/api/upgrade/${route}`, { repository: "attacker/evil" });
        expect(attack.status).toBe(400);
        expect(await attack.json()).toMatchObject({ code: "upgrade_field_not_allowed" });
      }
      expect(await status(s.apiUrl)).toMatchObject({ ok: true, state: "idle", installed_version: VERSION });
      expect(host.requests).toEqual([]);
      expect(existsSync(marker)).toBe(false);
    } finally {
      await s.stop();
    }
  });
});

describe("upgrade routes need auth on a listener others can reach", () => {
  const auth = { user: "admin", pass: "s3cret-upgrade" };
  const basic = `Basic ${Buffer.from(`${auth.user}:${auth.pass}`).toString("base64")}`;

  test("0.0.0.0 without auth: check and apply 403 upgrade_requires_auth (before the body is looked at); status answers", async () => {
    const s = await startUpgradable({ releaseApi: host.api, apiHttp: "0.0.0.0:0" });
    try {
      const base = s.apiUrl.replace("0.0.0.0", "127.0.0.1");
      for (const route of ["check", "apply"]) {
        for (const body of [undefined, { repository: "attacker/evil" }]) {
          const res = await post(base, `/api/upgrade/${route}`, body);
          expect(res.status).toBe(403);
          expect(await res.json()).toEqual({ ok: false, code: "upgrade_requires_auth", message: expect.stringMatching(/non-loopback API listener without authentication.*api\.http\.auth/) as unknown });
        }
      }
      expect((await fetch(`${base}/api/upgrade/status`)).status).toBe(200);
      expect(host.requests).toEqual([]);
    } finally {
      await s.stop();
    }
  });

  test("0.0.0.0 with auth: the routes work for an authenticated caller", async () => {
    const s = await startUpgradable({ releaseApi: host.api, repository: "attacker/evil", apiHttp: `{ listen: "0.0.0.0:0", auth: { type: basic, username: ${auth.user}, password: ${auth.pass} } }` });
    try {
      const base = s.apiUrl.replace("0.0.0.0", "127.0.0.1");
      expect((await post(base, "/api/upgrade/check")).status).toBe(401);
      const res = await fetch(`${base}/api/upgrade/check`, { method: "POST", headers: { authorization: basic } });
      expect(res.status).toBe(200);
      expect(await res.json()).toMatchObject({ ok: true, latest_version: "9.9.9" });
    } finally {
      await s.stop();
      host.requests.length = 0;
    }
  });
});
