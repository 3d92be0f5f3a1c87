// Runtime mode of declared matchers (spec: Matcher runtime mode). The matcher's mode actor writes
// the mode into a plain cell and the data plane reads it there, so a query never waits on an actor.
// The mode applies before each reference's own negation: in always_false, `$m` misses, `!$m` matches.

import type { DnsContext } from "../engine/context.js";
import type { Matcher } from "../engine/types.js";
import { MATCHER_MODES } from "./matcher-modes.js";

export { MATCHER_MODES };
export type MatcherMode = (typeof MATCHER_MODES)[number];

const NORMAL = 0;
const ALWAYS_TRUE = 2;

/** Written by the control plane, read per query. */
export interface MatcherModeCell {
  value: number;
}

export const modeValue = (mode: MatcherMode): number => MATCHER_MODES.indexOf(mode);

export class MatcherModes {
  private readonly cells = new Map<string, MatcherModeCell>();

  /** The cell of a declared matcher (created on first use). */
  cell(tag: string): MatcherModeCell {
    let cell = this.cells.get(tag);
    if (!cell) {
      cell = { value: NORMAL };
      this.cells.set(tag, cell);
    }
    return cell;
  }

  /** A reference to a declared matcher as a sequence sees it: mode first, then negation. */
  wrap(tag: string, matcher: Matcher, negate: boolean): Matcher {
    const cell = this.cell(tag);
    if (negate) return { match: (ctx: DnsContext) => !(cell.value === NORMAL ? matcher.match(ctx) : cell.value === ALWAYS_TRUE) };
    return { match: (ctx: DnsContext) => (cell.value === NORMAL ? matcher.match(ctx) : cell.value === ALWAYS_TRUE) };
  }
}
