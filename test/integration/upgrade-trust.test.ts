// What the upgrade trusts and whom it tells: the release host's token goes to the release host only
// (not to a download host it redirects to) and appears in no log, status, actor listing or file;
// only a release signed with upgrade.public_key's Ed25519 key is unpacked (an unsigned or badly
// signed one is refused before unpack, the running release intact), unless the operator sets
// upgrade.require_signature: false; the configured SOCKS5 proxy carries every request, and a
// request cannot name another.
import { generateKeyPairSync, sign } from "node:crypto";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { signatureName } from "../../src/upgrade/release.js";
import { VERSION } from "../../src/version.js";
import { fakeRelease } from "../helpers/fake-release.js";
import { releaseOf, signed, startReleaseHost, type ReleaseHost } from "../helpers/release-host.js";
import { tempDir } from "../helpers/sluice.js";
import { startSocks5 } from "../helpers/socks5.js";
import { filesUnder, makeInstallDir, post, startUpgradable } from "../helpers/upgrade.js";

let api: ReleaseHost;
let downloads: ReleaseHost;

beforeAll(async () => {
  api = await startReleaseHost();
  downloads = await startReleaseHost();
});
afterAll(async () => {
  await api.close();
  await downloads.close();
});

describe("release_host_token", () => {
  test("is sent to the release host only, and never logged, shown or stored", async () => {
    const token = "ghp_TOKEN-that-must-not-leak-4242";
    const a = fakeRelease("9.9.9");
    const files = signed({ [a.name]: a.body });
    // The record comes from the release host; the artefact from another origin (as GitHub's downloads do).
    api.publish(releaseOf("9.9.9", downloads.url, files), {});
    downloads.publish(releaseOf("9.9.9", downloads.url, files), files);
    const inst = makeInstallDir(VERSION);
    const s = await startUpgradable({ releaseApi: api.api, installDir: inst.dir });
    const upgrader = s.app.upgradeActor;
    const seen: string[] = [];
    try {
      const check = await post(s.apiUrl, "/api/upgrade/check", { release_host_token: token });
      expect(check.status).toBe(200);
      const apply = await post(s.apiUrl, "/api/upgrade/apply", { release_host_token: token });
      expect(apply.status).toBe(202);
      // While the task runs, every place the API shows state.
      for (const path of ["/api/upgrade/status", "/api/actors", "/api/logs?limit=1000&level=trace", "/api/control"]) seen.push(await (await fetch(s.apiUrl + path)).text());
      await s.app.done;
      expect(upgrader.getSnapshot().value).toBe("restarting");
      for (const file of [...filesUnder(inst.dir), ...filesUnder(s.dir)]) expect(readFileSync(file, "latin1"), file).not.toContain(token);
    } finally {
      await s.stop();
    }
    expect(api.requests.filter((r) => r.path.includes("/releases/")).map((r) => r.authorization)).toEqual([`Bearer ${token}`, `Bearer ${token}`]);
    expect(downloads.requests.map((r) => [r.path, r.authorization])).toEqual([
      [`/dl/${a.name}`, null],
      [`/dl/${signatureName(a.name)}`, null],
    ]);
    for (const text of seen) expect(text).not.toContain(token);
    expect(JSON.stringify(s.logs)).not.toContain(token);
    expect(JSON.stringify(upgrader.getSnapshot().context)).not.toContain(token);
  });
});

