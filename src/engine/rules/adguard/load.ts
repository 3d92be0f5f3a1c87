// Builds an AdguardIndex from inline rules and list files. A $badfilter rule may come after (or in
// another file than) the rule it disables, so a first pass over the lines that mention "badfilter"
// collects what is disabled; the second pass compiles every line straight into the index (no
// list of parsed rules is kept, which keeps a 150 000-rule build small and fast). Unsupported
// lines are counted and reported once per source, not once per line.

import { ArgError } from "../../plugin-args.js";
import { RuleSyntaxError } from "../domain.js";
import { Slicer } from "../slicer.js";
import { readRuleLines, type ArgPath } from "../source.js";
import { AdguardIndexBuilder, type AdguardIndex } from "./index.js";
import { parseAdguardLine, type ParsedRule } from "./parse.js";

export interface AdguardArgs {
  /** Inline rules; an item may hold several lines. */
  rules: string[];
  files: string[];
}

/** One source's unsupported lines: how many, and the first one (for the warning). */
export interface SkippedReport {
  source: string;
  count: number;
  first: { line: number; text: string; reason: string };
}

/** The lines of one source and where errors in them are reported. */
interface Source {
  /** "rules" for inline rules, else the file as written in the config. */
  name: string;
  lines: string[];
  /** Arg path of line i (inline: its item; file: the `files` entry). */
  at: (i: number) => ArgPath;
  /** How a problem on line i is prefixed ("" inline, "file:line: " for files). */
  where: (i: number) => string;
}

function inlineSource(rules: readonly string[]): Source {
  const lines: string[] = [];
  const items: number[] = [];
  rules.forEach((item, i) => {
    for (const text of item.split("\n")) {
      lines.push(text);
      items.push(i);
    }
  });
  return { name: "rules", lines, at: (i) => ["rules", items[i]], where: () => "" };
}

/** Problems in the inline rules (for `check`); files are read at start. */
export function adguardInlineProblems(rules: readonly string[]): { path: ArgPath; message: string }[] {
  const problems: { path: ArgPath; message: string }[] = [];
  const src = inlineSource(rules);
  const sink: ParsedRule[] = [];
  src.lines.forEach((text, i) => {
    try {
      parseAdguardLine(text, sink);
    } catch (err) {
      if (!(err instanceof RuleSyntaxError)) throw err;
      problems.push({ path: src.at(i), message: err.message });
    }
    sink.length = 0;
  });
  return problems;
}

function parseOrLocate(src: Source, i: number, out: ParsedRule[]): string | null {
  try {
    return parseAdguardLine(src.lines[i], out);
  } catch (err) {
    throw new ArgError(`${src.where(i)}${(err as Error).message}`, src.at(i));
  }
}

const BADFILTER = /badfilter/i;

/**
 * Reads inline rules then files (in order) and compiles them. A malformed rule is an ArgError
 * located at its item, or "file:line: ..." for a file. `onSkipped` gets one report per source.
 */
export async function loadAdguardIndex(
  args: AdguardArgs,
  resolvePath: (path: string) => string,
  onSkipped: (report: SkippedReport) => void,
  slicer = new Slicer(),
): Promise<AdguardIndex> {
  const sources: Source[] = [inlineSource(args.rules)];
  for (let f = 0; f < args.files.length; f++) {
    const shown = args.files[f];
    const lines = await readRuleLines(resolvePath(shown), shown, ["files", f], slicer);
    sources.push({ name: shown, lines, at: () => ["files", f], where: (i) => `${shown}:${i + 1}: ` });
  }
  const out: ParsedRule[] = [];
  const disabledKeys = new Set<string>();
  for (const src of sources) {
    for (let i = 0; i < src.lines.length; i++) {
      if (slicer.due()) await slicer.pause();
      if (!BADFILTER.test(src.lines[i])) continue;
      parseOrLocate(src, i, out);
      for (const r of out) if (r.badfilter && r.badfilterKey !== null) disabledKeys.add(r.badfilterKey);
      out.length = 0;
    }
  }
  const builder = new AdguardIndexBuilder();
  let disabled = 0;
  let skipped = 0;
  for (const src of sources) {
    let report: SkippedReport | null = null;
    for (let i = 0; i < src.lines.length; i++) {
      if (slicer.due()) await slicer.pause();
      const reason = parseOrLocate(src, i, out);
      if (reason !== null) {
        report ??= { source: src.name, count: 0, first: { line: i + 1, text: src.lines[i].trim(), reason } };
        report.count++;
        continue;
      }
      for (const r of out) {
        if (r.badfilter) continue;
        if (disabledKeys.size > 0 && r.badfilterKey !== null && disabledKeys.has(r.badfilterKey)) disabled++;
        else builder.add(r);
      }
      out.length = 0;
    }
    if (report !== null) {
      skipped += report.count;
      onSkipped(report);
    }
  }
  return builder.buildSliced(skipped, disabled, slicer);
}
