// Releases in the shape of the GitHub releases API: the record the release host answers with, the
// asset built for this platform, and the artefact naming shared with the release builder.

import { validateSchema } from "../config/ajv.js";
import { REPOSITORY_PATTERN } from "../config/upgrade.js";
import { getJson, HttpError, type RequestLimits } from "../net/http-get.js";
import { compareSemver, parseSemver, tagVersion } from "./semver.js";

export interface ReleaseAsset {
  name: string;
  browser_download_url: string;
  /** "sha256:<hex>"; GitHub fills it in for every uploaded asset. */
  digest?: string | null;
  size?: number;
}

export interface Release {
  tag_name: string;
  prerelease: boolean;
  draft?: boolean;
  html_url: string;
  assets: ReleaseAsset[];
}

const releaseSchema = {
  type: "object",
  required: ["tag_name", "assets"],
  properties: {
    tag_name: { type: "string", minLength: 1, maxLength: 128 },
    prerelease: { type: "boolean", default: false },
    draft: { type: "boolean", default: false },
    html_url: { type: "string", default: "" },
    assets: {
      type: "array",
      maxItems: 1000,
      items: {
        type: "object",
        required: ["name", "browser_download_url"],
        properties: {
          name: { type: "string", minLength: 1 },
          browser_download_url: { type: "string", minLength: 1 },
          digest: { type: ["string", "null"] },
          size: { type: "integer", minimum: 0 },
        },
      },
    },
  },
} as const;

/** The largest release record read (a release with many assets is a few hundred KiB). */
export const MAX_RELEASE_JSON_BYTES = 4 * 1024 * 1024;

/** What a build is for: an artefact runs only on the same OS, CPU and Node major (native addons). */
export interface PlatformTarget {
  platform: string;
  arch: string;
  nodeMajor: number;
}

export function thisPlatform(): PlatformTarget {
  return { platform: process.platform, arch: process.arch, nodeMajor: Number(process.versions.node.split(".")[0]) };
}

export const platformTag = (t: PlatformTarget): string => `${t.platform}-${t.arch}-node${t.nodeMajor}`;

/** sluice-<version>-<platform>-<arch>-node<major>.tar.gz */
export const artefactName = (version: string, t: PlatformTarget): string => `sluice-${version}-${platformTag(t)}.tar.gz`;

/** The top-level directory inside an artefact. */
export const artefactRoot = (version: string): string => `sluice-${version}`;
/** The program's entry point in a checkout and in a release, which bin/sluice runs (rolldown.config.mjs). */
export const BUILT_CLI = "dist/bundle/cli.js";

/** The detached Ed25519 signature of an artefact is published as this asset. */
export const signatureName = (asset: string): string => `${asset}.sig`;

function asRelease(data: unknown, where: string): Release {
  const problems = validateSchema(releaseSchema, data);
  if (problems.length > 0) throw new HttpError(`${where}: not a release record (${problems[0].path.join(".") || "record"}: ${problems[0].message})`);
  return data as Release;
}

export interface ReleaseQuery {
  releaseApi: string;
  repository: string;
  /** "latest" or a tag. */
  target: string;
  allowPrerelease: boolean;
  limits: RequestLimits;
}

/** <release_api>/repos/<owner>/<name>/releases<path>, each part of the repository checked and encoded on its own. */
export function releasesUrl(q: Pick<ReleaseQuery, "releaseApi" | "repository">, path: string): string {
  if (!new RegExp(REPOSITORY_PATTERN).test(q.repository)) throw new Error(`repository must be <owner>/<name>, not '${q.repository}'`);
  const [owner, name] = q.repository.split("/").map(encodeURIComponent);
  return `${q.releaseApi.replace(/\/+$/, "")}/repos/${owner}/${name}/releases${path}`;
}

/** The release `target` names: the newest one (prereleases only when allowed), or a tag. */
export async function fetchRelease(q: ReleaseQuery): Promise<Release> {
  const limits = { ...q.limits, maxBytes: Math.min(q.limits.maxBytes, MAX_RELEASE_JSON_BYTES) };
  if (q.target !== "latest") {
    const tags = q.target.startsWith("v") ? [q.target] : [q.target, `v${q.target}`];
    for (const tag of tags) {
      const url = releasesUrl(q, `/tags/${encodeURIComponent(tag)}`);
      try {
        const release = asRelease(await getJson(url, limits), url);
        if (release.prerelease && !q.allowPrerelease) throw new HttpError(`release ${release.tag_name} is a prerelease; allow_prerelease is false`);
        return release;
      } catch (err) {
        if (!(err instanceof HttpError && err.status === 404) || tag === tags[tags.length - 1]) throw err;
      }
    }
  }
  if (!q.allowPrerelease) {
    // GitHub's /latest is the newest non-prerelease, non-draft release.
    const url = releasesUrl(q, "/latest");
    return asRelease(await getJson(url, limits), url);
  }
  const url = releasesUrl(q, "?per_page=30");
  const list = await getJson(url, limits);
  if (!Array.isArray(list)) throw new HttpError(`${url}: not a list of releases`);
  const candidates = list.flatMap((r) => {
    const release = asRelease(r, url);
    const version = parseSemver(release.tag_name);
    return !release.draft && version ? [{ release, version }] : [];
  });
  candidates.sort((a, b) => compareSemver(b.version, a.version));
  if (candidates.length === 0) throw new HttpError(`${url}: no release with a semantic version tag`);
  return candidates[0].release;
}

/** The artefact of `release` for this platform, or an error naming what the release offers. */
export function selectAsset(release: Release, target: PlatformTarget): ReleaseAsset {
  const want = artefactName(tagVersion(release.tag_name), target);
  const asset = release.assets.find((a) => a.name === want);
  if (asset) return asset;
  const offered = release.assets.map((a) => a.name).filter((n) => n.endsWith(".tar.gz"));
  throw new Error(`release ${release.tag_name} has no artefact for ${platformTag(target)} (${want}); it offers: ${offered.join(", ") || "none"}`);
}

/** The hex SHA-256 an asset's `digest` states; refuses assets without one. */
export function expectedSha256(asset: ReleaseAsset): string {
  const m = /^sha256:([0-9a-f]{64})$/i.exec(asset.digest ?? "");
  if (!m) throw new Error(`asset ${asset.name} has ${asset.digest ? `an unsupported digest '${asset.digest.slice(0, 80)}'` : "no digest"}; refusing to install an artefact that cannot be verified`);
  return m[1].toLowerCase();
}
