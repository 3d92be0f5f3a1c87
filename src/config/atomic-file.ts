// Replacing a file so that a crash or a failed write at any point leaves either the old or the new
// file, never a mix: write a hidden temp file beside it, fsync, rename over it, fsync the
// directory. Used for configuration saves (PUT /api/config) and downloaded rule files.

import { randomBytes } from "node:crypto";
import { open, readdir, rename, rm, stat, type FileHandle } from "node:fs/promises";
import { basename, dirname, join } from "node:path";

const errnoCode = (err: unknown): string => (err as NodeJS.ErrnoException).code ?? (err instanceof Error ? err.message : String(err));

const TEMP_SUFFIX = ".tmp";
/** Temp files are `.<name>.<purpose>-<pid>-<random>.tmp`, so stale ones can be told from a live process's. */
const tempPrefix = (target: string, purpose: string): string => `.${basename(target)}.${purpose}-`;

/** Directory entries must reach the disk too, or a crash after rename can bring the old name back. */
async function syncDirectory(dir: string): Promise<void> {
  let handle;
  try {
    handle = await open(dir, "r");
    await handle.sync();
  } catch (err) {
    // Some platforms and file systems cannot open or fsync a directory; the rename is still atomic.
    if (!["EISDIR", "EINVAL", "EPERM", "EACCES", "ENOTSUP"].includes(errnoCode(err))) throw err;
  } finally {
    await handle?.close();
  }
}

/** What goes into the file: text, bytes, or a writer that streams into the open temp file. */
export type FileContent = string | Buffer | ((handle: FileHandle) => Promise<void>);

/**
 * Writes `content` to a hidden temp file beside `target`, fsyncs it and renames it over `target`.
 * If anything fails (the writer included) the temp file is removed and `target` is untouched.
 * `mode`: the file's permissions whatever they were (0600 for secrets); else an existing file keeps its own.
 */
export async function replaceFileAtomically(target: string, content: FileContent, purpose = "save", options: { mode?: number } = {}): Promise<void> {
  const dir = dirname(target);
  const temp = join(dir, `${tempPrefix(target, purpose)}${process.pid}-${randomBytes(6).toString("hex")}${TEMP_SUFFIX}`);
  let mode = 0o644;
  try {
    mode = options.mode ?? (await stat(target)).mode & 0o7777;
  } catch (err) {
    if (errnoCode(err) !== "ENOENT") throw err;
  }
  const handle = await open(temp, "wx", mode);
  try {
    try {
      if (typeof content === "function") await content(handle);
      else await handle.writeFile(content, typeof content === "string" ? "utf8" : undefined);
      await handle.chmod(mode); // open() applied the umask; keep the file's own permissions
      await handle.sync();
    } finally {
      await handle.close();
    }
    await rename(temp, target);
  } catch (err) {
    await rm(temp, { force: true });
    throw err;
  }
  await syncDirectory(dir);
}

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return errnoCode(err) === "EPERM";
  }
};

/** Removes temp files that a killed process left beside `target` (never those of a live one); returns their names. */
export async function removeStaleTemps(target: string, purpose = "save"): Promise<string[]> {
  const prefix = tempPrefix(target, purpose);
  const pattern = /^(\d+)-[0-9a-f]+\.tmp$/;
  const removed: string[] = [];
  for (const name of await readdir(dirname(target))) {
    if (!name.startsWith(prefix) || !name.endsWith(TEMP_SUFFIX)) continue;
    const pid = pattern.exec(name.slice(prefix.length))?.[1];
    if (!pid || Number(pid) === process.pid || alive(Number(pid))) continue;
    await rm(join(dirname(target), name), { force: true });
    removed.push(name);
  }
  return removed;
}
