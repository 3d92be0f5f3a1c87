// The upgrade engine's pure parts: semver precedence, asset selection and digests, request
// settings, the `upgrade` configuration section, and the install layout's links and lock.
import { existsSync, lstatSync, mkdirSync, readlinkSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, test } from "vitest";
import type { ConfigError } from "../../src/config/diagnostics.js";
import { loadConfigText } from "../../src/config/load.js";
import { installLayout, isVersionName, pointLink, withInstallLock } from "../../src/upgrade/layout.js";
import { resolveOptions, sourceField, SOURCE_FIELDS, UpgradeConfigError, UpgradeNotConfiguredError } from "../../src/upgrade/options.js";
import { artefactName, expectedSha256, releasesUrl, selectAsset, type Release } from "../../src/upgrade/release.js";
import { compareSemver, isNewer, parseSemver, tagVersion } from "../../src/upgrade/semver.js";
import { tempDir } from "../helpers/sluice.js";

describe("semver", () => {
  test("precedence follows semver.org §11", () => {
    const ordered = ["1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-alpha.beta", "1.0.0-beta", "1.0.0-beta.2", "1.0.0-beta.11", "1.0.0-rc.1", "1.0.0", "1.0.1", "1.1.0", "2.0.0", "10.0.0"];
    for (let i = 0; i < ordered.length - 1; i++) {
      const [a, b] = [parseSemver(ordered[i])!, parseSemver(ordered[i + 1])!];
      expect([ordered[i], compareSemver(a, b), compareSemver(b, a)]).toEqual([ordered[i], -1, 1]);
    }
    expect(compareSemver(parseSemver("v1.2.3+build.5")!, parseSemver("1.2.3")!)).toBe(0);
  });

  test("what is not semver is refused; tags become versions", () => {
    for (const bad of ["1.2", "01.2.3", "1.2.3-", "1.2.3-01", "latest", "1.2.3.4", "99999999999999999999.0.0", "../1.2.3"]) expect(parseSemver(bad), bad).toBeNull();
    expect(tagVersion("v0.2.0")).toBe("0.2.0");
    expect(tagVersion("nightly")).toBe("nightly");
    expect(isNewer("0.2.0", "0.1.0")).toBe(true);
    expect(isNewer("0.1.0", "0.1.0")).toBe(false);
    expect(isNewer("0.2.0-rc.1", "0.2.0")).toBe(false);
    // Either side not semver: any difference counts as newer.
    expect(isNewer("nightly", "0.1.0")).toBe(true);
    expect(isVersionName("0.2.0")).toBe(true);
    for (const bad of ["nightly", "../0.2.0", "0.2.0/..", "0.2.0-a/b"]) expect(isVersionName(bad), bad).toBe(false);
  });
});

describe("release records", () => {
  const target = { platform: "linux", arch: "x64", nodeMajor: 20 };
  const asset = (name: string, digest?: string) => ({ name, browser_download_url: `https://h/${name}`, ...(digest === undefined ? {} : { digest }) });
  const release = (assets: Release["assets"]): Release => ({ tag_name: "v0.2.0", prerelease: false, html_url: "", assets });

  test("the asset for this platform is chosen by its exact name", () => {
    expect(artefactName("0.2.0", target)).toBe("sluice-0.2.0-linux-x64-node20.tar.gz");
    const r = release([asset("sluice-0.2.0-linux-arm64-node20.tar.gz"), asset("sluice-0.2.0-linux-x64-node22.tar.gz"), asset("sluice-0.2.0-linux-x64-node20.tar.gz")]);
    expect(selectAsset(r, target).name).toBe("sluice-0.2.0-linux-x64-node20.tar.gz");
    expect(() => selectAsset(release([asset("sluice-0.2.0-linux-arm64-node20.tar.gz")]), target)).toThrow(/no artefact for linux-x64-node20 .* offers: sluice-0\.2\.0-linux-arm64-node20\.tar\.gz/);
  });

  test("a digest must be sha256:<64 hex>", () => {
    const hex = "ab".repeat(32);
    expect(expectedSha256(asset("a", `sha256:${hex.toUpperCase()}`))).toBe(hex);
    expect(() => expectedSha256(asset("a"))).toThrow(/no digest/);
    expect(() => expectedSha256(asset("a", "md5:abc"))).toThrow(/unsupported digest/);
    expect(() => expectedSha256(asset("a", `sha256:${hex.slice(2)}`))).toThrow(/unsupported digest/);
  });
});

