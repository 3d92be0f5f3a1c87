// A declared matcher's runtime mode (spec: Matcher runtime mode): normal, always_true,
// always_false. Every request is accepted (setting the current mode again is idempotent). Beyond the
// spec, a mode may carry a duration ("pause blocking for 10 minutes"): it then returns to normal by
// itself. Each state publishes its mode to the data plane's cell (the `publish` action is provided
// by src/plugins/matchers/control.ts); a reload or restart creates a new actor, so the mode is normal.

import { assign, emit, setup } from "xstate";
import type { Answer, Asked } from "./concern.js";
import type { MatcherMode } from "../src/registry/matcher-mode.js";

export interface MatcherModeContext {
  tag: string;
  /** When a timed mode returns to normal (Unix ms), else null. */
  until_ms: number | null;
  /** How long the current timed mode lasts, ms (drives the timer), else null. */
  duration_ms: number | null;
  requestId: string | null;
}

export type MatcherModeEvent = { type: "MATCHER.SET_MODE"; mode: MatcherMode; duration_ms: number | null; at: number } & Asked;

/** What a mode request answers and GET status shows. */
export interface MatcherModeStatus {
  mode: MatcherMode;
  until_ms: number | null;
}

const modeIs = (mode: MatcherMode) => ({ type: "modeIs" as const, params: { mode } });

const overridden = (mode: "always_true" | "always_false") => ({
  entry: { type: "publish" as const, params: { mode } },
  initial: "choosing" as const,
  states: {
    choosing: { always: [{ guard: "timed" as const, target: "timed" as const }, { target: "held" as const }] },
    held: {},
    timed: { after: { modeDuration: "#matcher.normal" } },
  },
});

export const matcherModeMachine = setup({
  types: {
    context: {} as MatcherModeContext,
    events: {} as MatcherModeEvent,
    emitted: {} as Answer,
    input: {} as { tag: string },
  },
  guards: {
    modeIs: ({ event }, params: { mode: MatcherMode }) => event.mode === params.mode,
    timed: ({ context }) => context.duration_ms !== null,
  },
  delays: {
    modeDuration: ({ context }) => context.duration_ms ?? 0,
  },
  actions: {
    /** Writes the mode where the data plane reads it. */
    publish: (_args, _params: { mode: MatcherMode }) => {},
    record: assign(({ event }) => ({
      requestId: event.requestId,
      duration_ms: event.mode === "normal" ? null : event.duration_ms,
      until_ms: event.mode === "normal" || event.duration_ms === null ? null : event.at + event.duration_ms,
    })),
    answer: emit(({ context, event }): Answer => ({
      type: "answer",
      requestId: context.requestId ?? "",
      ok: true,
      output: { mode: event.mode, until_ms: context.until_ms } satisfies MatcherModeStatus,
    })),
    clearTimer: assign({ until_ms: null, duration_ms: null }),
  },
}).createMachine({
  id: "matcher",
  initial: "normal",
  context: ({ input }) => ({ tag: input.tag, until_ms: null, duration_ms: null, requestId: null }),
  on: {
    "MATCHER.SET_MODE": [
      { guard: modeIs("normal"), target: ".normal", reenter: true, actions: ["record", "answer"] },
      { guard: modeIs("always_true"), target: ".always_true", reenter: true, actions: ["record", "answer"] },
      // The route's schema admits only the three modes: what is left is always_false.
      { target: ".always_false", reenter: true, actions: ["record", "answer"] },
    ],
  },
  states: {
    normal: { entry: ["clearTimer", { type: "publish", params: { mode: "normal" } }] },
    always_true: overridden("always_true"),
    always_false: overridden("always_false"),
  },
});

/** The mode named by a snapshot's state value. */
export const modeOf = (value: unknown): MatcherMode => (typeof value === "string" ? value : Object.keys(value as object)[0]) as MatcherMode;
