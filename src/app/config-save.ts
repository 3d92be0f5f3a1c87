// One configuration save (PUT /api/config), run by the config actor one at a time: compare the
// client's base_version with the file, validate the text as the file it will become, then replace
// the file atomically (src/config/atomic-file.ts: temp file beside it, write, fsync, rename, fsync the
// directory). A crash at any point leaves either the old or the new file, never a mix.

import { readFile, realpath, stat } from "node:fs/promises";
import type { SaveRequest, SaveResult, SaveSuccess } from "../../machines/config.machine.js";
import { removeStaleTemps, replaceFileAtomically } from "../config/atomic-file.js";
import { fileVersion } from "../config/load.js";
import { validationFailure, type ValidationJob, type ValidationOutcome, type ValidatorLimits } from "../config/validation.js";
import type { Logger } from "../observability/logger.js";

export interface SaveTarget {
  /** The configuration file the process runs (as given, may be a symlink). */
  path: string;
  /** Runs the validation off the event loop (a worker with heap and time limits); a full queue rejects with the actor's refusal. */
  validate(job: ValidationJob): Promise<ValidationOutcome>;
  /** The limits the validation ran under (for the message of a too-complex configuration). */
  limits(): ValidatorLimits;
  /** For ${VAR} expansion while validating; the file keeps the placeholders. */
  env: NodeJS.ProcessEnv;
  log: Logger;
}

const errnoCode = (err: unknown): string => (err as NodeJS.ErrnoException).code ?? (err instanceof Error ? err.message : String(err));

function failure(code: string, message: string, extra: Record<string, unknown> = {}): SaveResult {
  return { ok: false, code, message, extra };
}

/** Where the bytes go: the real file behind a symlink, so the link survives the rename. */
async function writeTarget(path: string): Promise<string> {
  try {
    return await realpath(path);
  } catch (err) {
    if (errnoCode(err) === "ENOENT") return path;
    throw err;
  }
}

/** Reads the current file's version; null when there is no file. */
async function currentVersion(path: string): Promise<string | null> {
  try {
    return fileVersion(await readFile(path, "utf8"));
  } catch (err) {
    if (errnoCode(err) === "ENOENT") return null;
    throw err;
  }
}

type Checked = Pick<SaveSuccess, "plugin_count" | "init_order" | "diagnostics" | "diagnostic_details">;

/** Validates `content` as the file at `path` would be read; a failure result, or what the API reports. */
async function validate(request: SaveRequest, t: SaveTarget): Promise<{ ok: true; checked: Checked } | { ok: false; result: SaveResult }> {
  const outcome = await t.validate({ kind: "save", text: request.content, path: t.path, validate: request.validate, env: { ...t.env } });
  if (!outcome.ok) {
    const f = validationFailure(outcome, "config_validate_failed", t.limits());
    return { ok: false, result: failure(f.code, f.message, f.extra) };
  }
  // validate:false saves anyway; the response still tells what a reload would refuse.
  const problems = outcome.problems ?? { diagnostics: [], diagnostic_details: [] };
  return { ok: true, checked: { plugin_count: outcome.summary.plugin_count, init_order: outcome.summary.init_order, ...problems } };
}

export async function saveConfigFile(request: SaveRequest, t: SaveTarget): Promise<SaveResult> {
  let target: string;
  let current: string | null;
  try {
    target = await writeTarget(t.path);
    current = await currentVersion(target);
  } catch (err) {
    return failure("config_save_failed", `cannot read the configuration file ${t.path}: ${errnoCode(err)}`);
  }
  if (request.baseVersion !== null && request.baseVersion.toLowerCase() !== current) {
    return failure("config_conflict", "the configuration file changed since it was loaded; GET /api/config again and reapply the edit", {
      current_version: current,
    });
  }
  const checked = await validate(request, t);
  if (!checked.ok) return checked.result;
  let updatedAt: number;
  try {
    await replaceFileAtomically(target, request.content);
    updatedAt = Math.trunc((await stat(target)).mtimeMs);
  } catch (err) {
    return failure("config_save_failed", `cannot write the configuration file ${t.path}: ${errnoCode(err)}`);
  }
  const version = fileVersion(request.content);
  t.log.info({ target: "config", path: t.path, version, bytes: Buffer.byteLength(request.content) }, "configuration saved");
  try {
    for (const file of await removeStaleTemps(target)) t.log.info({ target: "config", file }, "removed a temp file left by an interrupted save");
  } catch (err) {
    t.log.warn({ target: "config", err: errnoCode(err) }, "could not look for temp files of interrupted saves");
  }
  return { ok: true, path: t.path, version, updated_at_ms: updatedAt, ...checked.checked };
}
