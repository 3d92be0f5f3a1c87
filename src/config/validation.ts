// Configuration validation as the API asks for it: a request body, the file on disk, or the text of
// a save, and how an unsuccessful one is answered. It runs in a worker thread
// (src/app/validate-worker.ts), so every job and outcome is plain data.

import { isMap, isSeq } from "yaml";
import { analyzeConfig, type GraphReport } from "../registry/analyze.js";
import type { BuildSelection } from "../registry/bundles.js";
import type { Catalog } from "../registry/catalog.js";
import { ConfigError, type Diagnostic } from "./diagnostics.js";
import { loadConfigFile, loadConfigSource, loadConfigText, withoutBom, type SluiceConfig } from "./load.js";
import { diagnosticReport, problemSummary, type DiagnosticReport } from "./report.js";
import { SourceFile } from "./source.js";

type Env = Record<string, string | undefined>;

export type ValidationJob =
  /** POST /api/config/validate: the raw body, decoded and unwrapped here too. */
  | { kind: "body"; bytes: Uint8Array; contentType: string | null; env: Env }
  /** GET /api/config/check: the file on disk with its includes. */
  | { kind: "file"; path: string; env: Env }
  /** PUT /api/config: the text as the file at `path` will be; `validate: false` requires YAML syntax only. */
  | { kind: "save"; text: string; path: string; validate: boolean; env: Env };

export interface ValidSummary {
  plugin_count: number;
  init_order: string[];
  dependency_graph: GraphReport;
}

export type TooComplexLimit = "memory" | "time" | "depth";

/** The heap cap and time limit a validation runs under (api.http.limits). */
export interface ValidatorLimits {
  parseTimeoutMs: number;
  parseMemoryMb: number;
}

export type ValidationOutcome =
  /** `problems` is set only for a validate:false save of a configuration that a reload would refuse. */
  | { ok: true; summary: ValidSummary; problems: DiagnosticReport | null }
  /** `code` overrides the route's usual code (yaml_alias_limit); `summary` is the first problem in one line. */
  | { ok: false; kind: "invalid"; code: string | null; summary: string; report: DiagnosticReport }
  /** The request itself is unusable (not UTF-8, empty, a broken JSON envelope). */
  | { ok: false; kind: "request"; code: string; message: string }
  | { ok: false; kind: "too_complex"; limit: TooComplexLimit }
  | { ok: false; kind: "failed"; message: string };

/** What the runner (src/app/validate-pool.ts) and the worker (src/app/validate-worker.ts) say to each other. */
export const WORKER_ROLE = "sluice-config-validator";
export const WORKER_READY = "ready";

export interface WorkerRequest {
  id: number;
  job: ValidationJob;
  /** The running program's build, so plugin types are judged as the main thread would. */
  build: BuildSelection;
}

export interface WorkerReply {
  id: number;
  outcome: ValidationOutcome;
  /** The worker's heap after the job: a worker that grew large is not kept for the next one. */
  heapBytes: number;
}

class RequestProblem extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

const utf8 = new TextDecoder("utf-8", { fatal: true });

/** The YAML a validate request carries: the raw body, or the `content` of a JSON envelope. */
export function configText(bytes: Uint8Array, contentType: string | null): string {
  let text: string;
  try {
    text = utf8.decode(bytes);
  } catch {
    throw new RequestProblem("invalid_utf8_body", "the request body is not valid UTF-8");
  }
  const declaredJson = /^application\/([\w.+-]+\+)?json\s*(;|$)/i.test(contentType ?? "");
  const envelope = jsonEnvelope(text, declaredJson);
  const yaml = envelope ? envelope.content : text;
  if (yaml.trim().length === 0) throw new RequestProblem("empty_config_body", "the request carries no configuration text");
  return yaml;
}

function jsonEnvelope(text: string, declaredJson: boolean): { content: string } | null {
  if (!declaredJson && !text.trimStart().startsWith("{")) return null;
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (err) {
    if (!declaredJson) return null; // YAML flow mappings start with "{" too
    if (text.trim().length === 0) throw new RequestProblem("empty_config_body", "the request carries no configuration text");
    throw new RequestProblem("invalid_request", `body is not valid JSON: ${(err as Error).message}`);
  }
  const obj = parsed !== null && typeof parsed === "object" && !Array.isArray(parsed) ? (parsed as Record<string, unknown>) : null;
  if (!obj || typeof obj.content !== "string") {
    if (!declaredJson) return null;
    throw new RequestProblem("invalid_request", "body.content must be a string: a JSON body is {format: 'yaml', content: '<yaml text>'}");
  }
  if (obj.format !== undefined && obj.format !== "yaml") throw new RequestProblem("unsupported_config_format", `format must be yaml, not ${JSON.stringify(obj.format)}`);
  return { content: obj.content };
}

