// The settings of one check or apply: the `upgrade` section, with the few request fields that pick
// *which* release of the configured repository (target, allow_prerelease) and the release host's
// token on top. Where code comes from (repository, release host, proxy, key) is configuration only:
// a request naming it is refused. The token lives here and in the request only: never in
// configuration, actor context, logs or files.

import { createPublicKey, type KeyObject } from "node:crypto";
import { readFileSync } from "node:fs";
import { isAbsolute, resolve } from "node:path";
import { DEFAULT_MAX_DOWNLOAD_BYTES, DEFAULT_RELEASE_API, DEFAULT_START_DEADLINE, DEFAULT_UPGRADE_TIMEOUT, REPOSITORY_PATTERN, SOCKS5_PATTERN, type UpgradeConfig } from "../config/upgrade.js";
import { parseDuration } from "../engine/duration.js";
import { openOutbound } from "../engine/upstream/outbound.js";
import type { Outbound, OutboundSettings } from "../net/outbound.js";
import { detectInstallDir } from "./layout.js";

/** The optional JSON body of POST /api/upgrade/check and /apply. */
export interface UpgradeRequest {
  bundle?: string;
  outbound?: string;
  allow_prerelease?: boolean;
  target?: string;
  release_host_token?: string | null;
}

/**
 * Body fields that would choose where code comes from (or how it is trusted), each with the setting
 * to use instead. The spec lists `repository` and `socks5` as body fields; issue 22 withdrew them.
 */
export const SOURCE_FIELDS: Readonly<Record<string, string>> = {
  repository: "upgrade.repository",
  socks5: "upgrade.socks5",
  release_api: "upgrade.release_api",
  public_key: "upgrade.public_key",
  require_signature: "upgrade.require_signature",
  install_dir: "upgrade.install_dir",
};

/** The first field of `body` that chooses a source, with its configuration key; null when there is none. */
export function sourceField(body: unknown): { field: string; key: string } | null {
  if (typeof body !== "object" || body === null || Array.isArray(body)) return null;
  for (const field of Object.keys(body)) if (Object.hasOwn(SOURCE_FIELDS, field)) return { field, key: SOURCE_FIELDS[field] };
  return null;
}

export const upgradeRequestSchema = {
  type: "object",
  additionalProperties: false,
  properties: {
    bundle: { type: "string", description: "auto: a release holds every bundle; SLUICE_BUNDLE picks one at start." },
    outbound: { type: "string", description: "remote: connect to the release host (directly, or through upgrade.socks5)." },
    allow_prerelease: { type: "boolean", description: "Consider prereleases of upgrade.repository (default upgrade.allow_prerelease)." },
    target: { type: "string", description: "latest, or a release tag of upgrade.repository such as v0.2.0." },
    release_host_token: { type: ["string", "null"], description: "Token of the release host; sent only to upgrade.release_api, never logged or stored." },
  },
} as const;

/** What an operator at a shell may choose besides (sluice upgrade --repository/--socks5); never the API. */
export interface ShellOverrides {
  repository?: string;
  socks5?: string | null;
}

export interface UpgradeOptions {
  releaseApi: string;
  repository: string;
  target: string;
  allowPrerelease: boolean;
  timeoutMs: number;
  maxBytes: number;
  startDeadlineMs: number;
  publicKey: KeyObject | null;
  /** False only when the operator set upgrade.require_signature: false (then publicKey may be null). */
  requireSignature: boolean;
  socks5: string | null;
  /** upgrade.outbound's profile (bind address, proxy, resolver); null: direct (or through `socks5`). */
  outbound: Outbound | null;
  token: string | null;
  /** Null when the process does not run from an installed release (check still works). */
  installDir: string | null;
}

/** A setting or request field that cannot work: HTTP 400 invalid_upgrade_config. */
export class UpgradeConfigError extends Error {
  override readonly name = "UpgradeConfigError";
}

/** No `upgrade` section, or signatures required without a key: HTTP 409 upgrade_not_configured. */
export class UpgradeNotConfiguredError extends Error {
  override readonly name = "UpgradeNotConfiguredError";
}

export const NOT_CONFIGURED_MESSAGE =
  "upgrades are not configured: add an upgrade section with repository (<owner>/<name>) and public_key (the Ed25519 key releases are signed with); see docs/operations.md, Releases, upgrade and rollback";

