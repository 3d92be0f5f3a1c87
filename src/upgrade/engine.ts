// The upgrade engine, shared by the API (the `upgrade` actor) and the CLI (`sluice upgrade`):
// check compares the newest release with this one; apply downloads its artefact for this platform,
// verifies the SHA-256 digest and the Ed25519 signature by upgrade.public_key (required unless the
// operator set upgrade.require_signature: false), unpacks it beside the running release in a worker
// thread, smoke-tests it on the running configuration, and only then writes the pending marker and
// switches `current`. Any failure before the switch leaves the install as it was.

import { spawn } from "node:child_process";
import { createHash, verify, type KeyObject } from "node:crypto";
import { createWriteStream, rmSync } from "node:fs";
import { mkdir, readFile, rm } from "node:fs/promises";
import { join } from "node:path";
import type { Logger } from "pino";
import { VERSION } from "../version.js";
import { httpGet, type RequestLimits } from "../net/http-get.js";
import { installLayout, isVersionName, linkedVersion, pointLink, pruneReleases, withInstallLock, type InstallLayout } from "./layout.js";
import { clearPending, writePending } from "./pending.js";
import { expectedSha256, fetchRelease, selectAsset, signatureName, thisPlatform, type Release, type ReleaseAsset } from "./release.js";
import { isNewer, tagVersion } from "./semver.js";
import { unpackRelease } from "./unpack.js";
import type { UpgradeOptions } from "./options.js";

export interface CheckResult {
  ok: true;
  current_version: string;
  latest_version: string;
  update_available: boolean;
  /** The artefact for this platform; null when the release has none. */
  asset_name: string | null;
  release_url: string;
}

export type ApplyOutcome = { outcome: "skipped"; version: string } | { outcome: "installed"; from: string; version: string };

export interface ApplyContext {
  log: Logger;
  /** The configuration the new release is smoke-tested on, and its working directory. */
  configPath: string;
  baseDir: string;
  /** False when a restart could not follow (the application is stopping): nothing is switched then. */
  canRestart?: () => boolean;
}

/** The longest a new release's `sluice check --self-test` may take. */
export const SMOKE_TEST_TIMEOUT_MS = 120_000;
const MAX_SIGNATURE_BYTES = 4096;

/** Thrown when apply needs an install directory and the process has none: HTTP 409 upgrade_not_installed. */
export class NotInstalledError extends Error {
  override readonly name = "NotInstalledError";
  constructor() {
    super("this process does not run from an installed release (<install_dir>/releases/<version> with a `current` symlink); install from a release artefact (README) or set upgrade.install_dir");
  }
}

function limits(o: UpgradeOptions): RequestLimits {
  return { timeoutMs: o.timeoutMs, maxBytes: o.maxBytes, token: o.token ? { origin: new URL(o.releaseApi).origin, value: o.token } : null, socks5: o.socks5, outbound: o.outbound };
}

function latest(o: UpgradeOptions): Promise<Release> {
  return fetchRelease({ releaseApi: o.releaseApi, repository: o.repository, target: o.target, allowPrerelease: o.allowPrerelease, limits: limits(o) });
}

/** The newest release against this one; downloads and changes nothing. */
export async function checkUpgrade(o: UpgradeOptions): Promise<CheckResult> {
  const release = await latest(o);
  const version = tagVersion(release.tag_name);
  let asset: string | null;
  try {
    asset = selectAsset(release, thisPlatform()).name;
  } catch {
    asset = null;
  }
  return { ok: true, current_version: VERSION, latest_version: version, update_available: isNewer(version, VERSION), asset_name: asset, release_url: release.html_url };
}

