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
  /** Matchers a group pause turns off (the `clients` provider's `pause`): false for a paused client, before mode and negation. */
  pausable: ReadonlySet<string> = new Set();

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
    if (this.pausable.has(tag)) {
      const moded = (ctx: DnsContext): boolean => (ctx.client !== null && ctx.client.paused ? false : cell.value === NORMAL ? matcher.match(ctx) : cell.value === ALWAYS_TRUE);
      return negate ? { match: (ctx: DnsContext) => !moded(ctx) } : { match: moded };
    }
    if (negate) return { match: (ctx: DnsContext) => !(cell.value === NORMAL ? matcher.match(ctx) : cell.value === ALWAYS_TRUE) };
    return { match: (ctx: DnsContext) => (cell.value === NORMAL ? matcher.match(ctx) : cell.value === ALWAYS_TRUE) };
  }
}
