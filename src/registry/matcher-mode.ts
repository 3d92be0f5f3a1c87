// Runtime mode of declared matchers (spec: Matcher runtime mode). The data plane reads the mode
// through a plain object the control plane writes, so a query never waits for anything.
// The mode applies before each reference's own negation: in always_false, `$m` misses, `!$m` matches.

import type { DnsContext } from "../engine/context.js";
import type { Matcher } from "../engine/types.js";

export const MATCHER_MODES = ["normal", "always_false", "always_true"] as const;
export type MatcherMode = (typeof MATCHER_MODES)[number];

const NORMAL = 0;
const ALWAYS_TRUE = 2;

interface ModeCell {
  value: number;
}

export class MatcherModes {
  private readonly cells = new Map<string, ModeCell>();

  declare(tag: string): void {
    if (!this.cells.has(tag)) this.cells.set(tag, { value: NORMAL });
  }

  /** A reference to a declared matcher as a sequence sees it: mode first, then negation. */
  wrap(tag: string, matcher: Matcher, negate: boolean): Matcher {
    const cell = this.cells.get(tag);
    if (!cell) return negate ? { match: (ctx: DnsContext) => !matcher.match(ctx) } : matcher;
    if (negate) return { match: (ctx: DnsContext) => !(cell.value === NORMAL ? matcher.match(ctx) : cell.value === ALWAYS_TRUE) };
    return { match: (ctx: DnsContext) => (cell.value === NORMAL ? matcher.match(ctx) : cell.value === ALWAYS_TRUE) };
  }

  set(tag: string, mode: MatcherMode): boolean {
    const cell = this.cells.get(tag);
    if (!cell) return false;
    cell.value = MATCHER_MODES.indexOf(mode);
    return true;
  }

  get(tag: string): MatcherMode | undefined {
    const cell = this.cells.get(tag);
    return cell ? MATCHER_MODES[cell.value] : undefined;
  }
}
