// One line of the audit trail: a state-changing request (or a refused one), who made it, from
// where, and how it ended. The API's onResponse hook builds it; the audit store keeps it.

import type { Role } from "../../registry/roles.js";

/** How the caller proved who it is. */
export type AuditVia = "none" | "basic" | "session" | "token" | "certificate";

export interface AuditEntry {
  /** Unix ms when the answer was sent. */
  at_ms: number;
  method: string;
  /** The route's pattern as OpenAPI writes it (`/api/plugins/{tag}/mode`), or the path when no route matched. */
  route: string;
  /** The path asked for, without the query string. */
  path: string;
  /** The plugin tag of a plugin route, else null. */
  tag: string | null;
  /** Who: a user name, a token's name, `anonymous` (no auth configured, or a refused request without credentials). */
  actor: string;
  via: AuditVia;
  /** The role the request ran with (null when it was not authenticated). */
  role: Role | null;
  /** The client's address as the listener saw it. */
  address: string;
  status: number;
  /** The error code of a refused or failed request, else null. */
  code: string | null;
  /** A short line a person reads: "matcher ads → always_false for 10m". */
  summary: string;
}

/** Where the API hands entries; never blocks and never throws (a full queue drops and counts). */
export interface AuditSink {
  append(entry: AuditEntry): void;
}
