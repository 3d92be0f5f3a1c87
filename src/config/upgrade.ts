// The `upgrade` section: where releases come from, whose key signs them, where they are installed,
// and the limits of the self-upgrade (docs/operations.md, "Releases, upgrade and rollback"). Where
// code comes from is chosen here only: request bodies of /api/upgrade/* cannot name a repository, a
// release host or a proxy, and without this section the upgrade routes answer upgrade_not_configured.

import { parseDuration } from "../engine/duration.js";

export const DEFAULT_RELEASE_API = "https://api.github.com";
export const DEFAULT_UPGRADE_TIMEOUT = "60s";
export const DEFAULT_MAX_DOWNLOAD_BYTES = 256 * 1024 * 1024;
export const DEFAULT_START_DEADLINE = "2m";

export interface UpgradeConfig {
  /** Base URL of a GitHub-compatible releases API. */
  release_api?: string;
  /** `<owner>/<name>`. */
  repository?: string;
  /** Holds releases/<version>/ and the `current` symlink; default: the one this process runs from. */
  install_dir?: string;
  allow_prerelease?: boolean;
  /** Time allowed for each request to the release host (release JSON, artefact, signature). */
  timeout?: string;
  max_download_bytes?: number;
  /** Time a new release has to reach `serving` after the restart before it is rolled back. */
  start_deadline?: string;
  /** Ed25519 public key (PEM text, or a path to a PEM file): releases must carry `<asset>.sig`. */
  public_key?: string;
  /** Default true: no release is unpacked without a valid signature by `public_key`. false is dangerous. */
  require_signature?: boolean;
  /** `socks5://[user:pass@]host:port` proxy for every request of the upgrade. */
  socks5?: string | null;
  /** A profile of network.outbound every request of the upgrade goes out through (bind, proxy, resolver). */
  outbound?: string;
}

/** `<owner>/<name>`: neither part empty, `.`, `..` or starting with a dot, so it can never name a path. */
export const REPOSITORY_PATTERN = "^[A-Za-z0-9_-][A-Za-z0-9_.-]{0,99}/[A-Za-z0-9_-][A-Za-z0-9_.-]{0,99}$";
export const SOCKS5_PATTERN = "^socks5h?://";

const nonEmpty = { type: "string", minLength: 1 } as const;

export const upgradeSchema = {
  type: "object",
  additionalProperties: false,
  properties: {
    release_api: { type: "string", pattern: "^https?://[^\\s]+$" },
    repository: { type: "string", pattern: REPOSITORY_PATTERN },
    install_dir: nonEmpty,
    allow_prerelease: { type: "boolean" },
    timeout: nonEmpty,
    max_download_bytes: { type: "integer", minimum: 1024 * 1024, maximum: 4 * 1024 * 1024 * 1024 },
    start_deadline: nonEmpty,
    public_key: nonEmpty,
    require_signature: { type: "boolean" },
    socks5: { type: ["string", "null"], pattern: SOCKS5_PATTERN },
    outbound: nonEmpty,
  },
} as const;

/** Bounds of the durations: shorter cannot finish anything, longer leaves an operator waiting for ages. */
const DURATION_BOUNDS: Record<"timeout" | "start_deadline", [number, number]> = {
  timeout: [1_000, 3_600_000],
  start_deadline: [5_000, 3_600_000],
};

/** What the schema cannot say: durations that parse and are in range. Each problem names its key. */
export function upgradeProblems(upgrade: UpgradeConfig | undefined): { key: string; message: string }[] {
  const out: { key: string; message: string }[] = [];
  for (const key of ["timeout", "start_deadline"] as const) {
    const value = upgrade?.[key];
    if (value === undefined) continue;
    let ms: number;
    try {
      ms = parseDuration(value);
    } catch (err) {
      out.push({ key, message: `upgrade.${key}: ${(err as Error).message}` });
      continue;
    }
    const [min, max] = DURATION_BOUNDS[key];
    if (ms < min || ms > max) out.push({ key, message: `upgrade.${key} must be between ${min / 1000}s and ${max / 60_000}m` });
  }
  return out;
}