describe("settings of a check or apply", () => {
  const ctx = { baseDir: "/", env: {} };
  const unsigned = { require_signature: false } as const;
  test("the configuration chooses the source; the request picks the release and carries the token", () => {
    const o = resolveOptions({ repository: "a/b", allow_prerelease: true, socks5: "socks5://p:1", ...unsigned }, { target: "v1.0.0", release_host_token: "t" }, ctx);
    expect(o).toMatchObject({ releaseApi: "https://api.github.com", repository: "a/b", allowPrerelease: true, socks5: "socks5://p:1", target: "v1.0.0", token: "t", timeoutMs: 60_000, maxBytes: 256 << 20, startDeadlineMs: 120_000, publicKey: null, requireSignature: false, installDir: null });
    // The shell (sluice upgrade --repository/--socks5) may choose them; the API never can.
    expect(resolveOptions({ repository: "a/b", ...unsigned }, {}, ctx, { repository: "c/d", socks5: null })).toMatchObject({ repository: "c/d", socks5: null });
  });

  test("a request naming a source is refused, naming the setting to use", () => {
    for (const [field, key] of Object.entries(SOURCE_FIELDS)) {
      expect(sourceField({ target: "latest", [field]: "x" })).toEqual({ field, key });
      expect(() => resolveOptions({ repository: "a/b", ...unsigned }, { [field]: "x" }, ctx)).toThrow(new RegExp(`^${field} cannot be chosen by a request .* set ${key.replace(".", "\\.")} in the configuration`));
    }
    expect(sourceField({ target: "latest", release_host_token: "t" })).toBeNull();
  });

  test("no upgrade section, or signatures required without a key: not configured", () => {
    expect(() => resolveOptions(null, {}, ctx)).toThrow(UpgradeNotConfiguredError);
    expect(() => resolveOptions({ repository: "a/b" }, {}, ctx)).toThrow(/upgrade\.public_key is not set/);
    expect(() => resolveOptions({ repository: "a/b", require_signature: true }, {}, ctx)).toThrow(UpgradeNotConfiguredError);
  });

  test("fields that cannot work are refused with their name", () => {
    const cases: [Parameters<typeof resolveOptions>[0], Parameters<typeof resolveOptions>[1], RegExp][] = [
      [{ ...unsigned }, {}, /no release repository/],
      [{ repository: "a/b", ...unsigned }, { bundle: "full" }, /bundle must be auto/],
      [{ repository: "a/b", ...unsigned }, { outbound: "direct" }, /outbound must be remote/],
      [{ repository: "a/b", socks5: "socks5://", ...unsigned }, {}, /socks5 must be/],
      [{ repository: "a/b", ...unsigned }, { target: "v1/../../x" }, /target must be latest or a release tag/],
      [{ repository: "a/b", ...unsigned }, { release_host_token: "a\nb" }, /single line/],
    ];
    for (const [config, request, error] of cases) expect(() => resolveOptions(config, request, ctx)).toThrow(error);
    expect(() => resolveOptions({ repository: "a/b", public_key: "/nonexistent.pem" }, {}, ctx)).toThrow(UpgradeConfigError);
  });

  test("a repository part may not be . or .. or start with a dot; the URL encodes each part", () => {
    for (const bad of ["../..", "./x", "x/.", "x/..", ".hidden/x", "x/.y", "a/b/c", "a", "a/", "/b", "a%2F../b"]) {
      expect(() => resolveOptions({ repository: bad, ...unsigned }, {}, ctx), bad).toThrow(/repository must be <owner>\/<name>/);
      expect(() => releasesUrl({ releaseApi: "http://h", repository: bad }, "/latest"), bad).toThrow(/repository must be/);
    }
    expect(releasesUrl({ releaseApi: "http://h/api/", repository: "me-1/sluice.dns_x" }, "/latest")).toBe("http://h/api/repos/me-1/sluice.dns_x/releases/latest");
  });
});

