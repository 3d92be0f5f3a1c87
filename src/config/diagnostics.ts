// Problems found in a configuration, each pointing at a file, line and column.

import type { Document, LineCounter, Node as YamlNode } from "yaml";
import { isCollection, isNode, isPair, isScalar } from "yaml";

export interface Diagnostic {
  /** File the problem is in; null for text validated from a request body. */
  file: string | null;
  /** 1-based. */
  line: number;
  column: number;
  endLine: number;
  endColumn: number;
  message: string;
  /** The API error code this problem calls for instead of the route's usual one (yaml_alias_limit). */
  code?: string;
}

/** A configuration that cannot be used, with every problem found. */
export class ConfigError extends Error {
  readonly diagnostics: Diagnostic[];
  /** The first problem's own API error code, when one has it; null means the route's usual code. */
  readonly code: string | null;
  constructor(diagnostics: Diagnostic[]) {
    super(diagnostics.map((d) => d.message).join("; "));
    this.name = "ConfigError";
    this.diagnostics = diagnostics;
    this.code = diagnostics.find((d) => d.code !== undefined)?.code ?? null;
  }
}

export function formatDiagnostic(d: Diagnostic): string {
  return `${d.file ?? "<config>"}:${d.line}:${d.column}: error: ${d.message}`;
}

export type YamlPath = readonly (string | number)[];

/** Maps paths inside one parsed YAML file back to line/column. */
export class SourceFile {
  constructor(
    readonly file: string | null,
    readonly doc: Document,
    readonly lines: LineCounter,
  ) {}

  /** Locates the deepest existing node along `path` (the key when `key` is true). */
  locate(path: YamlPath, message: string, key = false): Diagnostic {
    let node: unknown = this.doc.contents;
    let keyNode: unknown = null;
    for (const seg of path) {
      if (!isCollection(node)) break;
      const items = node.items as unknown[];
      let next: unknown;
      if (typeof seg === "number") {
        next = items[seg];
        keyNode = null;
      } else {
        const pair = items.find((p) => isPair(p) && isScalar(p.key) && String(p.key.value) === seg);
        if (!isPair(pair)) break;
        keyNode = pair.key;
        next = pair.value;
      }
      if (!isNode(next)) {
        node = keyNode ?? node;
        break;
      }
      node = next;
    }
    const target = key && isNode(keyNode) ? keyNode : node;
    return this.at(isNode(target) ? target : null, message);
  }

  at(node: YamlNode | null, message: string): Diagnostic {
    const range = node?.range;
    if (!range) return { file: this.file, line: 1, column: 1, endLine: 1, endColumn: 2, message };
    const start = this.lines.linePos(range[0]);
    const end = this.lines.linePos(Math.max(range[1], range[0] + 1));
    return { file: this.file, line: start.line, column: start.col, endLine: end.line, endColumn: end.col, message };
  }

  /** Position of a character offset (for parser errors). */
  offset(offset: number, message: string): Diagnostic {
    const p = this.lines.linePos(offset);
    return { file: this.file, line: p.line, column: p.col, endLine: p.line, endColumn: p.col + 1, message };
  }
}

/** Renders a path the way operators read it: plugins[3].args.upstreams[0].addr */
export function renderPath(path: YamlPath): string {
  let out = "";
  for (const seg of path) out += typeof seg === "number" ? `[${seg}]` : out.length === 0 ? seg : `.${seg}`;
  return out.length === 0 ? "<root>" : out;
}
