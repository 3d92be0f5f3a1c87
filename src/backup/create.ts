// Builds a backup archive: every planned file is copied into a private staging directory (SQLite
// databases through SQLite's online backup API, which gives a consistent copy of a database in WAL mode
// that another process is writing), hashed, listed in the manifest, and the staging tree is packed
// into one .tar.gz. All of it is asynchronous (copies on libuv's threads, hashing a chunk at a time, the
// SQLite backup a batch of pages at a time, gzip in zlib's threads), so the API can build one while DNS is served.

import { constants, createWriteStream } from "node:fs";
import { copyFile, mkdir, mkdtemp, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { pipeline } from "node:stream/promises";
import { createGzip } from "node:zlib";
import Database from "better-sqlite3";
import type * as Tar from "tar";
import { lazyModule } from "../lazy-module.js";

const tar = lazyModule<typeof Tar>("tar");
import { VERSION } from "../version.js";
import { BACKUP_FORMAT, BACKUP_FORMAT_VERSION, BACKUP_ROOT, MANIFEST_NAME, sha256File, type Manifest, type ManifestFile } from "./manifest.js";
import type { BackupPlan, PlannedFile } from "./plan.js";

export interface BuiltBackup {
  /** The .tar.gz, inside the staging directory (mode 0600): move or stream it, then cleanup(). */
  archive: string;
  manifest: Manifest;
  cleanup(): Promise<void>;
}

/** tar keeps no hard links: every file is stored whole. */
class NoLinks extends Map<`${number}:${number}`, string> {
  override set(): this {
    return this;
  }
}

async function copySqlite(source: string, target: string): Promise<void> {
  const db = new Database(source, { readonly: true, fileMustExist: true });
  try {
    await db.backup(target);
  } finally {
    db.close();
  }
}

/** Copies one file into the staging tree; the reason it was left out, or null. */
async function stage(file: PlannedFile, top: string): Promise<string | null> {
  let info;
  try {
    info = await stat(file.source);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return "missing (not written yet)";
    throw err;
  }
  if (!info.isFile()) return "not a regular file";
  const target = join(top, ...file.name.split("/"));
  await mkdir(dirname(target), { recursive: true, mode: 0o700 });
  if (file.sqlite) await copySqlite(file.source, target);
  else await copyFile(file.source, target, constants.COPYFILE_EXCL);
  return null;
}

export async function buildBackup(plan: BackupPlan, options: { withQueries: boolean; now?: Date }): Promise<BuiltBackup> {
  const staging = await mkdtemp(join(tmpdir(), "sluice-backup-"));
  const cleanup = (): Promise<void> => rm(staging, { recursive: true, force: true });
  try {
    const top = join(staging, BACKUP_ROOT);
    await mkdir(top, { mode: 0o700 });
    const files: ManifestFile[] = [];
    const skipped = [...plan.skipped];
    for (const f of plan.files) {
      const reason = await stage(f, top);
      if (reason !== null) {
        if (f.name === `config/${plan.config}`) throw new Error(`${f.source}: ${reason}`);
        skipped.push({ path: f.source, from: f.from, reason });
        continue;
      }
      files.push({ name: f.name, from: f.from, ...(await sha256File(join(top, ...f.name.split("/")))) });
    }
    const manifest: Manifest = {
      format: BACKUP_FORMAT,
      format_version: BACKUP_FORMAT_VERSION,
      sluice_version: VERSION,
      created_at: (options.now ?? new Date()).toISOString(),
      config: plan.config,
      with_queries: options.withQueries,
      files,
      skipped,
    };
    await writeFile(join(top, MANIFEST_NAME), JSON.stringify(manifest, null, 2) + "\n", { mode: 0o600 });
    const archive = join(staging, "backup.tar.gz");
    // The manifest first, so a reader meets it before the files it vouches for.
    // tar writes headers and reads files; gzip runs in node:zlib's thread pool (tar's own gzip would compress on the event loop).
    const pack = tar().create({ cwd: staging, portable: true, linkCache: new NoLinks() }, [`${BACKUP_ROOT}/${MANIFEST_NAME}`, ...files.map((f) => `${BACKUP_ROOT}/${f.name}`)]);
    await pipeline(pack, createGzip({ level: 6 }), createWriteStream(archive, { mode: 0o600 }));
    return { archive, manifest, cleanup };
  } catch (err) {
    await cleanup();
    throw err;
  }
}
