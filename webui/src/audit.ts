// The audit trail's data for the Audit page: one page of GET /api/audit (newest first, cursor paging),
// the filters of that route, and the same filters applied in the browser to the entries that arrive
// on GET /api/audit/stream while the page follows it.

import type { AuditEntry } from "../../src/api/audit/entry.js";
import { api } from "./api";
import { localMs } from "./format";

/** A stored entry: the audit store adds an increasing id. */
export type AuditRow = AuditEntry & { id: number };

export interface AuditPage {
  ok: true;
  entries: AuditRow[];
  next_cursor: string | null;
}

/** The filters of the page's form (times as datetime-local text). */
export interface AuditFilters {
  actor: string;
  method: string;
  tag: string;
  /** An exact status (403) or a class (4xx). */
  status: string;
  q: string;
  from: string;
  to: string;
}

export const NO_AUDIT_FILTERS: AuditFilters = { actor: "", method: "", tag: "", status: "", q: "", from: "", to: "" };

/** The methods the trail holds: every state-changing one, and GET for refused reads. */
export const METHODS = ["POST", "PUT", "PATCH", "DELETE", "GET"] as const;

/** A status filter the route takes: 3 digits, or one digit and "xx". */
const STATUS_PATTERN = "[1-5](?:[0-9]{2}|xx|XX)";
const STATUS_RE = new RegExp(`^${STATUS_PATTERN}$`);

/** The query string of GET /api/audit for `f` (empty fields left out). */
export function auditQuery(f: AuditFilters, limit: number, cursor: string | null): string {
  const q = new URLSearchParams({ limit: String(limit) });
  const text: [string, string][] = [
    ["actor", f.actor.trim()],
    ["method", f.method],
    ["tag", f.tag.trim()],
    ["status", f.status.trim().toLowerCase()],
    ["q", f.q.trim()],
  ];
  for (const [k, v] of text) if (v !== "") q.set(k, v);
  const from = localMs(f.from);
  const to = localMs(f.to);
  if (from !== null) q.set("from_ms", String(from));
  if (to !== null) q.set("to_ms", String(to));
  if (cursor !== null) q.set("cursor", cursor);
  return q.toString();
}

/** What is wrong with the form's filters, or null. */
export function filterProblem(f: AuditFilters): string | null {
  const status = f.status.trim();
  if (status !== "" && !STATUS_RE.test(status)) return "Status is a code such as 403, or a class such as 4xx.";
  const from = localMs(f.from);
  const to = localMs(f.to);
  if (from !== null && to !== null && from > to) return "The time range ends before it starts.";
  return null;
}

/** Whether a streamed entry belongs on the page under the filters in force (the route's own rules). */
export function passes(e: AuditRow, f: AuditFilters): boolean {
  if (f.actor.trim() !== "" && e.actor !== f.actor.trim()) return false;
  if (f.method !== "" && e.method !== f.method) return false;
  if (f.tag.trim() !== "" && e.tag !== f.tag.trim()) return false;
  const status = f.status.trim().toLowerCase();
  if (status !== "") {
    if (status.endsWith("xx") ? Math.floor(e.status / 100) !== Number(status[0]) : e.status !== Number(status)) return false;
  }
  if (f.q.trim() !== "" && !e.summary.toLowerCase().includes(f.q.trim().toLowerCase())) return false;
  const from = localMs(f.from);
  const to = localMs(f.to);
  if (from !== null && e.at_ms < from) return false;
  if (to !== null && e.at_ms > to) return false;
  return true;
}

export const loadAudit = (f: AuditFilters, limit: number, cursor: string | null): Promise<AuditPage> => api<AuditPage>(`api/audit?${auditQuery(f, limit, cursor)}`);
