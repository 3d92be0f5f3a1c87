// Reads a configuration: YAML parse with positions, ${VAR} expansion, the top-level schema and
// `include` (recursive, relative to the declaring file, plugins only). Plugin args are checked
// later by the registry (registry/analyze.ts), which reports into the same diagnostics.

import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { dirname, isAbsolute, resolve } from "node:path";
import { isMap, isScalar, type Document } from "yaml";
import { excessiveAlias, isAliasLimitError, MAX_ALIAS_COUNT } from "./aliases.js";
import { validateSchema } from "./ajv.js";
import { apiProblems } from "./api-check.js";
import { clusterProblems, type ClusterConfig } from "./cluster.js";
import { ConfigError, type Diagnostic } from "./diagnostics.js";
import { logProblems } from "./log-settings.js";
import { networkProblems, outboundProfiles, unknownOutbound } from "./network.js";
import type { OutboundSettings } from "../net/outbound.js";
import { configSchema, type ApiConfig, type LogConfig, type RawConfig } from "./schema.js";
import { SourceFile } from "./source.js";
import { upgradeProblems, type UpgradeConfig } from "./upgrade.js";

export const MAX_INCLUDE_DEPTH = 8;

export interface PluginConfig {
  tag: string;
  type: string;
  /** Raw args as written (after ${VAR} expansion); undefined when omitted. */
  args: unknown;
  source: SourceFile;
  /** Path of this entry inside its file: ["plugins", i]. */
  path: (string | number)[];
}

export interface SluiceConfig {
  /** Main file, or null for text from a request body. */
  path: string | null;
  log: LogConfig;
  api: ApiConfig | null;
  /** The `upgrade` section (self-upgrade settings), null when absent. */
  upgrade: UpgradeConfig | null;
  /** The `cluster` section, null when absent. */
  cluster: ClusterConfig | null;
  /** `workers` as written: a count, or `auto` (src/app/workers/count.ts resolves it). */
  workers: number | "auto";
  /** The egress profiles of network.outbound, by name (empty when there are none). */
  outbound: Readonly<Record<string, OutboundSettings>>;
  plugins: PluginConfig[];
  /** Every file read, main first. */
  files: string[];
  /** Content version of the main file (or text): sha256 hex, as used by base_version. */
  version: string;
}

export function contentVersion(text: string): string {
  return createHash("sha256").update(text, "utf8").digest("hex");
}

export interface LoadOptions {
  env?: NodeJS.ProcessEnv;
}

interface ParsedFile {
  source: SourceFile;
  raw: RawConfig;
}

