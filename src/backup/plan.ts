// What a backup holds: the configuration file and its includes, and every file the configuration
// names as data. Plugins declare their files (PluginDefinition.dataFiles); the API's auth state file
// and audit database come from api.http. Nothing is guessed from the args' shapes.
//
// The archive has two roots: `config/` (paths relative to the main configuration file's directory) and
// `data/` (paths relative to the working directory, -d). A file outside its root (an include in `../`,
// a data file at an absolute path elsewhere) cannot be put back below the restore's directories: it is
// left out and named in the manifest's `skipped` (and on stderr), never silently dropped.

import { dirname, isAbsolute, relative, resolve, sep } from "node:path";
import { auditSettings } from "../config/audit.js";
import type { SluiceConfig } from "../config/load.js";
import { DEFAULT_STATE_FILE } from "../api/auth/settings.js";
import type { Analysis } from "../registry/analyze.js";

export interface PlannedFile {
  /** Where it is now. */
  source: string;
  /** Its name in the archive: config/… or data/… (always `/`-separated). */
  name: string;
  /** Who named it: "configuration", "include", "api.http.auth.state_file", "plugin 'tag' (type)". */
  from: string;
  sqlite: boolean;
}

export interface Skipped {
  path: string;
  from: string;
  reason: string;
}

export interface BackupPlan {
  /** The main configuration file's name below config/. */
  config: string;
  files: PlannedFile[];
  skipped: Skipped[];
}

/** `path` below `root` as a `/`-separated relative name, or null when it is outside. */
function inside(root: string, path: string): string | null {
  const rel = relative(root, path);
  if (rel === "" || rel.startsWith("..") || isAbsolute(rel)) return null;
  return rel.split(sep).join("/");
}

export function backupPlan(config: SluiceConfig, analysis: Analysis, baseDir: string, options: { queries: boolean }): BackupPlan {
  const main = config.path;
  if (main === null) throw new Error("a backup needs a configuration file");
  const configDir = dirname(main);
  const files: PlannedFile[] = [];
  const skipped: Skipped[] = [];
  const seen = new Set<string>();
  const add = (source: string, root: "config" | "data", from: string, sqlite = false): void => {
    if (seen.has(source)) return;
    seen.add(source);
    const rel = inside(root === "config" ? configDir : baseDir, source);
    if (rel === null) {
      const where = root === "config" ? `the configuration's directory ${configDir}` : `the working directory ${baseDir}`;
      skipped.push({ path: source, from, reason: `outside ${where}: copy it yourself` });
      return;
    }
    files.push({ source, name: `${root}/${rel}`, from, sqlite });
  };
  config.files.forEach((f, i) => add(f, "config", i === 0 ? "configuration" : "include"));
  const data = (p: string): string => (isAbsolute(p) ? p : resolve(baseDir, p));
  const http = config.api;
  if (http) {
    // Tokens and sessions exist only where the API has accounts.
    if (http.auth !== undefined) add(data(http.auth.state_file ?? DEFAULT_STATE_FILE), "data", "api.http.auth.state_file");
    const audit = auditSettings(http.audit, baseDir);
    if (audit?.store.kind === "sqlite") add(audit.store.path, "data", "api.http.audit", true);
  }
  for (const p of analysis.plugins) {
    const declared = p.def.dataFiles?.(p.args) ?? [];
    for (const f of declared) {
      const from = `plugin '${p.config.tag}' (${p.def.type})`;
      if (f.queries === true && !options.queries) {
        skipped.push({ path: data(f.path), from, reason: "the query database: add --with-queries (API: ?queries=true)" });
        continue;
      }
      add(data(f.path), "data", from, f.sqlite === true);
    }
  }
  return { config: inside(configDir, main) ?? main, files, skipped };
}