describe("signatures: upgrade.public_key and upgrade.require_signature", () => {
  const { publicKey, privateKey } = generateKeyPairSync("ed25519");
  const other = generateKeyPairSync("ed25519").privateKey;

  interface Outcome {
    state: string;
    error: string | null;
    current: string;
    releases: string[];
    /** What the release host was asked for during the apply. */
    fetched: string[];
  }

  /** Publishes 9.9.9 with `sigOf`'s signature (none when null) and applies it with `settings`. */
  async function applyWith(sigOf: ((body: Buffer) => Buffer) | null, settings: { publicKey?: string | null; extra?: string } = {}): Promise<Outcome & { logs: Record<string, unknown>[] }> {
    const a = fakeRelease("9.9.9");
    const files: Record<string, Buffer> = { [a.name]: a.body };
    if (sigOf) files[signatureName(a.name)] = sigOf(a.body);
    api.publish(releaseOf("9.9.9", api.url, files), files);
    const inst = makeInstallDir(VERSION);
    const dir = tempDir("sluice-key-");
    writeFileSync(join(dir, "release.pub"), publicKey.export({ type: "spki", format: "pem" }));
    const s = await startUpgradable({ releaseApi: api.api, installDir: inst.dir, publicKey: settings.publicKey === undefined ? join(dir, "release.pub") : settings.publicKey, extra: settings.extra });
    const upgrader = s.app.upgradeActor;
    const before = api.requests.length;
    try {
      expect((await post(s.apiUrl, "/api/upgrade/apply")).status).toBe(202);
      await new Promise<void>((resolve) => {
        const sub = upgrader.subscribe((snap) => {
          if (snap.value === "failed" || snap.value === "restarting") {
            sub.unsubscribe();
            resolve();
          }
        });
      });
      const snap = upgrader.getSnapshot();
      return { state: String(snap.value), error: snap.context.error, current: inst.current(), releases: inst.releases(), fetched: api.requests.slice(before).map((r) => r.path), logs: s.logs };
    } finally {
      await s.stop();
    }
  }

  test("a release signed with the key installs (raw or base64 signature)", async () => {
    expect(await applyWith((b) => sign(null, b, privateKey))).toMatchObject({ state: "restarting", current: "releases/9.9.9" });
    expect(await applyWith((b) => Buffer.from(sign(null, b, privateKey).toString("base64") + "\n"))).toMatchObject({ state: "restarting", current: "releases/9.9.9" });
  });

  test("unsigned: refused before anything is downloaded or unpacked; the running release intact", async () => {
    const name = fakeRelease("9.9.9").name;
    const r = await applyWith(null);
    expect(r).toMatchObject({ state: "failed", error: expect.stringMatching(/no signature asset .*\.tar\.gz\.sig; upgrade\.public_key requires every release to be signed/) as unknown, current: `releases/${VERSION}`, releases: [VERSION] });
    expect(r.fetched).toEqual(["/repos/test/sluice/releases/latest"]);
    expect(r.fetched).not.toContain(`/dl/${name}`);
  });

  test("a signature by another key, or one that is not a signature: refused before unpack, nothing switched", async () => {
    for (const [sigOf, error] of [
      [(b: Buffer) => sign(null, b, other), /does not verify with upgrade\.public_key/],
      [() => Buffer.from("garbage"), /not an Ed25519 signature/],
    ] as const) {
      const r = await applyWith(sigOf);
      expect(r).toMatchObject({ state: "failed", error: expect.stringMatching(error) as unknown, current: `releases/${VERSION}`, releases: [VERSION] });
      // Verified before unpack: the log never reached "unpacked".
      expect(r.logs.some((l) => l.msg === "verified; unpacking" || String(l.msg).startsWith("unpacked"))).toBe(false);
    }
  });

  test("no key and require_signature left at its default (true): check and apply refuse, nothing fetched", async () => {
    const inst = makeInstallDir(VERSION);
    const s = await startUpgradable({ releaseApi: api.api, installDir: inst.dir, publicKey: null });
    const before = api.requests.length;
    try {
      for (const route of ["check", "apply"]) {
        const res = await post(s.apiUrl, `/api/upgrade/${route}`);
        expect(res.status).toBe(409);
        expect(await res.json()).toMatchObject({ ok: false, code: "upgrade_not_configured", message: expect.stringMatching(/upgrade\.public_key is not set/) as unknown });
      }
      expect(api.requests.length).toBe(before);
      expect(inst.current()).toBe(`releases/${VERSION}`);
    } finally {
      await s.stop();
    }
  });

  test("require_signature: false without a key (documented as dangerous): an unsigned release installs, with a warning", async () => {
    const r = await applyWith(null, { publicKey: null, extra: "  require_signature: false" });
    expect(r).toMatchObject({ state: "restarting", current: "releases/9.9.9" });
    expect(r.logs.some((l) => l.level === 40 && /require_signature is false/.test(String(l.msg)))).toBe(true);
  });

  test("a key that is not an Ed25519 public key is refused as a configuration error", async () => {
    const dir = tempDir("sluice-key-");
    writeFileSync(join(dir, "rsa.pub"), generateKeyPairSync("rsa", { modulusLength: 1024 }).publicKey.export({ type: "spki", format: "pem" }));
    const s = await startUpgradable({ releaseApi: api.api, publicKey: join(dir, "rsa.pub") });
    try {
      const res = await post(s.apiUrl, "/api/upgrade/check");
      expect(res.status).toBe(400);
      expect(await res.json()).toMatchObject({ code: "invalid_upgrade_config", message: expect.stringMatching(/Ed25519/) as unknown });
    } finally {
      await s.stop();
    }
  });
});

