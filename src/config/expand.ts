// ${VAR} and ${VAR:-default} expansion on the parsed YAML tree, in memory only.
// The file on disk is never rewritten; `$${` writes a literal `${`. A plain `${key}` naming a template
// key of the hook executors (`${qname}`, `${client_ip}`, ...: src/engine/template.ts) is left as it is,
// to be rendered per query; `${env:qname}` or `${qname:-x}` still read the environment.

import { isMap, isPair, isScalar, isSeq, parse as parseYamlScalar, Scalar } from "yaml";
import type { Document, Node as YamlNode } from "yaml";
import { isTemplateKey, TEMPLATE_KEYS } from "../engine/template.js";
import { renderPath, type Diagnostic } from "./diagnostics.js";
import type { SourceFile } from "./source.js";

const NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** One environment variable's value (undefined when it is not set). */
export type EnvLookup = (name: string) => string | undefined;

type Expansion = { ok: true; value: string; single: boolean } | { ok: false; message: string };

export function expandString(text: string, env: EnvLookup, where: string): Expansion {
  if (!text.includes("$")) return { ok: true, value: text, single: false };
  let out = "";
  let placeholders = 0;
  let i = 0;
  while (i < text.length) {
    if (text.startsWith("$${", i)) {
      out += "${";
      i += 3;
      continue;
    }
    if (!text.startsWith("${", i)) {
      out += text[i++];
      continue;
    }
    const close = text.indexOf("}", i + 2);
    if (close < 0) return { ok: false, message: `unterminated environment placeholder at ${where}` };
    const body = text.slice(i + 2, close);
    if (isTemplateKey(body)) {
      out += text.slice(i, close + 1);
      i = close + 1;
      continue;
    }
    const sep = body.indexOf(":-");
    let name = sep >= 0 ? body.slice(0, sep) : body;
    const fallback = sep >= 0 ? body.slice(sep + 2) : undefined;
    if (name.startsWith("env:")) name = name.slice(4);
    if (!NAME.test(name)) {
      return { ok: false, message: `invalid environment placeholder '\${${body}}' at ${where}: expected a variable name` };
    }
    const value = env(name);
    if (value === undefined || (value === "" && fallback !== undefined)) {
      if (fallback === undefined) {
        // A lower-case name was likely meant as a template key of http_request or script.
        const hint = /^[a-z_]+$/.test(name) ? ` (nor is it a template key: ${TEMPLATE_KEYS.join(", ")})` : "";
        return { ok: false, message: `undefined environment variable '${name}' at ${where}${hint}` };
      }
      out += fallback;
    } else {
      out += value;
    }
    placeholders++;
    i = close + 1;
  }
  const single = placeholders === 1 && /^\$\{[^}]*\}$/.test(text);
  return { ok: true, value: out, single };
}

/** A plain scalar that was one placeholder becomes a number/boolean/null when its value reads as one. */
function recoverType(value: string): unknown {
  if (/[\s#]/.test(value) || value.length === 0) return value;
  try {
    const parsed: unknown = parseYamlScalar(value);
    return typeof parsed === "number" || typeof parsed === "boolean" || parsed === null ? parsed : value;
  } catch {
    return value;
  }
}

/** Expands every string scalar (keys included); returns the problems found. */
export function expandDocument(doc: Document, env: EnvLookup, source: SourceFile): Diagnostic[] {
  const problems: Diagnostic[] = [];
  const visit = (node: YamlNode | null | undefined, path: (string | number)[]): void => {
    if (!node) return;
    if (isScalar(node)) {
      // Most scalars hold no placeholder: not even their path is rendered for them.
      if (typeof node.value !== "string" || !node.value.includes("$")) return;
      const r = expandString(node.value, env, renderPath(path));
      if (!r.ok) {
        problems.push(source.at(node, r.message));
        return;
      }
      const plain = node.type === Scalar.PLAIN || node.type === undefined;
      node.value = r.single && plain ? recoverType(r.value) : r.value;
      return;
    }
    if (isMap(node)) {
      for (const pair of node.items) {
        if (!isPair(pair)) continue;
        const key = pair.key as YamlNode | null;
        visit(key, path);
        const keyText = isScalar(key) ? String(key.value) : "?";
        visit(pair.value as YamlNode | null, [...path, keyText]);
      }
      return;
    }
    if (isSeq(node)) node.items.forEach((item, i) => visit(item as YamlNode, [...path, i]));
  };
  visit(doc.contents, []);
  return problems;
}