/** Downloads `asset` to `file`, returning the SHA-256 of what arrived. */
async function download(asset: ReleaseAsset, file: string, o: UpgradeOptions): Promise<string> {
  const hash = createHash("sha256");
  const out = createWriteStream(file, { mode: 0o600 });
  const closed = new Promise<void>((resolve, reject) => {
    out.on("close", resolve);
    out.on("error", reject);
  });
  try {
    await httpGet(asset.browser_download_url, { ...limits(o), accept: "application/octet-stream" }, (chunk) => {
      hash.update(chunk);
      out.write(chunk);
    });
  } finally {
    out.end();
    await closed;
  }
  return hash.digest("hex");
}

/** The signature asset of `asset`, required before anything is downloaded when a key is configured. */
function signatureAsset(release: Release, asset: ReleaseAsset, o: UpgradeOptions): ReleaseAsset | null {
  if (!o.publicKey) {
    if (o.requireSignature) throw new Error("upgrade.public_key is not set and upgrade.require_signature is true: nothing can be verified");
    return null;
  }
  const sigAsset = release.assets.find((a) => a.name === signatureName(asset.name));
  if (!sigAsset) throw new Error(`release ${release.tag_name} has no signature asset ${signatureName(asset.name)}; upgrade.public_key requires every release to be signed`);
  return sigAsset;
}

/** Ed25519 verification in libuv's thread pool: a large artefact is not hashed on the event loop. */
function verifyAsync(data: Buffer, key: KeyObject, sig: Buffer): Promise<boolean> {
  return new Promise((resolve, reject) => {
    verify(null, data, key, sig, (err, ok) => (err ? reject(err) : resolve(ok)));
  });
}

async function verifySignature(sigAsset: ReleaseAsset, asset: ReleaseAsset, file: string, key: KeyObject, o: UpgradeOptions): Promise<void> {
  const chunks: Buffer[] = [];
  await httpGet(sigAsset.browser_download_url, { ...limits(o), maxBytes: MAX_SIGNATURE_BYTES }, (c) => chunks.push(c));
  const raw = Buffer.concat(chunks);
  // Raw 64 bytes, or their base64 text.
  const sig = raw.length === 64 ? raw : Buffer.from(raw.toString("utf8").trim(), "base64");
  if (sig.length !== 64) throw new Error(`${sigAsset.name} is not an Ed25519 signature (64 bytes, raw or base64)`);
  if (!(await verifyAsync(await readFile(file), key, sig))) throw new Error(`the Ed25519 signature of ${asset.name} does not verify with upgrade.public_key`);
}

/** Runs the new release's own `sluice check --self-test` on the running configuration. */
export function smokeTest(releaseDir: string, ctx: Pick<ApplyContext, "configPath" | "baseDir">): Promise<void> {
  const env: NodeJS.ProcessEnv = { ...process.env, SLUICE_NODE: process.execPath };
  delete env.SLUICE_INSTALL_DIR;
  delete env.SLUICE_LAUNCHER;
  return new Promise((resolve, reject) => {
    const child = spawn(join(releaseDir, "bin", "sluice"), ["check", "--self-test", "-c", ctx.configPath, "-d", ctx.baseDir], { env, stdio: ["ignore", "pipe", "pipe"] });
    let output = "";
    const keep = (d: Buffer): void => {
      output = (output + d.toString()).slice(-2000);
    };
    child.stdout.on("data", keep);
    child.stderr.on("data", keep);
    const timer = setTimeout(() => child.kill("SIGKILL"), SMOKE_TEST_TIMEOUT_MS);
    child.on("error", (err) => {
      clearTimeout(timer);
      reject(new Error(`smoke test: cannot run ${releaseDir}/bin/sluice: ${err.message}`));
    });
    child.on("exit", (code, signal) => {
      clearTimeout(timer);
      if (code === 0) resolve();
      else reject(new Error(`smoke test: the new release's 'sluice check --self-test' ${signal ? `was killed (${signal})` : `exited ${code}`}: ${output.trim()}`));
    });
  });
}

/**
 * Installs the newest release when it is newer: everything up to the switch of `current`, which
 * happens last, after the pending marker is written. The caller restarts the service.
 */
