// Configuration routes: read the file, save it (through the config actor, one save at a time),
// check the file on disk, and validate text from the request body.

import { open } from "node:fs/promises";
import type { FastifyInstance } from "fastify";
import { ActorGoneError, ask, RefusedError } from "../../../actors/ask.js";
import type { SaveRequest, SaveResult, SaveSuccess } from "../../../machines/config.machine.js";
import { fileVersion, withoutBom } from "../../config/load.js";
import { validationFailure, type ValidationJob, type ValidationOutcome, type ValidSummary } from "../../config/validation.js";
import { ApiError, errorResponses, errorSchema, isErrorCode } from "../errors.js";
import { refusalError } from "../guards.js";
import type { ApiHost } from "../host.js";
import { reloadRecord, type ReloadRecord } from "../records.js";
import { configFileSchema, configSavedSchema, configValidSchema } from "../schemas.js";
import type { RouteContext } from "../server.js";
import { controlApp } from "./control.js";
import { strictBody } from "../body.js";

interface SaveBody {
  format?: string;
  content: string;
  base_version?: string | null;
  validate: boolean;
  reload: boolean;
}

/** "save the configuration (1 234 bytes, was 3f2a…) and reload" */
function saveLine(body: unknown): string {
  const b = (body ?? {}) as Partial<SaveBody>;
  const size = typeof b.content === "string" ? `${Buffer.byteLength(b.content)} bytes` : "?";
  const base = typeof b.base_version === "string" ? `, was ${b.base_version.slice(0, 12)}` : "";
  return `save the configuration (${size}${base})${b.reload === true ? " and reload" : ""}`;
}

const saveBodySchema = {
  type: "object",
  required: ["content"],
  properties: {
    format: { type: "string", description: "Must be yaml (the default)." },
    content: { type: "string", description: "Full YAML text, written as sent (${VAR} placeholders stay)." },
    base_version: { type: ["string", "null"], pattern: "^[0-9a-fA-F]{64}$", description: "Version the edit started from (GET /api/config)." },
    validate: { type: "boolean", default: true, description: "Validate fully before writing; false checks YAML syntax only." },
    reload: { type: "boolean", default: false, description: "Request a reload after a successful save." },
  },
} as const;


/** The API error for a failed validation or save: its code's status is in the error table. */
export function failureError(failure: { code: string; message: string; extra: Record<string, unknown> }): ApiError {
  return new ApiError(isErrorCode(failure.code) ? failure.code : "internal_error", failure.message, failure.extra);
}

/** Validates in a worker (off the event loop that serves DNS); the 200 body, or the error to answer with. */
async function validated(host: ApiHost, job: ValidationJob, transfer: ArrayBuffer[], source: "file" | "body", path: string | null, invalidCode: string): Promise<Record<string, unknown>> {
  let outcome: ValidationOutcome;
  try {
    outcome = await host.validateConfig(job, transfer);
  } catch (err) {
    throw refusalError(err);
  }
  if (!outcome.ok) throw failureError(validationFailure(outcome, invalidCode, host.validationLimits()));
  const summary: ValidSummary = outcome.summary;
  return { ok: true, source, path, plugin_count: summary.plugin_count, dependency_graph: summary.dependency_graph, message: "configuration is valid" };
}

/** The whole ArrayBuffer behind `bytes` when it holds nothing else, so it can be moved to the worker instead of copied. */
function movable(bytes: Buffer): ArrayBuffer[] {
  const buffer = bytes.buffer;
  return buffer instanceof ArrayBuffer && bytes.byteOffset === 0 && bytes.byteLength === buffer.byteLength ? [buffer] : [];
}

/** Reads the file once through one descriptor, so text and mtime belong to the same file even mid-save. */
async function readConfigFile(path: string): Promise<{ content: string; mtimeMs: number }> {
  const handle = await open(path, "r");
  try {
    const [text, st] = await Promise.all([handle.readFile("utf8"), handle.stat()]);
    return { content: withoutBom(text), mtimeMs: st.mtimeMs };
  } finally {
    await handle.close();
  }
}

/** Asks the config actor to save (refused while another save runs) and waits for the result. */
async function runSave(host: ApiHost, request: SaveRequest): Promise<SaveResult> {
  try {
    return (await ask(host.configActor, { type: "SAVE", request })) as SaveResult;
  } catch (err) {
    if (err instanceof ActorGoneError || err instanceof RefusedError) throw refusalError(err);
    throw new ApiError("config_save_failed", `saving the configuration failed: ${err instanceof Error ? err.message : String(err)}`);
  }
}

