// Unpacking a downloaded artefact into releases/<version>: regular files and directories only,
// every path inside the artefact's one top-level directory, bounded in size and entry count, then
// the release's manifest must say it is this version for this platform.

import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync, renameSync, rmSync } from "node:fs";
import { join } from "node:path";
import { extract, type ReadEntry } from "tar";
import { readJson, type InstallLayout } from "./layout.js";
import { artefactRoot, platformTag, type PlatformTarget } from "./release.js";

/** What a release says about itself: `sluice-release.json` at the top of the artefact. */
export interface ReleaseManifest {
  name: "sluice";
  version: string;
  platform: string;
  arch: string;
  node_major: number;
  /** process.versions.modules of the Node that built the native addons. */
  node_abi: string;
  built_at: string;
}

export const MANIFEST_FILE = "sluice-release.json";

/** At most this many entries: a release has a few thousand files. */
export const MAX_ENTRIES = 100_000;

const REGULAR = new Set(["File", "OldFile", "ContiguousFile", "Directory"]);

/** Why an entry may not be unpacked, or null when it may. */
function entryProblem(path: string, entry: ReadEntry, root: string): string | null {
  if (!REGULAR.has(entry.type)) return `${path}: ${entry.type} entries are not allowed (regular files and directories only)`;
  const parts = path.split("/").filter((p) => p !== "" && p !== ".");
  if (path.startsWith("/") || path.includes("\\") || parts.includes("..")) return `${path}: the path leaves the release directory`;
  if (parts[0] !== root) return `${path}: outside the artefact's top directory ${root}/`;
  if (((entry.mode ?? 0) & 0o7000) !== 0) return `${path}: setuid, setgid and sticky bits are not allowed`;
  return null;
}

/**
 * Unpacks `file` (sluice-<version>/...) to releases/<version>; anything but plain files and
 * directories inside that one directory fails the whole artefact. Returns the release directory.
 */
export async function unpackRelease(file: string, l: InstallLayout, version: string, target: PlatformTarget, maxBytes: number): Promise<string> {
  const root = artefactRoot(version);
  const incoming = join(l.releases, `.incoming-${version}-${randomBytes(6).toString("hex")}`);
  mkdirSync(incoming, { recursive: true });
  let problem: string | null = null;
  let entries = 0;
  let bytes = 0;
  try {
    await extract({
      file,
      cwd: incoming,
      strip: 1,
      preserveOwner: false,
      strict: true,
      filter: (path, entry) => {
        if (problem !== null) return false;
        const e = entry as ReadEntry;
        entries++;
        bytes += e.size ?? 0;
        problem =
          entryProblem(path, e, root) ??
          (entries > MAX_ENTRIES ? `more than ${MAX_ENTRIES} entries` : null) ??
          (bytes > maxBytes ? `more than ${maxBytes} bytes unpacked (4 × upgrade.max_download_bytes)` : null);
        return problem === null;
      },
    });
    if (problem !== null) throw new Error(`the artefact was refused: ${problem as string}`);
    checkManifest(incoming, version, target);
    const dir = join(l.releases, version);
    if (existsSync(dir)) rmSync(dir, { recursive: true, force: true });
    renameSync(incoming, dir);
    return dir;
  } catch (err) {
    rmSync(incoming, { recursive: true, force: true });
    throw err;
  }
}

function checkManifest(dir: string, version: string, target: PlatformTarget): void {
  const m = readJson<Partial<ReleaseManifest>>(join(dir, MANIFEST_FILE));
  if (!m || m.name !== "sluice") throw new Error(`the artefact has no ${MANIFEST_FILE}; it is not a Sluice release`);
  if (m.version !== version) throw new Error(`the artefact holds version ${String(m.version)}, not ${version}`);
  const built = `${String(m.platform)}-${String(m.arch)}-node${String(m.node_major)}`;
  if (built !== platformTag(target)) throw new Error(`the artefact was built for ${built}; this system is ${platformTag(target)}`);
  if (m.node_abi !== process.versions.modules) throw new Error(`the artefact's native addons are for Node ABI ${String(m.node_abi)}; this Node is ABI ${process.versions.modules}`);
  if (!existsSync(join(dir, "bin", "sluice")) || !existsSync(join(dir, "dist", "src", "cli.js"))) throw new Error("the artefact lacks bin/sluice or dist/src/cli.js");
}
