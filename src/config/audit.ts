// `api.http.audit`: where the audit trail of management requests is kept and for how long. Omitted
// (or true): on, in SQLite at data/audit.db below the working directory, 90 days, 100 000 entries.
// false: off. One store: a SQLite file (`path`) or a PostgreSQL schema (`postgres`), never both.

import { isAbsolute, resolve } from "node:path";
import { durationProblem, parseDuration } from "../engine/duration.js";

export const DEFAULT_AUDIT_PATH = "data/audit.db";
export const DEFAULT_AUDIT_PG_SCHEMA = "sluice_audit";
export const DEFAULT_AUDIT_RETENTION = "90d";
export const DEFAULT_AUDIT_MAX_ENTRIES = 100_000;

export interface AuditConfig {
  /** SQLite file (relative to the working directory -d). */
  path?: string;
  postgres?: { url: string; schema?: string };
  /** How long an entry is kept (a duration). */
  retention?: string;
  /** Entries kept at most; the oldest go first. */
  max_entries?: number;
}

/** Schema of `api.http.audit` (merged into apiHttpSchema). */
export const auditSchema = {
  type: ["boolean", "object"],
  additionalProperties: false,
  properties: {
    path: { type: "string", minLength: 1, maxLength: 4096 },
    postgres: {
      type: "object",
      additionalProperties: false,
      required: ["url"],
      properties: {
        url: { type: "string", pattern: "^postgres(ql)?://", maxLength: 4096 },
        // Its own PostgreSQL schema (namespace); instances that share one trail name the same one.
        schema: { type: "string", pattern: "^[a-z_][a-z0-9_]{0,50}$" },
      },
    },
    retention: { type: "string", minLength: 1 },
    max_entries: { type: "integer", minimum: 1, maximum: 100_000_000 },
  },
} as const;

export type AuditStoreSettings = { kind: "sqlite"; path: string } | { kind: "postgres"; url: string; schema: string };

/** The audit trail in force: its store, and what pruning keeps. */
export interface AuditSettings {
  store: AuditStoreSettings;
  retentionMs: number;
  maxEntries: number;
}

/** What the schema cannot say; each problem's path is below `api.http.audit`. */
export function auditProblems(audit: boolean | AuditConfig | undefined): { path: string[]; message: string }[] {
  if (typeof audit !== "object") return [];
  const problems: { path: string[]; message: string }[] = [];
  if (audit.path !== undefined && audit.postgres !== undefined) {
    problems.push({ path: ["postgres"], message: "api.http.audit: path and postgres are both set; the audit trail is kept in one store (remove path to use PostgreSQL)" });
  }
  const retention = durationProblem("api.http.audit.retention", audit.retention, 60_000, 36_500 * 86_400_000);
  if (retention) problems.push({ path: ["retention"], message: retention });
  return problems;
}

/** The settings of a (validated) `api.http.audit`, or null when it is off. */
export function auditSettings(audit: boolean | AuditConfig | undefined, baseDir: string): AuditSettings | null {
  if (audit === false) return null;
  const c: AuditConfig = typeof audit === "object" ? audit : {};
  const path = c.path ?? DEFAULT_AUDIT_PATH;
  return {
    store: c.postgres ? { kind: "postgres", url: c.postgres.url, schema: c.postgres.schema ?? DEFAULT_AUDIT_PG_SCHEMA } : { kind: "sqlite", path: isAbsolute(path) ? path : resolve(baseDir, path) },
    retentionMs: parseDuration(c.retention ?? DEFAULT_AUDIT_RETENTION),
    maxEntries: c.max_entries ?? DEFAULT_AUDIT_MAX_ENTRIES,
  };
}

/** Two settings keep the same store open (retention and max_entries apply without reopening). */
export const sameAuditStore = (a: AuditStoreSettings | null, b: AuditStoreSettings | null): boolean => JSON.stringify(a) === JSON.stringify(b);
