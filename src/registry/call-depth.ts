// The deepest chain of executor calls a configuration can make (jump, goto, `$sequence`, fallback
// branches), found without recursion so that a 100 000-long chain is as cheap to check as a short one.
// The sequence engine enforces the same bound at run time (src/engine/sequence.ts).

import { renderPath } from "../config/diagnostics.js";
import { MAX_CALL_DEPTH } from "../engine/types.js";
import type { ResolvedPlugin } from "./analyze.js";
import type { DependencySpec } from "./types.js";

export interface CallDepthProblem {
  /** The plugin whose rule makes the call that passes the limit. */
  plugin: ResolvedPlugin;
  /** The reference inside its args (located by the caller). */
  argsPath: (string | number)[];
  message: string;
}

/** A sequence run is one level; so is any executor that calls other executors (fallback). */
function levels(p: ResolvedPlugin): number {
  return p.def.kind === "executor" && (p.def.type === "sequence" || p.deps.some((d) => d.kind === "executor")) ? 1 : 0;
}

const calls = (p: ResolvedPlugin): DependencySpec[] => (p.def.kind === "executor" ? p.deps.filter((d) => d.kind === "executor") : []);

/**
 * Every chain that nests more than `max` levels, reported once at the call that passes the limit.
 * `order` lists dependencies first (the init order, so the graph has no cycle).
 */
export function callDepthProblems(order: readonly string[], byTag: ReadonlyMap<string, ResolvedPlugin>, max = MAX_CALL_DEPTH): CallDepthProblem[] {
  // Deepest chain below each executor and the call that leads into it, dependencies first.
  const depth = new Map<string, number>();
  const deepest = new Map<string, DependencySpec>();
  const called = new Set<string>();
  for (const tag of order) {
    const p = byTag.get(tag);
    if (!p || p.def.kind !== "executor") continue;
    let below = 0;
    for (const d of calls(p)) {
      called.add(d.target);
      const n = depth.get(d.target) ?? 0;
      if (n > below || !deepest.has(tag)) {
        below = Math.max(below, n);
        deepest.set(tag, d);
      }
    }
    depth.set(tag, levels(p) + below);
  }
  const problems: CallDepthProblem[] = [];
  const reported = new Set<string>();
  for (const tag of order) {
    const total = depth.get(tag) ?? 0;
    if (called.has(tag) || total <= max) continue;
    // Walk the deepest chain from this root to the call that makes it one level too deep.
    const chain = [tag];
    let at = byTag.get(tag) as ResolvedPlugin;
    let level = levels(at);
    while (level <= max) {
      const call = deepest.get(at.config.tag) as DependencySpec;
      const next = byTag.get(call.target) as ResolvedPlugin;
      level += levels(next);
      chain.push(next.config.tag);
      if (level > max) {
        const key = `${at.config.tag}\u0000${call.argsPath.join("/")}`;
        if (!reported.has(key)) {
          reported.add(key);
          const shown = chain.length > 6 ? `${chain.slice(0, 3).join(" -> ")} -> ... -> ${chain.slice(-2).join(" -> ")}` : chain.join(" -> ");
          problems.push({
            plugin: at,
            argsPath: call.argsPath,
            message: `${renderPath(["args", ...call.argsPath])}: calling '${next.config.tag}' here nests ${level} calls deep, past the maximum call depth of ${max} (the chain starting at '${tag}' is ${total} deep: ${shown})`,
          });
        }
        break;
      }
      at = next;
    }
  }
  return problems;
}
