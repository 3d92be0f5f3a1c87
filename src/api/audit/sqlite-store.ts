// The audit trail in a SQLite file, through better-sqlite3 on the API's thread: management requests
// only, written in batches (one transaction per flush), read a page at a time through indexes, and
// pruned in chunks with a turn of the event loop between them. The file names users and addresses:
// it is created 0600 (and set so when it exists), its directory 0700 when Sluice makes it.

import Database from "better-sqlite3";
import { chmodSync, closeSync, mkdirSync, openSync } from "node:fs";
import { dirname } from "node:path";
import type { AuditEntry } from "./entry.js";
import { likeAnywhere, OneAtATime, pageOf, PRUNE_CHUNK, type AuditPage, type AuditQuery, type AuditStore, type StoredAuditEntry } from "./store.js";

// AUTOINCREMENT: an id is never given twice, even after every row was pruned (cursors stay valid).
const SCHEMA = `
CREATE TABLE IF NOT EXISTS audit_v1 (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  at_ms INTEGER NOT NULL,
  method TEXT NOT NULL,
  route TEXT NOT NULL,
  path TEXT NOT NULL,
  tag TEXT,
  actor TEXT NOT NULL,
  via TEXT NOT NULL,
  role TEXT,
  address TEXT NOT NULL,
  status INTEGER NOT NULL,
  code TEXT,
  summary TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS audit_v1_at ON audit_v1 (at_ms);
CREATE INDEX IF NOT EXISTS audit_v1_actor ON audit_v1 (actor, id);
CREATE INDEX IF NOT EXISTS audit_v1_tag ON audit_v1 (tag, id) WHERE tag IS NOT NULL;
CREATE INDEX IF NOT EXISTS audit_v1_status ON audit_v1 (status, id);
`;

const COLUMNS = "id, at_ms, method, route, path, tag, actor, via, role, address, status, code, summary";

/** A lock held by another connection fails the write soon instead of holding the event loop. */
const BUSY_TIMEOUT_MS = 50;

const turn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/** The WHERE clause of a query's filters, with `?` parameters. */
export function whereOf(q: AuditQuery): { sql: string; params: (string | number)[] } {
  const conds: string[] = [];
  const params: (string | number)[] = [];
  const add = (cond: string, ...values: (string | number)[]): void => {
    conds.push(cond);
    params.push(...values);
  };
  if (q.before !== null) add("id < ?", q.before);
  if (q.actor !== null) add("actor = ?", q.actor);
  if (q.via !== null) add("via = ?", q.via);
  if (q.method !== null) add("method = ?", q.method);
  if (q.route !== null) add("route LIKE ? ESCAPE '\\'", likeAnywhere(q.route));
  if (q.tag !== null) add("tag = ?", q.tag);
  if (q.status !== null) add("status BETWEEN ? AND ?", q.status.min, q.status.max);
  if (q.fromMs !== null) add("at_ms >= ?", q.fromMs);
  if (q.toMs !== null) add("at_ms <= ?", q.toMs);
  if (q.q !== null) add("summary LIKE ? ESCAPE '\\'", likeAnywhere(q.q));
  return { sql: conds.length > 0 ? `WHERE ${conds.join(" AND ")}` : "", params };
}

export class SqliteAuditStore implements AuditStore {
  private readonly serial = new OneAtATime();
  private closed = false;

  private constructor(private readonly db: Database.Database) {}

  /** Opens (creating when missing) the file at `path`, mode 0600. */
  static open(path: string): SqliteAuditStore {
    mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
    closeSync(openSync(path, "a", 0o600));
    chmodSync(path, 0o600);
    const db = new Database(path);
    try {
      db.pragma("journal_mode = WAL");
      db.pragma("synchronous = NORMAL");
      db.pragma(`busy_timeout = ${BUSY_TIMEOUT_MS}`);
      db.exec(SCHEMA);
    } catch (err) {
      db.close();
      throw err;
    }
    return new SqliteAuditStore(db);
  }

  insert(entries: readonly AuditEntry[]): Promise<StoredAuditEntry[]> {
    return this.serial.run(() => {
      const stmt = this.db.prepare(
        "INSERT INTO audit_v1 (at_ms, method, route, path, tag, actor, via, role, address, status, code, summary) VALUES (@at_ms, @method, @route, @path, @tag, @actor, @via, @role, @address, @status, @code, @summary)",
      );
      const write = this.db.transaction((batch: readonly AuditEntry[]) => batch.map((e) => ({ id: Number(stmt.run(e).lastInsertRowid), ...e })));
      return write(entries);
    });
  }

  query(q: AuditQuery): Promise<AuditPage> {
    if (this.closed) return Promise.reject(new Error("the audit store is closed"));
    const where = whereOf(q);
    const rows = this.db.prepare(`SELECT ${COLUMNS} FROM audit_v1 ${where.sql} ORDER BY id DESC LIMIT ?`).all(...where.params, q.limit + 1) as StoredAuditEntry[];
    return Promise.resolve(pageOf(rows, q.limit));
  }

  prune(beforeMs: number, maxEntries: number): Promise<number> {
    return this.serial.run(async () => {
      let deleted = await this.deleteChunks("DELETE FROM audit_v1 WHERE id IN (SELECT id FROM audit_v1 WHERE at_ms < ? ORDER BY id LIMIT ?)", beforeMs);
      // The newest entry beyond the cap: it and everything older go.
      const over = this.db.prepare("SELECT id FROM audit_v1 ORDER BY id DESC LIMIT 1 OFFSET ?").get(maxEntries) as { id: number } | undefined;
      if (over) deleted += await this.deleteChunks("DELETE FROM audit_v1 WHERE id IN (SELECT id FROM audit_v1 WHERE id <= ? ORDER BY id LIMIT ?)", over.id);
      return deleted;
    });
  }

  private async deleteChunks(sql: string, bound: number): Promise<number> {
    const stmt = this.db.prepare(sql);
    let deleted = 0;
    for (;;) {
      const n = stmt.run(bound, PRUNE_CHUNK).changes;
      deleted += n;
      if (n < PRUNE_CHUNK || this.closed) return deleted;
      await turn();
    }
  }

  close(): Promise<void> {
    return this.serial.finish(() => {
      this.closed = true;
      this.db.close();
    });
  }
}
