// One configuration file's text and the way back from a path inside its YAML to a line and column.
// The parsed Document of a large file is megabytes of heap (nodes, pairs, ranges) for a few kilobytes
// of arguments, so it is kept only while the configuration is being loaded and analysed: release()
// drops it, and a problem found later (a plugin failing to start) parses the text again — with the
// same ${VAR} values — to locate itself. Positions come from the text, so they are the same either way.

import { isCollection, isNode, isPair, isScalar, isSeq, LineCounter, parseDocument, type Document, type Node as YamlNode } from "yaml";
import type { Diagnostic, YamlPath } from "./diagnostics.js";
import { expandDocument } from "./expand.js";

/** How every configuration text is parsed (load, re-parse, and the syntax check of an unvalidated save). */
const PARSE_OPTIONS = { prettyErrors: false, uniqueKeys: true } as const;

interface Parsed {
  doc: Document;
  lines: LineCounter;
}

function parseText(text: string): Parsed {
  const lines = new LineCounter();
  return { doc: parseDocument(text, { ...PARSE_OPTIONS, lineCounter: lines }), lines };
}

/** Maps paths inside one YAML file back to line/column. */
export class SourceFile {
  /** The Document and its line index while they are kept (see release()). */
  private parsed: Parsed | null;
  /** Every variable ${VAR} expansion read, with the value it read then: a re-parse expands the same way. */
  private readonly env = new Map<string, string | undefined>();

  private constructor(
    readonly file: string | null,
    /** The text as parsed (no byte-order mark). */
    readonly text: string,
    parsed: Parsed | null,
  ) {
    this.parsed = parsed;
  }

  /** Parses `text`; syntax problems are in the document's `errors`. The document is kept until release(). */
  static parse(file: string | null, text: string): { source: SourceFile; doc: Document } {
    const parsed = parseText(text);
    return { source: new SourceFile(file, text, parsed), doc: parsed.doc };
  }

  /**
   * Expands ${VAR} placeholders in the kept document, in place (src/config/expand.ts), and remembers
   * what it read from `env`. Returns the problems found.
   */
  expand(env: NodeJS.ProcessEnv): Diagnostic[] {
    if (!this.parsed) throw new Error("SourceFile.expand: the document was released");
    return expandDocument(this.parsed.doc, (name) => this.read(name, env[name]), this);
  }

  private read(name: string, value: string | undefined): string | undefined {
    this.env.set(name, value);
    return value;
  }

  /** Drops the document: the configuration has been analysed, and locating a later problem parses the text again. */
  release(): void {
    this.parsed = null;
  }

  /** The kept document, or the text parsed and expanded again (not kept: later problems are rare). */
  private document(): Parsed {
    if (this.parsed) return this.parsed;
    const again = parseText(this.text);
    if (again.doc.errors.length === 0) expandDocument(again.doc, (name) => this.env.get(name), this);
    return again;
  }

  /** Locates the deepest existing node along `path` (the key when `key` is true). */
  locate(path: YamlPath, message: string, key = false): Diagnostic {
    const { doc, lines } = this.document();
    let node: unknown = doc.contents;
    let keyNode: unknown = null;
    for (const seg of path) {
      if (!isCollection(node)) break;
      const items = node.items as unknown[];
      let next: unknown;
      // An index, as a number or as digits (paths built with String(i)) when the node is a list.
      if (typeof seg === "number" || (isSeq(node) && /^\d+$/.test(seg))) {
        next = items[Number(seg)];
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
    return this.span(isNode(target) ? target : null, message, () => lines);
  }

  /** The problem at a node of the kept document (from parse()), or at the start of the file for null. */
  at(node: YamlNode | null, message: string): Diagnostic {
    return this.span(node, message, () => this.document().lines);
  }

  private span(node: YamlNode | null, message: string, linesOf: () => LineCounter): Diagnostic {
    const range = node?.range;
    if (!range) return { file: this.file, line: 1, column: 1, endLine: 1, endColumn: 2, message };
    const lines = linesOf();
    const start = lines.linePos(range[0]);
    const end = lines.linePos(Math.max(range[1], range[0] + 1));
    return { file: this.file, line: start.line, column: start.col, endLine: end.line, endColumn: end.col, message };
  }

  /** Position of a character offset (for parser errors). */
  offset(offset: number, message: string): Diagnostic {
    const p = this.document().lines.linePos(offset);
    return { file: this.file, line: p.line, column: p.col, endLine: p.line, endColumn: p.col + 1, message };
  }
}
