// The settings of one check or apply: the `upgrade` section with a request's overrides (the spec's
// body fields) on top. The release host's token lives here and in the request only: never in
// configuration, actor context, logs or files.

import { createPublicKey, type KeyObject } from "node:crypto";
import { readFileSync } from "node:fs";
import { isAbsolute, resolve } from "node:path";
import { DEFAULT_MAX_DOWNLOAD_BYTES, DEFAULT_RELEASE_API, DEFAULT_START_DEADLINE, DEFAULT_UPGRADE_TIMEOUT, REPOSITORY_PATTERN, SOCKS5_PATTERN, type UpgradeConfig } from "../config/upgrade.js";
import { parseDuration } from "../engine/duration.js";
import { detectInstallDir } from "./layout.js";

/** The optional JSON body of POST /api/upgrade/check and /apply. */
export interface UpgradeRequest {
  repository?: string;
  bundle?: string;
  outbound?: string;
  socks5?: string | null;
  allow_prerelease?: boolean;
  target?: string;
  release_host_token?: string | null;
}

export const upgradeRequestSchema = {
  type: "object",
  additionalProperties: false,
  properties: {
    repository: { type: "string", description: "Release repository, <owner>/<name> (default: upgrade.repository)." },
    bundle: { type: "string", description: "auto: a release holds every bundle; SLUICE_BUNDLE picks one at start." },
    outbound: { type: "string", description: "remote: connect to the release host (directly, or through socks5)." },
    socks5: { type: ["string", "null"], description: "socks5://[user:pass@]host:port for this request; null: direct." },
    allow_prerelease: { type: "boolean" },
    target: { type: "string", description: "latest, or a release tag such as v0.2.0." },
    release_host_token: { type: ["string", "null"], description: "Token of the release host; sent only to it, never logged or stored." },
  },
} as const;

export interface UpgradeOptions {
  releaseApi: string;
  repository: string;
  target: string;
  allowPrerelease: boolean;
  timeoutMs: number;
  maxBytes: number;
  startDeadlineMs: number;
  publicKey: KeyObject | null;
  socks5: string | null;
  token: string | null;
  /** Null when the process does not run from an installed release (check still works). */
  installDir: string | null;
}

/** A setting or request field that cannot work: HTTP 400 invalid_upgrade_config. */
export class UpgradeConfigError extends Error {
  override readonly name = "UpgradeConfigError";
}

function loadPublicKey(value: string, baseDir: string): KeyObject {
  let pem = value;
  if (!value.includes("-----BEGIN")) {
    const path = isAbsolute(value) ? value : resolve(baseDir, value);
    try {
      pem = readFileSync(path, "utf8");
    } catch (err) {
      throw new UpgradeConfigError(`upgrade.public_key: cannot read ${path} (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
    }
  }
  let key: KeyObject;
  try {
    key = createPublicKey(pem);
  } catch (err) {
    throw new UpgradeConfigError(`upgrade.public_key: not a PEM public key (${(err as Error).message})`);
  }
  if (key.asymmetricKeyType !== "ed25519") throw new UpgradeConfigError(`upgrade.public_key must be an Ed25519 key, not ${String(key.asymmetricKeyType)}`);
  return key;
}

/** Settings for one check/apply; throws UpgradeConfigError naming the field that cannot work. */
export function resolveOptions(config: UpgradeConfig | null, request: UpgradeRequest, ctx: { baseDir: string; env?: NodeJS.ProcessEnv }): UpgradeOptions {
  const c = config ?? {};
  if (request.bundle !== undefined && request.bundle !== "auto") throw new UpgradeConfigError(`bundle must be auto (a release holds every bundle; SLUICE_BUNDLE picks one at start), not '${request.bundle}'`);
  if (request.outbound !== undefined && request.outbound !== "remote") throw new UpgradeConfigError(`outbound must be remote (use socks5 for a proxy), not '${request.outbound}'`);
  const repository = request.repository ?? c.repository;
  if (repository === undefined) throw new UpgradeConfigError("no release repository: set upgrade.repository (<owner>/<name>) or send repository");
  if (!new RegExp(REPOSITORY_PATTERN).test(repository)) throw new UpgradeConfigError(`repository must be <owner>/<name>, not '${repository}'`);
  const socks5 = request.socks5 !== undefined ? request.socks5 : (c.socks5 ?? null);
  if (socks5 !== null && !new RegExp(SOCKS5_PATTERN).test(socks5)) throw new UpgradeConfigError(`socks5 must be socks5://[user:pass@]host:port, not '${socks5}'`);
  if (socks5 !== null) {
    try {
      if (!new URL(socks5).hostname) throw new Error("no host");
    } catch {
      throw new UpgradeConfigError(`socks5 must be socks5://[user:pass@]host:port, not '${socks5}'`);
    }
  }
  const target = request.target ?? "latest";
  if (target !== "latest" && !/^[0-9A-Za-z][0-9A-Za-z._+-]{0,127}$/.test(target)) throw new UpgradeConfigError(`target must be latest or a release tag, not '${target}'`);
  const token = request.release_host_token ?? null;
  if (token !== null && (token === "" || /[\r\n]/.test(token))) throw new UpgradeConfigError("release_host_token must be a non-empty single line");
  return {
    releaseApi: c.release_api ?? DEFAULT_RELEASE_API,
    repository,
    target,
    allowPrerelease: request.allow_prerelease ?? c.allow_prerelease ?? false,
    timeoutMs: parseDuration(c.timeout ?? DEFAULT_UPGRADE_TIMEOUT),
    maxBytes: c.max_download_bytes ?? DEFAULT_MAX_DOWNLOAD_BYTES,
    startDeadlineMs: parseDuration(c.start_deadline ?? DEFAULT_START_DEADLINE),
    publicKey: c.public_key ? loadPublicKey(c.public_key, ctx.baseDir) : null,
    socks5,
    token,
    installDir: detectInstallDir(c.install_dir, ctx.baseDir, ctx.env),
  };
}