/** Asks for a reload after a save; the file is already written either way, which the error says. */
function reloadAfterSave(host: ApiHost, saved: SaveSuccess): ReloadRecord {
  try {
    controlApp(host, { type: "RELOAD.REQUEST" });
  } catch (err) {
    if (!(err instanceof ApiError)) throw err;
    throw new ApiError(err.code, `the configuration was saved, but no reload was requested: ${err.message}`, {
      path: saved.path,
      version: saved.version,
      updated_at_ms: saved.updated_at_ms,
      saved: true,
    });
  }
  return reloadRecord(host);
}

export function registerConfigRoutes(api: FastifyInstance, { host, schemas }: RouteContext): void {
  const configPath = (): string => host.configPath();
  const env = (): Record<string, string | undefined> => ({ ...host.env });

  api.get(
    "/api/config",
    { schema: { role: "admin", summary: "The configuration file as written (placeholders not expanded), with its version", tags: ["config"], response: { 200: configFileSchema, 500: errorSchema } } },
    async () => {
      const path = configPath();
      let file: { content: string; mtimeMs: number };
      try {
        file = await readConfigFile(path);
      } catch (err) {
        throw new ApiError("config_read_failed", `cannot read the configuration file ${path}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`);
      }
      return { ok: true, path, format: "yaml", content: file.content, version: fileVersion(file.content), updated_at_ms: Math.trunc(file.mtimeMs) };
    },
  );

  api.put(
    "/api/config",
    {
      config: { audit: (req) => saveLine(req.body) },
      schema: {
        role: "admin",
        summary: "Save the configuration file (atomically; optionally reload)",
        tags: ["config"],
        body: saveBodySchema,
        response: {
          200: configSavedSchema,
          ...errorResponses("config_validate_failed", "config_conflict", "config_save_failed", "config_save_unavailable", "config_validation_busy"),
        },
      },
      validatorCompiler: schemas.validator(strictBody),
    },
    async (req) => {
      const body = req.body as SaveBody;
      if (body.format !== undefined && body.format !== "yaml") throw new ApiError("unsupported_config_format", `format must be yaml, not '${body.format}'`);
      const result = await runSave(host, { content: body.content, baseVersion: body.base_version ?? null, validate: body.validate });
      if (!result.ok) throw failureError(result);
      const reload = body.reload ? reloadAfterSave(host, result) : null;
      return {
        ok: true,
        path: result.path,
        format: "yaml",
        version: result.version,
        updated_at_ms: result.updated_at_ms,
        plugin_count: result.plugin_count,
        init_order: result.init_order,
        reload,
        message: "configuration saved",
        diagnostics: result.diagnostics,
        diagnostic_details: result.diagnostic_details,
      };
    },
  );

  api.get(
    "/api/config/check",
    { schema: { role: "viewer", summary: "Validate the configuration file on disk (includes, ${VAR} expanded in memory only)", tags: ["config"], response: { 200: configValidSchema, 400: errorSchema, 503: errorSchema } } },
    () => {
      const path = configPath();
      return validated(host, { kind: "file", path, env: env() }, [], "file", path, "config_check_failed");
    },
  );

  // Raw bodies: every content type arrives as bytes here, so invalid UTF-8 can be told apart.
  api.register((scope, _opts, done) => {
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser("*", { parseAs: "buffer" }, (_req, body, done) => done(null, body));
    scope.post(
      "/api/config/validate",
      {
        // Checks text and changes nothing: not an audit line each time the editor validates.
        config: { audit: false },
        schema: {
          role: "admin",
          summary: "Validate YAML text (raw body, or JSON {format: 'yaml', content}); include is refused",
          tags: ["config"],
          response: { 200: configValidSchema, 400: errorSchema, 503: errorSchema },
        },
      },
      (req) => {
        // Decoding, the JSON envelope and the YAML are all handled in the worker.
        const bytes = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
        const job: ValidationJob = { kind: "body", bytes, contentType: req.headers["content-type"] ?? null, env: env() };
        return validated(host, job, movable(bytes), "body", null, "config_validate_failed");
      },
    );
    done();
  });
}
