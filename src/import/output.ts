// What the blocky and mosdns importers fill in as they read: plugins in order, the `main` sequence's
// rules, top-level sections, files, and the unsupported settings and notes. Their sources are
// plugin pipelines of their own, so they place each plugin themselves rather than through draft.ts.

import { Document, isSeq } from "yaml";
import type { ImportResult } from "./types.js";
import { isObj, type Obj } from "./values.js";

export { isObj, type Obj };

export interface OutPlugin {
  tag: string;
  type: string;
  args?: unknown;
}

export interface OutRule {
  matches?: string | string[];
  exec: string;
}

export class Output {
  readonly plugins: OutPlugin[] = [];
  readonly main: OutRule[] = [];
  readonly top: Obj = {};
  readonly files: Record<string, string> = {};
  readonly unsupported: string[] = [];
  readonly notes: string[] = [];

  unsupportedKey(key: string, value: unknown, why = ""): void {
    this.unsupported.push(`${key}: ${JSON.stringify(value)}${why ? ` (${why})` : ""}`);
  }

  note(text: string): void {
    this.notes.push(text);
  }

  add(p: OutPlugin): void {
    this.plugins.push(p);
  }

  /** `value` as an object of the known keys; every other key is listed as unsupported under `path`. */
  section(path: string, value: unknown, known: readonly string[]): Obj {
    if (value === undefined || value === null) return {};
    if (!isObj(value)) {
      this.unsupportedKey(path, value, "not a mapping");
      return {};
    }
    for (const [k, v] of Object.entries(value)) if (!known.includes(k)) this.unsupportedKey(`${path}.${k}`, v);
    return value;
  }

  /** Comments placed before rule `rule` of the sequence tagged `tag` (after its last rule when past the end). */
  readonly ruleComments: { tag: string; rule: number; text: string }[] = [];

  result(withMain = true): ImportResult {
    const plugins = [...this.plugins];
    if (withMain && this.main.length > 0) {
      // The sequence goes before the servers that name it, after everything it names.
      const firstServer = plugins.findIndex((p) => p.type.endsWith("_server"));
      const seq = { tag: "main", type: "sequence", args: this.main };
      if (firstServer < 0) plugins.push(seq);
      else plugins.splice(firstServer, 0, seq);
    }
    const doc = new Document({ ...this.top, plugins });
    for (const c of this.ruleComments) {
      const seq = doc.getIn(["plugins", plugins.findIndex((p) => p.tag === c.tag), "args"], true);
      if (!isSeq(seq)) continue;
      const item = seq.items[c.rule] as { commentBefore?: string | null } | undefined;
      if (item) item.commentBefore = item.commentBefore ? `${item.commentBefore}\n${c.text}` : c.text;
      else seq.comment = seq.comment ? `${seq.comment}\n${c.text}` : c.text;
    }
    return { yaml: doc.toString({ lineWidth: 0 }), files: this.files, unsupported: this.unsupported, notes: this.notes };
  }
}

/** Seconds as a Sluice duration (`90s`, `1500ms`). */
export function duration(seconds: number): string {
  return Number.isInteger(seconds) ? `${seconds}s` : `${Math.round(seconds * 1000)}ms`;
}

/** Strings and numbers (blocky writes ports and addresses either way) as strings. */
export const strings = (v: unknown): string[] =>
  Array.isArray(v) ? v.filter((x): x is string | number => typeof x === "string" || typeof x === "number").map(String) : typeof v === "string" || typeof v === "number" ? [String(v)] : [];