export async function applyUpgrade(o: UpgradeOptions, ctx: ApplyContext): Promise<ApplyOutcome> {
  if (o.installDir === null) throw new NotInstalledError();
  const startedAt = Date.now();
  const l = installLayout(o.installDir);
  const log = ctx.log.child({ target: "upgrade" });
  const release = await latest(o);
  const version = tagVersion(release.tag_name);
  // `current` may already point past the running release (installed by the CLI, not yet restarted into).
  const installed = linkedVersion(l.current) ?? VERSION;
  if (!isNewer(version, VERSION) || !isNewer(version, installed)) {
    log.info({ running: VERSION, installed, latest: version }, "already the newest release; nothing to do");
    return { outcome: "skipped", version: installed };
  }
  if (!isVersionName(version)) throw new Error(`release tag '${release.tag_name}' is not a semantic version; only those are installed`);
  const asset = selectAsset(release, thisPlatform());
  const digest = expectedSha256(asset);
  const sigAsset = signatureAsset(release, asset, o);
  if (!o.publicKey) log.warn({ version }, "upgrade.require_signature is false and no upgrade.public_key is set: installing a release that only its own digest vouches for");
  return withInstallLock(l, async () => {
    const downloads = join(l.state, "downloads");
    await mkdir(downloads, { recursive: true });
    const file = join(downloads, `${asset.name}.part`);
    let releaseDir: string | null = null;
    try {
      log.info({ version, asset: asset.name }, "downloading");
      const got = await download(asset, file, o);
      if (got !== digest) throw new Error(`digest mismatch for ${asset.name}: the release says sha256:${digest}, the download is sha256:${got}`);
      if (sigAsset && o.publicKey) await verifySignature(sigAsset, asset, file, o.publicKey, o);
      log.info({ version, sha256: got, signed: o.publicKey !== null }, "verified; unpacking");
      releaseDir = await unpackRelease(file, l, version, thisPlatform(), { maxBytes: o.maxBytes * 4 });
      log.info({ version, dir: releaseDir }, "unpacked; smoke-testing the new release on the running configuration");
      await smokeTest(releaseDir, ctx);
      if (ctx.canRestart && !ctx.canRestart()) throw new Error("the application is stopping; the upgrade was not switched in");
      switchTo(l, version, o.startDeadlineMs, startedAt);
      const removed = pruneReleases(l, [VERSION]);
      log.info({ from: VERSION, to: version, removed }, "switched current to the new release");
      return { outcome: "installed", from: VERSION, version };
    } catch (err) {
      if (releaseDir !== null && linkedVersion(l.current) !== version) {
        clearPending(l);
        await rm(releaseDir, { recursive: true, force: true });
      }
      throw err;
    } finally {
      rmSync(file, { force: true });
    }
  });
}

/** Marker first, then `previous` → the running release, then `current` → the new one. */
function switchTo(l: InstallLayout, version: string, startDeadlineMs: number, startedAt: number): void {
  const from = linkedVersion(l.current) ?? VERSION;
  writePending(l, { from_version: from, to_version: version, started_at_ms: startedAt, start_deadline_ms: startDeadlineMs, attempts: 0 });
  pointLink(l.previous, from);
  pointLink(l.current, version);
}

/** `sluice upgrade rollback`: current and previous trade places. */
export async function rollbackInstall(installDir: string): Promise<{ from: string; to: string }> {
  const l = installLayout(installDir);
  return withInstallLock(l, () => {
    const current = linkedVersion(l.current);
    const previous = linkedVersion(l.previous);
    if (!current || !previous) return Promise.reject(new Error(`nothing to roll back to: ${l.previous} does not exist (it is kept by the first upgrade)`));
    pointLink(l.current, previous);
    pointLink(l.previous, current);
    return Promise.resolve({ from: current, to: previous });
  });
}
