// `mark`: true when the query carries any of the listed marks (set earlier with the `mark` builtin).

import { ArgError, argProblems, definePlugin } from "../../registry/types.js";

type MarkArgs = string[];

function parseMarks(args: MarkArgs): number[] {
  const out: number[] = [];
  args.forEach((item, i) => {
    for (const token of item.split(/[\s,]+/).filter((s) => s.length > 0)) {
      if (!/^\d+$/.test(token) || Number(token) > 0xffffffff) throw new ArgError(`'${token}' is not an unsigned 32-bit mark`, [i]);
      out.push(Number(token));
    }
  });
  if (out.length === 0) throw new ArgError("needs at least one mark");
  return out;
}

export const markMatcher = definePlugin<MarkArgs, "matcher">({
  type: "mark",
  kind: "matcher",
  feature: "core",
  summary: "Matches queries carrying any of the given marks.",
  schema: { type: "array", minItems: 1, items: { type: "string" } },
  shorthand: (raw) => (typeof raw === "string" || typeof raw === "number" ? [String(raw)] : Array.isArray(raw) ? raw.map((x) => (typeof x === "number" ? String(x) : x) as unknown) : raw),
  quickSetup: (param) => param,
  check: (args) => argProblems(() => parseMarks(args)),
  create(args) {
    const marks = parseMarks(args);
    if (marks.length === 1) {
      const m = marks[0];
      return { match: (ctx) => ctx.hasMark(m) };
    }
    return { match: (ctx) => ctx.marks !== null && marks.some((m) => ctx.hasMark(m)) };
  },
});