function parseText(text: string, file: string | null, env: NodeJS.ProcessEnv, problems: Diagnostic[]): ParsedFile | null {
  const { source, doc } = SourceFile.parse(file, text);
  if (doc.errors.length > 0) {
    for (const e of doc.errors) problems.push(source.offset(e.pos[0], `YAML syntax error: ${e.message.split("\n")[0]}`));
    return null;
  }
  const expansion = source.expand(env);
  if (expansion.length > 0) {
    problems.push(...expansion);
    return null;
  }
  if (doc.contents !== null && !isMap(doc.contents) && !(isScalar(doc.contents) && doc.contents.value === null)) {
    problems.push(source.at(doc.contents, "configuration must be a mapping with keys such as plugins, api, log"));
    return null;
  }
  let tree: { log?: { level?: unknown }; api?: { http?: unknown } };
  try {
    tree = (doc.toJS({ maxAliasCount: MAX_ALIAS_COUNT }) ?? {}) as typeof tree;
  } catch (err) {
    problems.push(conversionProblem(doc, source, err));
    return null;
  }
  // Short forms: `api.http: "127.0.0.1:9080"` and log levels in any case.
  if (tree.api && typeof tree.api === "object" && typeof tree.api.http === "string") tree.api.http = { listen: tree.api.http };
  if (tree.log && typeof tree.log === "object" && typeof tree.log.level === "string") tree.log.level = tree.log.level.toLowerCase();
  const raw = tree as RawConfig;
  const schemaProblems = validateSchema(configSchema, raw);
  for (const p of schemaProblems) problems.push(source.locate(p.path, p.message, p.key));
  if (schemaProblems.length > 0) return null;
  const apiChecks = raw.api?.http ? apiProblems(raw.api.http) : [];
  for (const p of apiChecks) problems.push(source.locate(["api", "http", ...p.path], p.message));
  const upgradeChecks = upgradeProblems(raw.upgrade);
  for (const p of upgradeChecks) problems.push(source.locate(["upgrade", p.key], p.message));
  const clusterChecks = clusterProblems(raw.cluster);
  for (const p of clusterChecks) problems.push(source.locate(["cluster", p.key], p.message));
  const logChecks = logProblems(raw.log);
  for (const p of logChecks) problems.push(source.locate(["log", p.key], p.message));
  const networkChecks = networkProblems(raw.network);
  for (const p of networkChecks) problems.push(source.locate(["network", ...p.path], p.message, p.key));
  const refChecks = upgradeOutboundProblems(raw);
  for (const p of refChecks) problems.push(source.locate(["upgrade", p.key], p.message));
  return apiChecks.length + upgradeChecks.length + clusterChecks.length + logChecks.length + networkChecks.length + refChecks.length > 0 ? null : { source, raw };
}

/** upgrade.outbound names a profile of this file's network.outbound, and is not set beside upgrade.socks5. */
function upgradeOutboundProblems(raw: RawConfig): { key: string; message: string }[] {
  const name = raw.upgrade?.outbound;
  if (name === undefined) return [];
  const profiles = raw.network?.outbound ?? {};
  if (!Object.hasOwn(profiles, name)) return [{ key: "outbound", message: `upgrade.outbound: ${unknownOutbound(name, profiles)}` }];
  if (raw.upgrade?.socks5 != null) return [{ key: "socks5", message: "upgrade.socks5 and upgrade.outbound are both set: put the proxy in the outbound profile (network.outbound.<name>.socks5)" }];
  return [];
}

/** A document that parsed but cannot become plain data: an alias bomb, or an alias without its anchor. */
function conversionProblem(doc: Document, source: SourceFile, err: unknown): Diagnostic {
  // Recursion too deep for the stack is not a problem with a location; the caller decides (the worker says too complex).
  if (err instanceof RangeError) throw err;
  if (!isAliasLimitError(err)) return source.at(null, `YAML error: ${err instanceof Error ? err.message : String(err)}`);
  const alias = excessiveAlias(doc);
  const what = alias ? `YAML alias '*${alias.source}'` : "A YAML alias";
  const message = `${what} expands the document beyond the alias limit (an anchor's content may be repeated through aliases about ${MAX_ALIAS_COUNT} times): write the values out, or alias smaller parts`;
  return { ...source.at(alias, message), code: "yaml_alias_limit" };
}

/** The text a file's version and parse are taken from: without a leading byte-order mark. */
export function withoutBom(text: string): string {
  return text.charCodeAt(0) === 0xfeff ? text.slice(1) : text;
}

/** The version GET /api/config reports for a file's text (a leading byte order mark aside). */
export function fileVersion(text: string): string {
  return contentVersion(withoutBom(text));
}

function readText(path: string): string {
  return withoutBom(readFileSync(path, "utf8"));
}

