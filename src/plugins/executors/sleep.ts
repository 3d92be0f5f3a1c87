// `sleep`: waits before continuing (for tests and for deliberately slowing a branch).

import { parseDuration } from "../../engine/duration.js";
import { Step } from "../../engine/types.js";
import { ArgError, definePlugin } from "../../registry/types.js";

interface SleepArgs {
  /** Milliseconds. */
  duration: number;
}

export const sleep = definePlugin<SleepArgs, "executor">({
  type: "sleep",
  kind: "executor",
  feature: "core",
  summary: "Waits for a while, then continues.",
  schema: {
    type: "object",
    additionalProperties: false,
    properties: { duration: { type: "integer", minimum: 0, maximum: 600_000, default: 0 } },
  },
  // Quick setup: a bare number is milliseconds; otherwise a duration such as 250ms or 2s.
  quickSetup(param) {
    const text = param.trim();
    if (/^\d+$/.test(text)) return { duration: Number(text) };
    try {
      return { duration: parseDuration(text) };
    } catch (err) {
      throw new ArgError((err as Error).message);
    }
  },
  create(args) {
    const ms = args.duration;
    return {
      execute: () => (ms === 0 ? Step.Next : new Promise<typeof Step.Next>((resolve) => setTimeout(() => resolve(Step.Next), ms))),
    };
  },
});