describe("the upgrade configuration section", () => {
  const load = (yaml: string) => loadConfigText(`upgrade:\n${yaml}\nplugins: []\n`);
  const problems = (yaml: string): string[] => {
    try {
      load(yaml);
      return [];
    } catch (err) {
      return (err as ConfigError).diagnostics.map((d) => `${d.line}: ${d.message}`);
    }
  };

  test("is read with its keys", () => {
    const c = load("  release_api: https://releases.example\n  repository: me/sluice\n  install_dir: /opt/sluice\n  allow_prerelease: true\n  timeout: 30s\n  max_download_bytes: 104857600\n  start_deadline: 5m\n  require_signature: false\n  socks5: socks5://127.0.0.1:1080");
    expect(c.upgrade).toEqual({ release_api: "https://releases.example", repository: "me/sluice", install_dir: "/opt/sluice", allow_prerelease: true, timeout: "30s", max_download_bytes: 104857600, start_deadline: "5m", require_signature: false, socks5: "socks5://127.0.0.1:1080" });
  });

  test("wrong keys and values are located", () => {
    expect(problems("  nope: 1")).toEqual(["2: unknown field 'nope'"]);
    expect(problems("  timeout: soon")[0]).toMatch(/^2: upgrade\.timeout: 'soon' is not a duration/);
    expect(problems("  start_deadline: 1s")).toEqual(["2: upgrade.start_deadline must be between 5s and 60m"]);
    expect(problems("  repository: nope")[0]).toMatch(/^2: 'repository' must match pattern/);
    expect(problems("  repository: ../..")[0]).toMatch(/^2: 'repository' must match pattern/);
    expect(problems("  require_signature: no")[0]).toMatch(/^2: 'require_signature' must be boolean/);
    expect(problems("  release_api: ftp://x")[0]).toMatch(/^2: 'release_api' must match pattern/);
    expect(problems("  max_download_bytes: 10")[0]).toMatch(/^2: 'max_download_bytes' must be >= 1048576/);
  });
});

describe("install layout", () => {
  test("a link is switched by one rename: no moment without it", () => {
    const dir = tempDir("sluice-layout-");
    const l = installLayout(dir);
    for (const v of ["1.0.0", "2.0.0"]) mkdirSync(join(l.releases, v), { recursive: true });
    symlinkSync("releases/1.0.0", l.current);
    pointLink(l.current, "2.0.0");
    expect(lstatSync(l.current).isSymbolicLink()).toBe(true);
    expect(readlinkSync(l.current)).toBe(join("releases", "2.0.0"));
    pointLink(l.previous, "1.0.0");
    expect(readlinkSync(l.previous)).toBe(join("releases", "1.0.0"));
  });

  test("one upgrade at a time across processes; a lock left by a dead process is taken over", async () => {
    const l = installLayout(tempDir("sluice-lock-"));
    mkdirSync(l.state, { recursive: true });
    // PID 1 is alive and not us: its lock holds.
    writeFileSync(join(l.state, "lock"), "1");
    await expect(withInstallLock(l, () => Promise.resolve(1))).rejects.toThrow(/another upgrade is running \(process 1/);
    // A PID that cannot exist: stale.
    writeFileSync(join(l.state, "lock"), "2147483646");
    expect(await withInstallLock(l, () => Promise.resolve(existsSync(join(l.state, "lock"))))).toBe(true);
    expect(existsSync(join(l.state, "lock"))).toBe(false);
  });
});