describe("socks5", () => {
  test("the check goes through the proxy upgrade.socks5 names (and with user and password)", async () => {
    api.publish(releaseOf("9.9.9", api.url, {}), {});
    const port = new URL(api.url).port;
    for (const auth of [undefined, { user: "u", pass: "p w" }]) {
      const proxy = await startSocks5(auth);
      const s = await startUpgradable({ releaseApi: api.api, extra: `  socks5: "${proxy.url.replace("p w", "p%20w")}"` });
      try {
        const direct = api.requests.length;
        const res = await post(s.apiUrl, "/api/upgrade/check");
        expect(res.status).toBe(200);
        expect(await res.json()).toMatchObject({ latest_version: "9.9.9" });
        expect(proxy.targets).toEqual([`127.0.0.1:${port}`]);
        expect(api.requests.length).toBe(direct + 1);
      } finally {
        await s.stop();
        await proxy.close();
      }
    }
  });

  test("upgrade.outbound: the check goes out through the profile's proxy, from its bind address", async () => {
    api.publish(releaseOf("9.9.9", api.url, {}), {});
    const port = new URL(api.url).port;
    const proxy = await startSocks5();
    const s = await startUpgradable({ releaseApi: api.api, extra: `  outbound: egress\nnetwork:\n  outbound:\n    egress: { socks5: "${proxy.url}", bind: 127.0.0.3 }` });
    try {
      const res = await post(s.apiUrl, "/api/upgrade/check");
      expect(res.status).toBe(200);
      expect(await res.json()).toMatchObject({ latest_version: "9.9.9" });
      expect(proxy.targets).toEqual([`127.0.0.1:${port}`]);
      expect(proxy.clients).toEqual(["127.0.0.3"]);
    } finally {
      await s.stop();
      await proxy.close();
    }
  });

  test("a request cannot name a proxy: 400 upgrade_field_not_allowed, the proxy is never contacted", async () => {
    const proxy = await startSocks5();
    const s = await startUpgradable({ releaseApi: api.api });
    try {
      for (const socks5 of [proxy.url, null]) {
        const res = await post(s.apiUrl, "/api/upgrade/check", { socks5 });
        expect(res.status).toBe(400);
        expect(await res.json()).toMatchObject({ ok: false, code: "upgrade_field_not_allowed", message: expect.stringMatching(/^socks5 cannot be chosen by a request .*set upgrade\.socks5 in the configuration/) as unknown });
      }
      expect(proxy.targets).toEqual([]);
    } finally {
      await s.stop();
      await proxy.close();
    }
  });

  test("a proxy that refuses the credentials fails the check with a clear error", async () => {
    const proxy = await startSocks5({ user: "u", pass: "right" });
    const s = await startUpgradable({ releaseApi: api.api, extra: `  socks5: "${proxy.url.replace("right", "wrong")}"` });
    try {
      const res = await post(s.apiUrl, "/api/upgrade/check");
      expect(res.status).toBe(502);
      expect(await res.json()).toMatchObject({ code: "upgrade_check_failed", message: expect.stringMatching(/refused the user name and password/) as unknown });
    } finally {
      await s.stop();
      await proxy.close();
    }
  });
});
