// Semantic versions (semver.org 2.0.0) as release tags carry them: "v1.2.3", "1.2.3-rc.1+build".
// Precedence follows §11: numeric core, then a release above its pre-releases, then pre-release
// identifiers left to right (numbers below text, numbers numerically); build metadata is ignored.

export interface SemVer {
  major: number;
  minor: number;
  patch: number;
  prerelease: (string | number)[];
  /** The canonical text without a leading "v" or build metadata. */
  text: string;
}

const NUM = "0|[1-9]\\d*";
const PRE_ID = `(?:${NUM}|\\d*[A-Za-z-][0-9A-Za-z-]*)`;
const PATTERN = new RegExp(`^v?(${NUM})\\.(${NUM})\\.(${NUM})(?:-(${PRE_ID}(?:\\.${PRE_ID})*))?(?:\\+[0-9A-Za-z-]+(?:\\.[0-9A-Za-z-]+)*)?$`);

/** The version in `text` (a leading "v" allowed), or null when it is not semver. */
export function parseSemver(text: string): SemVer | null {
  const m = PATTERN.exec(text.trim());
  if (!m) return null;
  const [major, minor, patch] = [m[1], m[2], m[3]].map(Number);
  // Beyond 2^53 numbers stop comparing exactly.
  if (![major, minor, patch].every(Number.isSafeInteger)) return null;
  const prerelease = m[4] ? m[4].split(".").map((id) => (/^\d+$/.test(id) ? Number(id) : id)) : [];
  return { major, minor, patch, prerelease, text: `${major}.${minor}.${patch}${m[4] ? `-${m[4]}` : ""}` };
}

function compareIds(a: string | number, b: string | number): number {
  if (typeof a === "number" && typeof b === "number") return Math.sign(a - b);
  if (typeof a === "number") return -1;
  if (typeof b === "number") return 1;
  return a < b ? -1 : a > b ? 1 : 0;
}

/** -1, 0 or 1 as `a` has lower, equal or higher precedence than `b`. */
export function compareSemver(a: SemVer, b: SemVer): number {
  for (const k of ["major", "minor", "patch"] as const) if (a[k] !== b[k]) return Math.sign(a[k] - b[k]);
  if (a.prerelease.length === 0 || b.prerelease.length === 0) return Math.sign(b.prerelease.length - a.prerelease.length);
  for (let i = 0; i < Math.min(a.prerelease.length, b.prerelease.length); i++) {
    const c = compareIds(a.prerelease[i], b.prerelease[i]);
    if (c !== 0) return c;
  }
  return Math.sign(a.prerelease.length - b.prerelease.length);
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
