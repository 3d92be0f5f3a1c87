// What an audit store does (SQLite: ./sqlite-store.ts, PostgreSQL: ./pg-store.ts): append a batch in
// one transaction (ids assigned in order), read a page newest first with the filters, prune by age and
// by count in chunks. Operations on one store run one at a time (OneAtATime), so a close waits for
// the write or prune in progress.

import type { AuditEntry, AuditVia } from "./entry.js";

/** An entry as stored: its id orders the trail (increasing, newest highest). */
export type StoredAuditEntry = { id: number } & AuditEntry;

export interface AuditQuery {
  limit: number;
  /** Entries with a smaller id than this (the previous page's next_cursor). */
  before: number | null;
  actor: string | null;
  via: AuditVia | null;
  method: string | null;
  /** Substring of the route pattern (case-insensitive). */
  route: string | null;
  tag: string | null;
  /** One status, or a class: [400, 499] for `4xx`. */
  status: { min: number; max: number } | null;
  fromMs: number | null;
  toMs: number | null;
  /** Substring of the summary (case-insensitive). */
  q: string | null;
}

export interface AuditPage {
  entries: StoredAuditEntry[];
  next_cursor: string | null;
}

export interface AuditStore {
  insert(entries: readonly AuditEntry[]): Promise<StoredAuditEntry[]>;
  query(q: AuditQuery): Promise<AuditPage>;
  /** Deletes entries older than `beforeMs`, then the oldest beyond `maxEntries`; resolves with the number deleted. */
  prune(beforeMs: number, maxEntries: number): Promise<number>;
  close(): Promise<void>;
}

/** Rows a prune deletes per statement; between chunks other work runs. */
export const PRUNE_CHUNK = 5000;

/** A LIKE pattern matching `s` anywhere (escape character `\`). */
export const likeAnywhere = (s: string): string => `%${s.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;

/** The page of `limit` from rows read with `limit + 1`: the extra row says there is a next page. */
export function pageOf(rows: StoredAuditEntry[], limit: number): AuditPage {
  const entries = rows.slice(0, limit);
  const last = entries[entries.length - 1];
  return { entries, next_cursor: rows.length > limit && last ? String(last.id) : null };
}

/** Runs store operations one after the other; `close` runs after what was started before it. */
export class OneAtATime {
  private tail: Promise<unknown> = Promise.resolve();
  private closed = false;

  run<T>(work: () => Promise<T> | T): Promise<T> {
    if (this.closed) return Promise.reject(new Error("the audit store is closed"));
    const next = this.tail.then(work, work);
    this.tail = next.catch(() => undefined);
    return next;
  }

  /** No operation starts after this; resolves with `last`'s result once the earlier ones have ended. */
  finish<T>(last: () => Promise<T> | T): Promise<T> {
    const done = this.run(last);
    this.closed = true;
    return done;
  }
}
