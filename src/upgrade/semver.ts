// Semantic versions (semver.org 2.0.0) as release tags carry them: "v1.2.3", "1.2.3-rc.1+build".
// Parsing and precedence (§11: numeric core, a release above its pre-releases, pre-release
// identifiers left to right, build metadata ignored) are the semver package's.

import type * as Semver from "semver";
import { lazyModule } from "../lazy-module.js";

const semver = lazyModule<typeof Semver>("semver");

export interface SemVer {
  major: number;
  minor: number;
  patch: number;
  prerelease: readonly (string | number)[];
  /** The canonical text without a leading "v" or build metadata. */
  text: string;
}

/** The version in `text` (a leading "v" allowed), or null when it is not semver. */
export function parseSemver(text: string): SemVer | null {
  const v = semver().parse(text.trim());
  return v === null ? null : { major: v.major, minor: v.minor, patch: v.patch, prerelease: v.prerelease, text: v.version };
}

/** -1, 0 or 1 as `a` has lower, equal or higher precedence than `b`. */
export function compareSemver(a: SemVer, b: SemVer): number {
  return semver().compare(a.text, b.text);
}

/**
 * Whether `candidate` should replace `current`: higher precedence when both are semver; when either
 * is not, any different version counts as newer (an operator who tags releases otherwise still upgrades).
 */
export function isNewer(candidate: string, current: string): boolean {
  const a = parseSemver(candidate);
  const b = parseSemver(current);
  if (a && b) return compareSemver(a, b) > 0;
  return candidate.replace(/^v/, "") !== current.replace(/^v/, "");
}

/** The version a tag names: "v1.2.3" → "1.2.3"; a tag that is not semver is kept as written. */
export function tagVersion(tag: string): string {
  return parseSemver(tag)?.text ?? tag;
}
