// `api.http.sse_heartbeat`: how often an idle SSE stream (logs, plugin streams) gets a `: heartbeat`
// comment, so proxies and clients do not time it out. 15 s unless set; shorter suits proxies with a
// short idle timeout (and tests, which then need not wait 15 s to see one).

import { durationProblem, parseDuration } from "../engine/duration.js";
import type { ApiConfig } from "./schema.js";

export const DEFAULT_SSE_HEARTBEAT_MS = 15_000;

/** Why `api.http.sse_heartbeat` cannot be used, or null. */
export const sseHeartbeatProblem = (value: string | undefined): string | null => durationProblem("api.http.sse_heartbeat", value, 100, 600_000);

/** The heartbeat interval of the (validated) API section in force. */
export function sseHeartbeatMs(api: ApiConfig | null | undefined): number {
  const value = api?.sse_heartbeat;
  return value === undefined ? DEFAULT_SSE_HEARTBEAT_MS : parseDuration(value);
}
