// Puts a backup back. The archive is unpacked into a private staging directory with the release
// unpacker's rules (src/upgrade/extract.ts: regular files and directories only, inside the one top
// directory, no `..`, no absolute paths, no setuid bits, bounded in size); then the manifest must be
// one this version reads, every file it lists must be there with its size and sha256, and nothing
// else may be. Only then is anything written, each file atomically (a temp file beside it, renamed
// over it). A bad archive, or a file that exists without --force, writes nothing at all.

import { lstat, mkdir, mkdtemp, open, readFile, readdir, realpath, rm, type FileHandle } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join, relative, resolve, sep } from "node:path";
import { replaceFileAtomically } from "../config/atomic-file.js";
import { extractBounded } from "../upgrade/extract.js";
import { BACKUP_ROOT, MANIFEST_NAME, manifestProblem, sha256File, type Manifest } from "./manifest.js";

export interface RestoreOptions {
  archive: string;
  /** The working directory the data/ files go below. */
  dir: string;
  /** Where the config/ files go (default: dir). */
  configDir?: string;
  force: boolean;
}

export interface Restored {
  manifest: Manifest;
  /** What was written, in the manifest's order. */
  written: { name: string; path: string }[];
  /** The restored main configuration file. */
  config: string;
}

/** A refusal: the archive is bad, or would overwrite or leave its directories. Nothing was written. */
export class RestoreRefused extends Error {}

/** Restores write what an operator backed up: generous bounds, which still stop a decompression bomb. */
const LIMITS = { maxBytes: 64 * 1024 ** 3, maxRatio: 1100, maxEntries: 100_000 };
const CHUNK = 1024 * 1024;

async function listFiles(dir: string, prefix = ""): Promise<string[]> {
  const out: string[] = [];
  for (const e of await readdir(dir, { withFileTypes: true })) {
    const name = prefix === "" ? e.name : `${prefix}/${e.name}`;
    if (e.isDirectory()) out.push(...(await listFiles(join(dir, e.name), name)));
    else out.push(name);
  }
  return out;
}

/** The deepest part of `path` that exists, resolved through symbolic links. */
async function realExisting(path: string): Promise<string> {
  for (let p = path; ; p = dirname(p)) {
    try {
      return await realpath(p);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "ENOENT" || dirname(p) === p) throw err;
    }
  }
}

const within = (root: string, path: string): boolean => {
  const rel = relative(root, path);
  return rel === "" || (!rel.startsWith("..") && !rel.startsWith(sep) && rel !== "..");
};

/** Checks the staged archive against its manifest; the manifest. */
async function verify(top: string): Promise<Manifest> {
  let manifest: unknown;
  try {
    manifest = JSON.parse(await readFile(join(top, MANIFEST_NAME), "utf8"));
  } catch (err) {
    throw new RestoreRefused(`the archive has no readable ${BACKUP_ROOT}/${MANIFEST_NAME}: ${(err as Error).message}`);
  }
  const problem = manifestProblem(manifest);
  if (problem !== null) throw new RestoreRefused(problem);
  const m = manifest as Manifest;
  const listed = new Set(m.files.map((f) => f.name));
  for (const name of await listFiles(top)) {
    if (name !== MANIFEST_NAME && !listed.has(name)) throw new RestoreRefused(`${name} is in the archive but not in its manifest`);
  }
  for (const f of m.files) {
    let got;
    try {
      got = await sha256File(join(top, ...f.name.split("/")));
    } catch {
      throw new RestoreRefused(`${f.name} is in the manifest but not in the archive`);
    }
    if (got.size !== f.size || got.sha256 !== f.sha256) throw new RestoreRefused(`${f.name}: its sha256 is not the manifest's (the archive was changed or damaged)`);
  }
  return m;
}

/** Copies a staged file into the temp file replaceFileAtomically opened. */
export function copyInto(source: string): (handle: FileHandle) => Promise<void> {
  return async (handle) => {
    const input = await open(source, "r");
    try {
      const buf = Buffer.allocUnsafe(CHUNK);
      for (;;) {
        const { bytesRead } = await input.read(buf, 0, CHUNK, null);
        if (bytesRead === 0) break;
        for (let off = 0; off < bytesRead; ) off += (await handle.write(buf, off, bytesRead - off)).bytesWritten;
      }
    } finally {
      await input.close();
    }
  };
}

export async function restoreBackup(o: RestoreOptions): Promise<Restored> {
  const dir = resolve(o.dir);
  const configDir = resolve(o.configDir ?? o.dir);
  const staging = await mkdtemp(join(tmpdir(), "sluice-restore-"));
  try {
    const outcome = await extractBounded({ file: o.archive, dir: staging, root: BACKUP_ROOT, ...LIMITS });
    if (!outcome.ok) throw new RestoreRefused(outcome.error.replace("the artefact", "the archive"));
    const manifest = await verify(staging);
    // Where each file goes, checked before anything is written.
    const targets: { name: string; path: string; mode: number }[] = [];
    for (const f of manifest.files) {
      const [root, ...rest] = f.name.split("/");
      const base = root === "config" ? configDir : dir;
      const path = join(base, ...rest);
      // A directory of the target that is a symbolic link leading out of it would move the file elsewhere.
      const realBase = await realExisting(base);
      if (!within(realBase, await realExisting(dirname(path)))) throw new RestoreRefused(`${f.name}: ${dirname(path)} leads outside ${base}`);
      let existing;
      try {
        existing = await lstat(path);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
      }
      if (existing?.isDirectory()) throw new RestoreRefused(`${path} is a directory`);
      if (existing && !o.force) throw new RestoreRefused(`${path} exists: restore into an empty directory, or add --force to replace it`);
      const staged = join(staging, ...f.name.split("/"));
      targets.push({ name: f.name, path, mode: (await lstat(staged)).mode & 0o777 });
    }
    const written: Restored["written"] = [];
    for (const t of targets) {
      await mkdir(dirname(t.path), { recursive: true });
      await replaceFileAtomically(t.path, copyInto(join(staging, ...t.name.split("/"))), "restore", { mode: t.mode });
      written.push({ name: t.name, path: t.path });
    }
    return { manifest, written, config: join(configDir, ...manifest.config.split("/")) };
  } finally {
    await rm(staging, { recursive: true, force: true });
  }
}