function collectPlugins(
  parsed: ParsedFile,
  file: string,
  depth: number,
  chain: string[],
  env: NodeJS.ProcessEnv,
  problems: Diagnostic[],
  out: PluginConfig[],
  files: string[],
): void {
  const includes = parsed.raw.include ?? [];
  includes.forEach((inc, i) => {
    const target = isAbsolute(inc) ? inc : resolve(dirname(file), inc);
    const at = (msg: string): Diagnostic => parsed.source.locate(["include", i], msg);
    if (chain.includes(target)) {
      problems.push(at(`include cycle: ${[...chain, target].join(" -> ")}`));
      return;
    }
    if (depth + 1 > MAX_INCLUDE_DEPTH) {
      problems.push(at(`maximum include depth of ${MAX_INCLUDE_DEPTH} exceeded while loading ${target}`));
      return;
    }
    let text: string;
    try {
      text = readText(target);
    } catch (err) {
      problems.push(at(`cannot read included config ${target}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`));
      return;
    }
    files.push(target);
    const child = parseText(text, target, env, problems);
    if (child) collectPlugins(child, target, depth + 1, [...chain, target], env, problems, out, files);
  });
  (parsed.raw.plugins ?? []).forEach((p, i) => {
    out.push({ tag: p.tag, type: p.type, args: p.args, source: parsed.source, path: ["plugins", i] });
  });
}

function assemble(parsed: ParsedFile, path: string | null, plugins: PluginConfig[], files: string[], text: string): SluiceConfig {
  return {
    path,
    version: contentVersion(text),
    log: parsed.raw.log ?? { level: "info" },
    api: parsed.raw.api?.http ?? null,
    upgrade: parsed.raw.upgrade ?? null,
    cluster: parsed.raw.cluster ?? null,
    workers: parsed.raw.workers ?? 1,
    outbound: outboundProfiles(parsed.raw.network),
    plugins,
    files,
  };
}

/**
 * Lets go of the parsed YAML of the files `config` came from, once it has been analysed (its problems
 * reported): a problem found later — a plugin that fails to start — parses its file again to be located.
 */
export function releaseSources(config: SluiceConfig): void {
  for (const p of config.plugins) p.source.release();
}

/** Loads a configuration file and everything it includes. Throws ConfigError listing every problem. */
export function loadConfigFile(path: string, options: LoadOptions = {}): SluiceConfig {
  const file = resolve(path);
  let text: string;
  try {
    // loadConfigSource drops a byte-order mark.
    text = readFileSync(file, "utf8");
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? (err as Error).message;
    throw new ConfigError([{ file, line: 1, column: 1, endLine: 1, endColumn: 2, message: `cannot read configuration file: ${code}` }]);
  }
  return loadConfigSource(text, file, options);
}

/**
 * Loads `text` as if it were the content of the file at `path`: includes resolve next to it and
 * diagnostics name it. Lets PUT /api/config validate what a file will become before writing it.
 */
export function loadConfigSource(text: string, path: string, options: LoadOptions = {}): SluiceConfig {
  const env = options.env ?? process.env;
  const file = resolve(path);
  const source = withoutBom(text);
  const problems: Diagnostic[] = [];
  const parsed = parseText(source, file, env, problems);
  if (!parsed) throw new ConfigError(problems);
  const plugins: PluginConfig[] = [];
  const files = [file];
  collectPlugins(parsed, file, 0, [file], env, problems, plugins, files);
  if (problems.length > 0) throw new ConfigError(problems);
  return assemble(parsed, file, plugins, files, source);
}

/**
 * Loads configuration text that did not come from a file (API validation). `include` is refused
 * because there is no file to resolve it against.
 */
export function loadConfigText(text: string, options: LoadOptions = {}): SluiceConfig {
  const problems: Diagnostic[] = [];
  const parsed = parseText(text, null, options.env ?? process.env, problems);
  if (!parsed) throw new ConfigError(problems);
  if ((parsed.raw.include ?? []).length > 0) {
    throw new ConfigError([parsed.source.locate(["include"], "include is only supported when validating a configuration file", true)]);
  }
  const plugins = (parsed.raw.plugins ?? []).map((p, i): PluginConfig => ({
    tag: p.tag,
    type: p.type,
    args: p.args,
    source: parsed.source,
    path: ["plugins", i],
  }));
  return assemble(parsed, null, plugins, [], text);
}