/** YAML syntax problems only (validate:false still refuses a file nothing could parse). */
function syntaxProblems(text: string, file: string): { problems: Diagnostic[]; pluginEntries: number } {
  const { source, doc } = SourceFile.parse(file, withoutBom(text));
  const problems = doc.errors.map((e) => source.offset(e.pos[0], `YAML syntax error: ${e.message.split("\n")[0]}`));
  const plugins = isMap(doc.contents) ? doc.contents.get("plugins") : null;
  return { problems, pluginEntries: isSeq(plugins) ? plugins.items.length : 0 };
}

function analyzed(config: SluiceConfig, catalog: Catalog): ValidSummary {
  const analysis = analyzeConfig(config, catalog);
  return { plugin_count: analysis.plugins.length, init_order: analysis.initOrder, dependency_graph: analysis.graph };
}

function invalid(err: ConfigError): ValidationOutcome {
  return { ok: false, kind: "invalid", code: err.code, summary: problemSummary(err), report: diagnosticReport(err.diagnostics) };
}

function validateSave(job: Extract<ValidationJob, { kind: "save" }>, catalog: Catalog): ValidationOutcome {
  let fallbackCount = 0;
  if (!job.validate) {
    const syntax = syntaxProblems(job.text, job.path);
    if (syntax.problems.length > 0) return invalid(new ConfigError(syntax.problems));
    fallbackCount = syntax.pluginEntries;
  }
  try {
    return { ok: true, summary: analyzed(loadConfigSource(job.text, job.path, { env: job.env }), catalog), problems: null };
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    // An alias bomb is refused like a syntax error: nothing could ever read that file.
    if (job.validate || err.code !== null) return invalid(err);
    const graph: GraphReport = { nodes: [], edges: [], init_order: [] };
    return { ok: true, summary: { plugin_count: fallbackCount, init_order: [], dependency_graph: graph }, problems: diagnosticReport(err.diagnostics) };
  }
}

/** Runs one job; configuration problems are outcomes, anything else propagates. */
export function runValidation(job: ValidationJob, catalog: Catalog): ValidationOutcome {
  try {
    switch (job.kind) {
      case "body":
        return { ok: true, summary: analyzed(loadConfigText(configText(job.bytes, job.contentType), { env: job.env }), catalog), problems: null };
      case "file":
        return { ok: true, summary: analyzed(loadConfigFile(job.path, { env: job.env }), catalog), problems: null };
      case "save":
        return validateSave(job, catalog);
    }
  } catch (err) {
    if (err instanceof ConfigError) return invalid(err);
    if (err instanceof RequestProblem) return { ok: false, kind: "request", code: err.code, message: err.message };
    // Nesting deep enough to exhaust the stack (yaml, schema or expansion recursion) is a limit, not a crash.
    if (err instanceof RangeError && /call stack/i.test(err.message)) return { ok: false, kind: "too_complex", limit: "depth" };
    throw err;
  }
}

/** An unsuccessful validation as the API answers it. */
export interface ValidationFailure {
  code: string;
  message: string;
  extra: Record<string, unknown>;
}

const seconds = (ms: number): string => (ms % 1000 === 0 ? `${ms / 1000}s` : `${ms}ms`);

function tooComplex(limit: TooComplexLimit, limits: ValidatorLimits): string {
  const lead = "the configuration is too complex to validate";
  if (limit === "memory") return `${lead}: it needed more than the ${limits.parseMemoryMb} MiB heap allowed (raise api.http.limits.config_parse_memory_mb)`;
  if (limit === "time") return `${lead}: it took longer than the ${seconds(limits.parseTimeoutMs)} allowed (raise api.http.limits.config_parse_timeout)`;
  return `${lead}: it nests too deeply`;
}

/** Code and message for an outcome that is not a success; `invalidCode` is the route's code for bad configuration. */
export function validationFailure(outcome: Exclude<ValidationOutcome, { ok: true }>, invalidCode: string, limits: ValidatorLimits): ValidationFailure {
  switch (outcome.kind) {
    case "invalid":
      return { code: outcome.code ?? invalidCode, message: `configuration is invalid: ${outcome.summary}`, extra: { ...outcome.report } };
    case "request":
      return { code: outcome.code, message: outcome.message, extra: {} };
    case "too_complex":
      return { code: "config_too_complex", message: tooComplex(outcome.limit, limits), extra: { limit: outcome.limit } };
    case "failed":
      return { code: "internal_error", message: "the configuration could not be validated (internal error); see the server log", extra: {} };
  }
}
