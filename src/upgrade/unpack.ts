// Unpacking a downloaded artefact into releases/<version>: gunzip and untar run in a worker thread,
// streamed and bounded in unpacked size, ratio and entries (extract.ts), with regular files and
// directories only, every path inside the artefact's one top directory; then the release's manifest
// must say it is this version for this platform. Anything refused leaves no partial release behind.

import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync } from "node:fs";
import { rename, rm } from "node:fs/promises";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { Worker } from "node:worker_threads";
import type { ExtractJob, ExtractOutcome } from "./extract.js";
import { readJson, type InstallLayout } from "./layout.js";
import { artefactRoot, BUILT_CLI, platformTag, type PlatformTarget } from "./release.js";

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
/** At most this many unpacked bytes per compressed byte (a release's is about 4; deflate's ceiling is ~1 032). */
export const MAX_RATIO = 200;
/** The longest an unpack may take; the worker is stopped after it. */
export const UNPACK_TIMEOUT_MS = 5 * 60_000;
/** The worker's heap: the unpack streams, so it needs little. */
const WORKER_HEAP_MB = 64;

const here = fileURLToPath(import.meta.url);
// Compiled, the worker sits beside this file; run from the TypeScript sources (vitest), the compiled copy in dist/ serves.
const WORKER_FILE = here.endsWith(".ts") ? resolve(dirname(here), "..", "..", "dist", "src", "upgrade", "unpack-worker.js") : join(dirname(here), "unpack-worker.js");

/** Runs one extraction in its own worker thread; the promise settles once the thread is gone. */
function extractInWorker(job: ExtractJob, timeoutMs: number): Promise<ExtractOutcome> {
  return new Promise((resolveOutcome) => {
    const worker = new Worker(WORKER_FILE, { workerData: { role: "sluice-unpack", job }, resourceLimits: { maxOldGenerationSizeMb: WORKER_HEAP_MB }, stdout: false, stderr: false });
    let outcome: ExtractOutcome | null = null;
    const timer = setTimeout(() => {
      outcome ??= { ok: false, error: `the artefact was refused: unpacking took longer than ${timeoutMs / 1000}s` };
      void worker.terminate();
    }, timeoutMs);
    worker.on("message", (m: ExtractOutcome) => {
      outcome ??= m;
      void worker.terminate();
    });
    worker.on("error", (err) => {
      outcome ??= { ok: false, error: `the artefact cannot be unpacked: ${err.message}` };
    });
    worker.on("exit", () => {
      clearTimeout(timer);
      resolveOutcome(outcome ?? { ok: false, error: "the artefact cannot be unpacked: the unpack worker ended without an answer" });
    });
  });
}

export interface UnpackLimits {
  /** Most bytes of tar stream the artefact may expand to. */
  maxBytes: number;
  maxRatio?: number;
  timeoutMs?: number;
}

/**
 * Unpacks `file` (sluice-<version>/...) to releases/<version>; anything but plain files and
 * directories inside that one directory, or more than the limits allow, fails the whole artefact
 * and removes what was written. Returns the release directory.
 */
export async function unpackRelease(file: string, l: InstallLayout, version: string, target: PlatformTarget, limits: UnpackLimits): Promise<string> {
  const root = artefactRoot(version);
  const incoming = join(l.releases, `.incoming-${version}-${randomBytes(6).toString("hex")}`);
  mkdirSync(incoming, { recursive: true });
  try {
    const outcome = await extractInWorker(
      { file, dir: incoming, root, maxBytes: limits.maxBytes, maxRatio: limits.maxRatio ?? MAX_RATIO, maxEntries: MAX_ENTRIES },
      limits.timeoutMs ?? UNPACK_TIMEOUT_MS,
    );
    if (!outcome.ok) throw new Error(outcome.error);
    checkManifest(incoming, version, target);
    const dir = join(l.releases, version);
    if (existsSync(dir)) await rm(dir, { recursive: true, force: true });
    await rename(incoming, dir);
    return dir;
  } catch (err) {
    await rm(incoming, { recursive: true, force: true });
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
  if (!existsSync(join(dir, "bin", "sluice")) || !existsSync(join(dir, BUILT_CLI))) throw new Error(`the artefact lacks bin/sluice or ${BUILT_CLI}`);
}
