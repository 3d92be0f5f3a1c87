// `sluice import mosdns config.yaml`: a mosdns v5 configuration. Sluice's plugin model follows
// mosdns's (through OxiDNS), so most plugins carry over as they are; `include`d files are merged in,
// `log` and `api` keep their meaning, and the rest is listed as unsupported.

import { readFileSync, statSync } from "node:fs";
import { dirname, isAbsolute, join, resolve } from "node:path";
import { parse } from "yaml";
import { createCatalog } from "../plugins/catalog.js";
import { MosdnsPlugins } from "./mosdns-plugins.js";
import { isObj, Output, type Obj, type OutPlugin } from "./output.js";
import { ImportError, type Importer, type ImportResult } from "./types.js";

const MAX_INCLUDE_DEPTH = 8;

function configFile(path: string): string {
  try {
    if (!statSync(path).isDirectory()) return path;
  } catch (err) {
    throw new ImportError(`cannot read ${path}: ${(err as Error).message}`);
  }
  return ["config.yaml", "config.yml"].map((n) => join(path, n)).find((p) => statSync(p, { throwIfNoEntry: false })?.isFile()) ?? join(path, "config.yaml");
}

function readYaml(file: string): Obj {
  let doc: unknown;
  try {
    doc = parse(readFileSync(file, "utf8"));
  } catch (err) {
    throw new ImportError(`cannot read ${file}: ${(err as Error).message}`);
  }
  if (!isObj(doc)) throw new ImportError(`${file} is not a mosdns configuration (not a mapping)`);
  return doc;
}

/** The plugins of `file` after those of the files it includes (recursively, as mosdns merges them). */
function loadPlugins(out: Output, file: string, depth: number): OutPlugin[] {
  if (depth > MAX_INCLUDE_DEPTH) throw new ImportError(`${file}: includes nest deeper than ${MAX_INCLUDE_DEPTH}`);
  const doc = readYaml(file);
  const plugins: OutPlugin[] = [];
  for (const inc of Array.isArray(doc.include) ? doc.include : []) {
    if (typeof inc !== "string") continue;
    const path = isAbsolute(inc) ? inc : resolve(dirname(file), inc);
    plugins.push(...loadPlugins(out, path, depth + 1));
    out.note(`include ${inc}: its plugins are written into this file`);
  }
  if (depth > 0) for (const k of Object.keys(doc)) if (k !== "plugins" && k !== "include") out.unsupportedKey(`${file}: ${k}`, doc[k], "an included file gives plugins only");
  for (const [i, p] of (Array.isArray(doc.plugins) ? doc.plugins : []).entries()) {
    if (!isObj(p) || typeof p.tag !== "string" || typeof p.type !== "string") throw new ImportError(`${file}: plugins[${i}] needs a tag and a type`);
    plugins.push({ tag: p.tag, type: p.type, ...(p.args !== undefined && p.args !== null ? { args: p.args } : {}) });
  }
  return plugins;
}

function topLevel(out: Output, doc: Obj): void {
  for (const [k, v] of Object.entries(doc)) if (!["log", "api", "include", "plugins"].includes(k)) out.unsupportedKey(k, v);
  const log = out.section("log", doc.log, ["level", "file", "production"]);
  const level = typeof log.level === "string" ? log.level.toLowerCase() : undefined;
  const sluiceLog: Obj = {};
  if (level !== undefined) {
    if (["debug", "info", "warn", "error"].includes(level)) sluiceLog.level = level;
    else out.unsupportedKey("log.level", log.level);
  }
  if (typeof log.file === "string" && log.file !== "") sluiceLog.file = log.file;
  if (log.production !== undefined) out.unsupportedKey("log.production", log.production, "the log is JSON lines");
  if (Object.keys(sluiceLog).length > 0) out.top.log = { level: "info", ...sluiceLog };
  const api = out.section("api", doc.api, ["http"]);
  if (typeof api.http === "string" && api.http !== "") {
    out.top.api = { http: api.http };
    out.note("api.http is Sluice's management API: mosdns's plugin routes (cache flush, dump) are under /api/plugins/<tag>/ there");
  }
}

function importMosdns(path: string): ImportResult {
  const file = configFile(path);
  const doc = readYaml(file);
  if (!Array.isArray(doc.plugins)) throw new ImportError(`${file} is not a mosdns v5 configuration (no plugins list)`);
  const out = new Output();
  topLevel(out, doc);
  const plugins = new MosdnsPlugins(out, createCatalog(), dirname(file));
  const tags = new Set<string>();
  for (const p of loadPlugins(out, file, 0)) {
    if (tags.has(p.tag)) throw new ImportError(`plugin tag '${p.tag}' is declared twice`);
    tags.add(p.tag);
    const translated = plugins.translate(p);
    if (translated === null) continue;
    out.add(translated.type === "sequence" ? plugins.sequence(translated) : translated);
  }
  if (!out.plugins.some((p) => p.type.endsWith("_server"))) out.note("no server plugin was carried over: add a udp_server to answer queries");
  return out.result(false);
}

/** A bad source rejects the promise with an ImportError (never a synchronous throw). */
export const importConfig: Importer = (path) => Promise.resolve(path).then(importMosdns);