export const NO_KEY_MESSAGE =
  "upgrade.public_key is not set: releases must carry a valid Ed25519 signature (upgrade.require_signature defaults to true); set upgrade.public_key to the key your releases are signed with";

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

function checkSocks5(socks5: string | null): void {
  if (socks5 === null) return;
  let host = "";
  try {
    host = new RegExp(SOCKS5_PATTERN).test(socks5) ? new URL(socks5).hostname : "";
  } catch {
    /* reported below */
  }
  if (!host) throw new UpgradeConfigError(`socks5 must be socks5://[user:pass@]host:port, not '${socks5}'`);
}

/** upgrade.outbound's profile; a proxy given at the shell (--socks5) replaces the profile's. */
function upgradeOutbound(name: string | undefined, profiles: Readonly<Record<string, OutboundSettings>>, shellSocks5: string | null | undefined): Outbound | null {
  if (name === undefined) return null;
  const settings = Object.hasOwn(profiles, name) ? profiles[name] : undefined;
  if (!settings) throw new UpgradeConfigError(`upgrade.outbound: no outbound profile '${name}' in network.outbound`);
  return openOutbound(shellSocks5 === undefined ? settings : { ...settings, socks5: shellSocks5 });
}

/**
 * Settings for one check/apply. Throws UpgradeNotConfiguredError without an `upgrade` section or
 * without the key signatures need, UpgradeConfigError naming the field that cannot work.
 */
export function resolveOptions(
  config: UpgradeConfig | null,
  request: UpgradeRequest,
  ctx: { baseDir: string; env?: NodeJS.ProcessEnv; outbound?: Readonly<Record<string, OutboundSettings>> },
  shell: ShellOverrides = {},
): UpgradeOptions {
  if (config === null) throw new UpgradeNotConfiguredError(NOT_CONFIGURED_MESSAGE);
  const source = sourceField(request);
  if (source !== null) throw new UpgradeConfigError(`${source.field} cannot be chosen by a request (it decides where code comes from); set ${source.key} in the configuration`);
  if (request.bundle !== undefined && request.bundle !== "auto") throw new UpgradeConfigError(`bundle must be auto (a release holds every bundle; SLUICE_BUNDLE picks one at start), not '${request.bundle}'`);
  if (request.outbound !== undefined && request.outbound !== "remote") throw new UpgradeConfigError(`outbound must be remote (set upgrade.socks5 for a proxy), not '${request.outbound}'`);
  const repository = shell.repository ?? config.repository;
  if (repository === undefined) throw new UpgradeConfigError("no release repository: set upgrade.repository (<owner>/<name>)");
  if (!new RegExp(REPOSITORY_PATTERN).test(repository)) throw new UpgradeConfigError(`repository must be <owner>/<name> (letters, digits, '-', '_', '.'; neither part starting with a dot), not '${repository}'`);
  const socks5 = shell.socks5 !== undefined ? shell.socks5 : (config.socks5 ?? null);
  checkSocks5(socks5);
  const outbound = upgradeOutbound(config.outbound, ctx.outbound ?? {}, shell.socks5);
  const target = request.target ?? "latest";
  if (target !== "latest" && !/^[0-9A-Za-z][0-9A-Za-z._+-]{0,127}$/.test(target)) throw new UpgradeConfigError(`target must be latest or a release tag, not '${target}'`);
  const token = request.release_host_token ?? null;
  if (token !== null && (token === "" || /[\r\n]/.test(token))) throw new UpgradeConfigError("release_host_token must be a non-empty single line");
  const publicKey = config.public_key ? loadPublicKey(config.public_key, ctx.baseDir) : null;
  const requireSignature = config.require_signature ?? true;
  if (requireSignature && publicKey === null) throw new UpgradeNotConfiguredError(NO_KEY_MESSAGE);
  return {
    releaseApi: config.release_api ?? DEFAULT_RELEASE_API,
    repository,
    target,
    allowPrerelease: request.allow_prerelease ?? config.allow_prerelease ?? false,
    timeoutMs: parseDuration(config.timeout ?? DEFAULT_UPGRADE_TIMEOUT),
    maxBytes: config.max_download_bytes ?? DEFAULT_MAX_DOWNLOAD_BYTES,
    startDeadlineMs: parseDuration(config.start_deadline ?? DEFAULT_START_DEADLINE),
    publicKey,
    requireSignature,
    socks5,
    outbound,
    token,
    installDir: detectInstallDir(config.install_dir, ctx.baseDir, ctx.env),
  };
}
