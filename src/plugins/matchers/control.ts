// Every declared matcher's control plane: a `matcher:<tag>` mode actor (normal, always_true,
// always_false; machines/matcher-mode.machine.ts) that writes the mode into the cell the data plane
// reads, and GET status / POST mode. A mode may carry a duration after which it returns to normal.

import { matcherModeMachine, modeOf, type MatcherModeContext, type MatcherModeStatus } from "../../../machines/matcher-mode.machine.js";
import { parseDuration } from "../../engine/duration.js";
import { bodyField, RouteError, type ConcernEvent, type PluginControl, type PluginRoute } from "../../registry/control.js";
import { MATCHER_MODES, modeValue, type MatcherMode } from "../../registry/matcher-mode.js";
import type { MatcherPlugin } from "../../registry/types.js";
import { matcherStatusSchema } from "./schemas.js";

/** Longest timed mode: one week (timers beyond ~24 days would overflow anyway). */
export const MAX_MODE_DURATION_MS = 7 * 86_400_000;

const modeBody = {
  type: "object",
  required: ["mode"],
  additionalProperties: false,
  properties: {
    mode: { type: "string", enum: MATCHER_MODES },
    duration: { type: ["string", "integer"], description: "Optional: return to normal after this long (\"10m\", \"1h\", or seconds); at most 7d" },
  },
} as const;

function status(tag: string, s: MatcherModeStatus): object {
  return { ok: true, matcher: tag, mode: s.mode, until_ms: s.until_ms };
}

function durationMs(raw: unknown): number | null {
  if (raw === undefined || raw === null) return null;
  let ms: number;
  try {
    ms = parseDuration(raw as string | number);
  } catch (err) {
    throw new RouteError("invalid_matcher_runtime_mode", `duration: ${(err as Error).message}`);
  }
  if (ms <= 0 || ms > MAX_MODE_DURATION_MS) throw new RouteError("invalid_matcher_runtime_mode", "duration must be more than 0 and at most 7d");
  return ms;
}

const statusRoute: PluginRoute<MatcherPlugin> = {
  method: "GET",
  role: "viewer",
  path: "status",
  summary: "This matcher's runtime mode",
  schema: { response: { 200: matcherStatusSchema } },
  handle(_req, plugin) {
    const snap = plugin.concern.snapshot();
    return status(plugin.tag, { mode: modeOf(snap.value), until_ms: (snap.context as MatcherModeContext).until_ms });
  },
};

const modeRoute: PluginRoute<MatcherPlugin> = {
  method: "POST",
  role: "operator",
  path: "mode",
  audit: (req) => `→ ${bodyField(req.body, "mode")}${bodyField(req.body, "duration") ? ` for ${bodyField(req.body, "duration")}` : ""}`,
  summary: "Set this matcher's runtime mode (normal, always_true, always_false), optionally for a while",
  description: "Idempotent. A reload or restart returns every matcher to normal. With `duration` the mode returns to normal by itself; status then shows until_ms.",
  invalidBody: "invalid_matcher_runtime_mode",
  errors: ["invalid_matcher_runtime_mode"],
  schema: { body: modeBody, response: { 200: matcherStatusSchema } },
  async handle(req, plugin) {
    const body = req.body as { mode: MatcherMode; duration?: string | number };
    const out = (await plugin.concern.ask({ type: "MATCHER.SET_MODE", mode: body.mode, duration_ms: durationMs(body.duration), at: Date.now() })) as MatcherModeStatus;
    return status(plugin.tag, out);
  },
};

/** A mode set on another cluster member: same mode, same end (until_ms), or nothing once that has passed. */
function replayMode(event: Record<string, unknown>, now: number): ConcernEvent | null {
  const { mode, duration_ms: duration, at } = event;
  if (typeof mode !== "string" || !(MATCHER_MODES as readonly string[]).includes(mode)) return null;
  if (duration === null || duration === undefined) return { type: "MATCHER.SET_MODE", mode, duration_ms: null, at: now };
  if (typeof duration !== "number" || typeof at !== "number" || !(duration > 0 && duration <= MAX_MODE_DURATION_MS)) return null;
  const left = at + duration - now;
  if (left <= 0 || left > MAX_MODE_DURATION_MS) return null;
  return { type: "MATCHER.SET_MODE", mode, duration_ms: left, at: now };
}

/** A mode other than normal, as the event that sets it (with what is left of its duration). */
function currentMode(snapshot: { value: unknown; context: unknown }, now: number): ConcernEvent[] {
  const mode = modeOf(snapshot.value);
  if (mode === "normal") return [];
  const until = (snapshot.context as { until_ms?: number | null }).until_ms ?? null;
  if (until !== null && until <= now) return [];
  return [{ type: "MATCHER.SET_MODE", mode, duration_ms: until === null ? null : until - now, at: now }];
}

export const matcherControl: PluginControl<MatcherPlugin> = {
  concern: (_matcher, env) => {
    const cell = env.matcherMode;
    if (!cell) throw new Error(`matcher '${env.tag}' has no mode cell`);
    return {
      id: `matcher:${env.tag}`,
      logic: matcherModeMachine.provide({
        actions: {
          publish: (_args, params: { mode: MatcherMode }) => {
            cell.value = modeValue(params.mode);
          },
        },
      }),
      input: { tag: env.tag },
    };
  },
  routes: [statusRoute, modeRoute],
  shared: { events: ["MATCHER.SET_MODE"], replay: replayMode, current: currentMode },
};
