// Shared by the audit trail's tests: the trail of a running Sluice, pages of GET /api/audit, waits
// for entries to be written, and the trail's metrics.

import type { AnyActorRef } from "xstate";
import { expect } from "vitest";
import { AuditTrail } from "../../src/api/audit/audit.js";
import type { AuditEntry } from "../../src/api/audit/entry.js";
import type { StoredAuditEntry } from "../../src/api/audit/store.js";
import type { RunningSluice } from "../helpers/sluice.js";
import { until } from "./recorder-helpers.js";

export { until };

export const AUTH = { authorization: `Basic ${Buffer.from("admin:s3cret").toString("base64")}` };
export const JSON_BODY = { "content-type": "application/json" };

export interface AuditPageJson {
  ok: true;
  entries: StoredAuditEntry[];
  next_cursor: string | null;
}

/** The running API's audit trail (its actor, sink and store). */
export function trailOf(s: RunningSluice): AuditTrail {
  const trail = s.app.apiServer?.audit;
  if (!(trail instanceof AuditTrail)) throw new Error("this Sluice has no API, so no audit trail");
  return trail;
}

/** Waits until everything appended so far is written (the queue empty, the writer idle). */
export function drained(s: RunningSluice): Promise<true> {
  const trail = trailOf(s);
  return until("the audit queue written", () => trail.queued() === 0 && trail.actor.getSnapshot().matches({ ready: { write: "idle" } }));
}

/** Sends the audit actor one of its delayed events (`xstate.after.…`) now: the test's clock. */
export function sendTimer(s: RunningSluice, type: "xstate.after.pruneInterval.audit.ready.prune.waiting" | "xstate.after.retryDelay.audit.failed"): void {
  (trailOf(s).actor as AnyActorRef).send({ type });
}

/** GET /api/audit with `query` (a query string without `?`), answered 200. */
export async function auditPage(s: RunningSluice, query = "", headers: Record<string, string> = AUTH): Promise<AuditPageJson> {
  const res = await s.api(`/api/audit${query ? `?${query}` : ""}`, { headers });
  const text = await res.text();
  expect(res.status, `GET /api/audit?${query}: ${text.slice(0, 300)}`).toBe(200);
  return JSON.parse(text) as AuditPageJson;
}

/** Waits until GET /api/audit?`query` holds at least `n` entries; returns them (newest first). */
export function entriesAtLeast(s: RunningSluice, n: number, query = "", headers: Record<string, string> = AUTH): Promise<StoredAuditEntry[]> {
  const limit = query.includes("limit=") ? "" : `${query ? "&" : ""}limit=500`;
  return until(`${n} audit entries (${query})`, async () => {
    const page = await auditPage(s, `${query}${limit}`, headers);
    return page.entries.length >= n ? page.entries : undefined;
  });
}

/** A counter or gauge without labels from GET /api/metrics. */
export async function metric(s: RunningSluice, name: string, headers: Record<string, string> = AUTH): Promise<number> {
  const text = await (await s.api("/api/metrics", { headers })).text();
  const line = text.split("\n").find((l) => l.startsWith(`${name} `));
  if (line === undefined) throw new Error(`no ${name} in /api/metrics`);
  return Number(line.slice(name.length + 1));
}

/** An entry as the hook would make it, for appending to the sink directly. */
export function entry(over: Partial<AuditEntry> = {}): AuditEntry {
  return {
    at_ms: Date.now(),
    method: "POST",
    route: "/api/test",
    path: "/api/test",
    tag: null,
    actor: "tester",
    via: "none",
    role: null,
    address: "127.0.0.1",
    status: 200,
    code: null,
    summary: "made by the test",
    ...over,
  };
}
