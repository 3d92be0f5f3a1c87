// The manifest at the top of a backup archive (sluice-backup/manifest.json): what Sluice wrote it,
// when, and every file inside with its size and sha256. `sluice restore` believes nothing that the
// manifest does not list, and nothing whose bytes do not hash to what it says.

import { createHash } from "node:crypto";
import { createReadStream } from "node:fs";
import type { Skipped } from "./plan.js";

/** The archive's one top directory. */
export const BACKUP_ROOT = "sluice-backup";
export const MANIFEST_NAME = "manifest.json";
export const BACKUP_FORMAT = "sluice-backup";
export const BACKUP_FORMAT_VERSION = 1;

export interface ManifestFile {
  /** config/… or data/…, `/`-separated. */
  name: string;
  /** Who named it (the configuration, an include, a plugin, the API's auth or audit). */
  from: string;
  size: number;
  sha256: string;
}

export interface Manifest {
  format: typeof BACKUP_FORMAT;
  format_version: typeof BACKUP_FORMAT_VERSION;
  sluice_version: string;
  /** ISO 8601, UTC. */
  created_at: string;
  /** The main configuration file, below config/. */
  config: string;
  with_queries: boolean;
  files: ManifestFile[];
  /** Files the configuration names that are not inside (missing, outside the directories, the query database). */
  skipped: Skipped[];
}

const SHA256 = /^[0-9a-f]{64}$/;

/** A name a restore may write: config/… or data/…, no empty, `.` or `..` part, no backslash. */
export function safeName(name: string): boolean {
  const parts = name.split("/");
  return (parts[0] === "config" || parts[0] === "data") && parts.length >= 2 && !name.includes("\\") && !name.includes("\0") && parts.every((p) => p !== "" && p !== "." && p !== "..");
}

/** The manifest's problem, or null when it is one this version reads. */
export function manifestProblem(value: unknown): string | null {
  if (typeof value !== "object" || value === null) return "the manifest is not a JSON object";
  const m = value as Partial<Manifest>;
  if (m.format !== BACKUP_FORMAT) return "the manifest is not a Sluice backup's";
  if (m.format_version !== BACKUP_FORMAT_VERSION) return `backup format ${String(m.format_version)} is not one this version reads (${BACKUP_FORMAT_VERSION})`;
  if (!Array.isArray(m.files)) return "the manifest lists no files";
  const names = new Set<string>();
  for (const f of m.files as unknown[]) {
    const file = f as Partial<ManifestFile>;
    if (typeof f !== "object" || f === null || typeof file.name !== "string" || typeof file.size !== "number" || typeof file.sha256 !== "string" || !SHA256.test(file.sha256)) return "the manifest has a malformed file entry";
    if (!safeName(file.name)) return `${file.name}: the path leaves the restore's directories`;
    if (names.has(file.name)) return `${file.name} is listed twice`;
    names.add(file.name);
  }
  if (typeof m.config !== "string" || !names.has(`config/${m.config}`)) return "the manifest does not name its configuration file among its files";
  return null;
}

export async function sha256File(path: string): Promise<{ sha256: string; size: number }> {
  const hash = createHash("sha256");
  let size = 0;
  for await (const chunk of createReadStream(path, { highWaterMark: 256 * 1024 })) {
    hash.update(chunk as Buffer);
    size += (chunk as Buffer).length;
  }
  return { sha256: hash.digest("hex"), size };
}
