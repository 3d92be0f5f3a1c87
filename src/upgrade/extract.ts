// Streaming, bounded extraction of a release artefact, run in the unpack worker thread
// (unpack-worker.ts): the file is read in small chunks, gunzipped as a stream, and every chunk of
// output is counted before tar sees it. More than `maxBytes` out, or more than `maxRatio` times the
// compressed bytes read, ends it at once (a gzip bomb never gets past its first megabytes), as does
// any entry that is not a plain file or directory inside the artefact's one top directory.

import { createReadStream } from "node:fs";
import { Transform, type TransformCallback } from "node:stream";
import { pipeline } from "node:stream/promises";
import { createGunzip } from "node:zlib";
import { Unpack, type ReadEntry } from "tar";

export interface ExtractJob {
  file: string;
  /** An empty directory the artefact's top directory is unpacked into (stripped). */
  dir: string;
  /** The artefact's top-level directory, sluice-<version>. */
  root: string;
  /** Most bytes of tar stream (headers, contents, padding) the gzip may expand to. */
  maxBytes: number;
  /** Most unpacked bytes per compressed byte, judged once MIN_RATIO_BYTES have come out. */
  maxRatio: number;
  maxEntries: number;
}

export type ExtractOutcome = { ok: true; entries: number; bytes: number } | { ok: false; error: string };

/** Below this much output the ratio is not judged: a small tar is mostly padding and compresses very well. */
export const MIN_RATIO_BYTES = 1024 * 1024;
/** A tar ends with two zero blocks, padded to a record (GNU tar: 10 KiB); more after the end is refused. */
export const MAX_TRAILING_BYTES = 1024 * 1024;
/** Read and inflate in pieces this big, so no single step holds much. */
const CHUNK = 64 * 1024;

const REGULAR = new Set(["File", "OldFile", "ContiguousFile", "Directory"]);

/** Why an entry may not be unpacked, or null when it may. */
export function entryProblem(path: string, entry: ReadEntry, root: string): string | null {
  if (!REGULAR.has(entry.type)) return `${path}: ${entry.type} entries are not allowed (regular files and directories only)`;
  const parts = path.split("/").filter((p) => p !== "" && p !== ".");
  if (path.startsWith("/") || path.includes("\\") || parts.includes("..")) return `${path}: the path leaves the release directory`;
  if (parts[0] !== root) return `${path}: outside the artefact's top directory ${root}/`;
  if (((entry.mode ?? 0) & 0o7000) !== 0) return `${path}: setuid, setgid and sticky bits are not allowed`;
  return null;
}

/** A refusal that stops the pipeline; its message is the reason. */
class Refused extends Error {}

/** Counts the compressed bytes read. */
function counter(onTotal: (total: number) => void): Transform {
  let total = 0;
  return new Transform({
    highWaterMark: CHUNK,
    transform(chunk: Buffer, _enc, done: TransformCallback) {
      total += chunk.length;
      onTotal(total);
      done(null, chunk);
    },
  });
}

export async function extractBounded(job: ExtractJob): Promise<ExtractOutcome> {
  let compressed = 0;
  let unpacked = 0;
  let entries = 0;
  let declared = 0;
  // Set from the stream callbacks; a holder, so the checks after the pipeline read it fresh.
  const refused: { problem: string | null } = { problem: null };
  const controller = new AbortController();
  const refuse = (why: string): never => {
    refused.problem ??= why;
    throw new Refused(why);
  };
  const unpack = new Unpack({
    cwd: job.dir,
    strip: 1,
    preserveOwner: false,
    strict: true,
    // The gunzip is ours (counted); a compressed stream inside it is refused below, never sniffed and inflated by tar.
    zstd: false,
    brotli: false,
    filter: (path: string, entry: unknown) => {
      if (refused.problem !== null) return false;
      const e = entry as ReadEntry;
      entries++;
      declared += e.size ?? 0;
      const why =
        entryProblem(path, e, job.root) ??
        (entries > job.maxEntries ? `more than ${job.maxEntries} entries` : null) ??
        (declared > job.maxBytes ? `its files declare more than ${job.maxBytes} bytes (4 × upgrade.max_download_bytes)` : null);
      if (why !== null) {
        refused.problem = why;
        controller.abort();
      }
      return why === null;
    },
  });
  // tar keeps (and re-copies, at every write) whatever follows the end of the archive: it never gets it.
  let archiveEnded = false;
  let trailing = 0;
  unpack.on("eof", () => (archiveEnded = true));
  const guard = new Transform({
    highWaterMark: CHUNK,
    transform(chunk: Buffer, _enc, done: TransformCallback) {
      try {
        if (unpacked === 0 && (chunk[0] === 0x1f || chunk[0] === 0x28)) refuse("the artefact is compressed twice (a gzip or zstd stream inside the gzip)");
        unpacked += chunk.length;
        if (unpacked > job.maxBytes) refuse(`more than ${job.maxBytes} bytes unpacked (4 × upgrade.max_download_bytes)`);
        if (unpacked >= MIN_RATIO_BYTES && unpacked > compressed * job.maxRatio) refuse(`it expands more than ${job.maxRatio} times (${unpacked} bytes from ${compressed}): a decompression bomb`);
        if (archiveEnded) {
          trailing += chunk.length;
          if (trailing > MAX_TRAILING_BYTES) refuse(`more than ${MAX_TRAILING_BYTES} bytes follow the end of the tar archive`);
          done();
          return;
        }
      } catch (err) {
        done(err as Error);
        return;
      }
      done(null, chunk);
    },
  });
  try {
    await pipeline(createReadStream(job.file, { highWaterMark: CHUNK }), counter((total) => (compressed = total)), createGunzip({ chunkSize: CHUNK }), guard, unpack, { signal: controller.signal });
  } catch (err) {
    if (refused.problem !== null) return { ok: false, error: `the artefact was refused: ${refused.problem}` };
    return { ok: false, error: `the artefact cannot be unpacked: ${(err as Error).message}` };
  }
  if (refused.problem !== null) return { ok: false, error: `the artefact was refused: ${refused.problem}` };
  return { ok: true, entries, bytes: unpacked };
}
