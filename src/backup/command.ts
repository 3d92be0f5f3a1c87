// sluice backup -c FILE [-d DIR] [-o ARCHIVE] [--with-queries] and sluice restore ARCHIVE -d DIR
// [--config-dir DIR] [--force]: the archive of plan.ts/create.ts, and its checked restore (restore.ts).

import { resolve } from "node:path";
import { parseArguments, parseOptions, UsageError, type OptionSpec } from "../cli-args.js";
import { checkConfig } from "../app/app.js";
import { replaceFileAtomically } from "../config/atomic-file.js";
import { createCatalog } from "../plugins/catalog.js";
import { buildBackup } from "./create.js";
import type { Manifest } from "./manifest.js";
import { backupPlan } from "./plan.js";
import { copyInto, restoreBackup } from "./restore.js";

export const BACKUP_HELP = `Usage:
  sluice backup [-c FILE] [-d DIR] [-o ARCHIVE] [--with-queries]

Writes one .tar.gz (mode 0600: it holds the API's tokens and sessions) with a manifest listing every
file inside and its sha256: the configuration file and its includes, and every file the configuration
names as data (rule files, dynamic sets, the clients' state, cache dumps, the API's auth state file and
audit database). SQLite databases are copied with SQLite's online backup, so Sluice may be running.

Options:
  -c, --config FILE      configuration file (default: sluice.yaml)
  -d, --working-dir DIR  directory that relative paths resolve against (default: current)
  -o, --output ARCHIVE   where to write it (default: sluice-backup-<UTC time>.tar.gz here)
      --with-queries     add the query recorders' databases (they can be large)

Exit status: 0 when written, 1 when the configuration is invalid or a file cannot be read, 2 for a
mistake on the command line.
`;

export const RESTORE_HELP = `Usage:
  sluice restore ARCHIVE -d DIR [--config-dir DIR] [--force]

Checks a backup (its manifest, every file's sha256, paths that stay inside the directories, regular
files only) and writes its files: data files below the working directory DIR, the configuration and
its includes below --config-dir (default: DIR). Each file is written atomically. Nothing is written
when the archive is refused, or when a file exists already (unless --force replaces it).

Options:
  -d, --working-dir DIR  the working directory to restore into (required)
      --config-dir DIR   where the configuration files go (default: the working directory)
      --force            replace files that exist

Exit status: 0 when restored, 1 when refused (nothing written), 2 for a mistake on the command line.
`;

const BACKUP_OPTIONS: OptionSpec = {
  config: { type: "string", short: "c" },
  "working-dir": { type: "string", short: "d" },
  output: { type: "string", short: "o" },
  "with-queries": { type: "boolean" },
};
const RESTORE_OPTIONS: OptionSpec = { "working-dir": { type: "string", short: "d" }, "config-dir": { type: "string" }, force: { type: "boolean" } };

const stamp = (d: Date): string => d.toISOString().replace(/[-:]/g, "").replace(/\.\d+Z$/, "Z").replace("T", "-");

function notes(manifest: Manifest, restoring: boolean): void {
  const what = restoring ? "the backup left out" : "not in the backup";
  for (const s of manifest.skipped) process.stderr.write(`note: ${what}: ${s.path} (${s.from}): ${s.reason}\n`);
}

export async function runBackupCommand(argv: string[]): Promise<number> {
  const v = parseOptions(argv, BACKUP_OPTIONS);
  const dir = resolve((v["working-dir"] as string | undefined) ?? ".");
  const configPath = resolve(dir, (v.config as string | undefined) ?? "sluice.yaml");
  const withQueries = v["with-queries"] === true;
  const now = new Date();
  const output = resolve((v.output as string | undefined) ?? `sluice-backup-${stamp(now)}.tar.gz`);
  const { config, analysis } = checkConfig(configPath, createCatalog());
  const built = await buildBackup(backupPlan(config, analysis, dir, { queries: withQueries }), { withQueries, now });
  try {
    await replaceFileAtomically(output, copyInto(built.archive), "backup", { mode: 0o600 });
  } finally {
    await built.cleanup();
  }
  const bytes = built.manifest.files.reduce((n, f) => n + f.size, 0);
  process.stdout.write(`backup written: ${output} (${built.manifest.files.length} files, ${bytes} bytes)\n`);
  for (const f of built.manifest.files) process.stdout.write(`  ${f.name}  (${f.from})\n`);
  notes(built.manifest, false);
  return 0;
}

export async function runRestoreCommand(argv: string[]): Promise<number> {
  const { values: v, positionals } = parseArguments(argv, RESTORE_OPTIONS);
  if (positionals.length !== 1) throw new UsageError(positionals.length === 0 ? "name the archive to restore" : `unexpected argument '${positionals[1]}'`);
  const dirArg = v["working-dir"] as string | undefined;
  if (dirArg === undefined) throw new UsageError("restore needs -d DIR (the working directory to restore into)");
  const configDir = v["config-dir"] as string | undefined;
  const restored = await restoreBackup({ archive: resolve(positionals[0]), dir: resolve(dirArg), configDir: configDir === undefined ? undefined : resolve(configDir), force: v.force === true });
  const m = restored.manifest;
  process.stdout.write(`restored ${restored.written.length} files from a backup of ${m.created_at} (sluice ${m.sluice_version}):\n`);
  for (const w of restored.written) process.stdout.write(`  ${w.name} -> ${w.path}\n`);
  notes(m, true);
  process.stdout.write(`start it with: sluice start -c ${restored.config} -d ${resolve(dirArg)}\n`);
  return 0;
}
