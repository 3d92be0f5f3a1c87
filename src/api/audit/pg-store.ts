// The audit trail in PostgreSQL: one table in a schema of its own (`sluice_audit` unless
// api.http.audit.postgres.schema says otherwise), created when missing under an advisory lock (several
// instances may share one trail), one connection per process. Same filters and paging as SQLite;
// substrings match case-insensitively (ILIKE). A connection that breaks is reported (`onLost`): the
// actor closes the store and opens it again later.

import type * as Pg from "pg";
import { lazyModule } from "../../lazy-module.js";

const pg = lazyModule<typeof Pg>("pg");
import type { AuditEntry } from "./entry.js";
import { likeAnywhere, OneAtATime, pageOf, PRUNE_CHUNK, type AuditPage, type AuditQuery, type AuditStore, type StoredAuditEntry } from "./store.js";

const CONNECT_TIMEOUT_MS = 3000;
/** A read or prune statement that runs longer is cancelled (the store stays open). */
const STATEMENT_TIMEOUT_MS = 10_000;

const FIELDS = ["at_ms", "method", "route", "path", "tag", "actor", "via", "role", "address", "status", "code", "summary"] as const;

const ddl = (schema: string): string => `
CREATE TABLE IF NOT EXISTS ${schema}.audit_v1 (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  at_ms bigint NOT NULL,
  method text NOT NULL,
  route text NOT NULL,
  path text NOT NULL,
  tag text,
  actor text NOT NULL,
  via text NOT NULL,
  role text,
  address text NOT NULL,
  status integer NOT NULL,
  code text,
  summary text NOT NULL
);
CREATE INDEX IF NOT EXISTS audit_v1_at ON ${schema}.audit_v1 (at_ms);
CREATE INDEX IF NOT EXISTS audit_v1_actor ON ${schema}.audit_v1 (actor, id);
CREATE INDEX IF NOT EXISTS audit_v1_tag ON ${schema}.audit_v1 (tag, id) WHERE tag IS NOT NULL;
CREATE INDEX IF NOT EXISTS audit_v1_status ON ${schema}.audit_v1 (status, id);
`;

interface Row {
  id: string;
  at_ms: string;
  status: number;
}

/** Text PostgreSQL accepts (no NUL characters). */
const text = (s: string): string => (s.includes("\0") ? s.replace(/\0/g, "") : s);

const fromRow = (r: Row & Omit<AuditEntry, "at_ms" | "status">): StoredAuditEntry => ({ ...r, id: Number(r.id), at_ms: Number(r.at_ms), status: Number(r.status) });

export class PgAuditStore implements AuditStore {
  private readonly serial = new OneAtATime();
  private readonly table: string;

  private constructor(
    private readonly client: Pg.Client,
    schema: string,
  ) {
    this.table = `${schema}.audit_v1`;
  }

  /** Connects and creates the schema and table when missing. `schema` is validated by the config schema (`[a-z_][a-z0-9_]*`). */
  static async open(url: string, schema: string, onLost: (err: Error) => void): Promise<PgAuditStore> {
    const client = new (pg().Client)({ connectionString: url, connectionTimeoutMillis: CONNECT_TIMEOUT_MS, statement_timeout: STATEMENT_TIMEOUT_MS, application_name: "sluice audit" });
    // Until connected, a failure rejects connect(); after, it is a lost connection.
    let connected = false;
    client.on("error", (err) => {
      if (connected) onLost(err);
    });
    try {
      await client.connect();
      connected = true;
      await client.query("BEGIN");
      await client.query("SELECT pg_advisory_xact_lock(hashtext($1))", [`sluice.audit.${schema}`]);
      await client.query(`CREATE SCHEMA IF NOT EXISTS ${schema}`);
      await client.query(ddl(schema));
      await client.query("COMMIT");
    } catch (err) {
      connected = false;
      await client.end().catch(() => undefined);
      throw err;
    }
    return new PgAuditStore(client, schema);
  }

  insert(entries: readonly AuditEntry[]): Promise<StoredAuditEntry[]> {
    return this.serial.run(async () => {
      if (entries.length === 0) return [];
      const params: unknown[] = [];
      const rows = entries.map((e) => {
        const start = params.length;
        params.push(...FIELDS.map((f) => (typeof e[f] === "string" ? text(e[f]) : e[f])));
        return `(${FIELDS.map((_, i) => `$${start + i + 1}`).join(", ")})`;
      });
      // One statement, one transaction; RETURNING keeps the order of VALUES for a plain INSERT.
      const res = await this.client.query<{ id: string }>(`INSERT INTO ${this.table} (${FIELDS.join(", ")}) VALUES ${rows.join(", ")} RETURNING id`, params);
      return entries.map((e, i) => ({ id: Number(res.rows[i]?.id), ...e }));
    });
  }

  async query(q: AuditQuery): Promise<AuditPage> {
    const conds: string[] = [];
    const params: unknown[] = [];
    const p = (value: unknown): string => {
      params.push(value);
      return `$${params.length}`;
    };
    if (q.before !== null) conds.push(`id < ${p(q.before)}`);
    if (q.actor !== null) conds.push(`actor = ${p(text(q.actor))}`);
    if (q.via !== null) conds.push(`via = ${p(q.via)}`);
    if (q.method !== null) conds.push(`method = ${p(text(q.method))}`);
    if (q.route !== null) conds.push(`route ILIKE ${p(likeAnywhere(text(q.route)))}`);
    if (q.tag !== null) conds.push(`tag = ${p(text(q.tag))}`);
    if (q.status !== null) conds.push(`status BETWEEN ${p(q.status.min)} AND ${p(q.status.max)}`);
    if (q.fromMs !== null) conds.push(`at_ms >= ${p(q.fromMs)}`);
    if (q.toMs !== null) conds.push(`at_ms <= ${p(q.toMs)}`);
    if (q.q !== null) conds.push(`summary ILIKE ${p(likeAnywhere(text(q.q)))}`);
    const where = conds.length > 0 ? `WHERE ${conds.join(" AND ")}` : "";
    const res = await this.client.query<Row & Omit<AuditEntry, "at_ms" | "status">>(`SELECT id, ${FIELDS.join(", ")} FROM ${this.table} ${where} ORDER BY id DESC LIMIT ${p(q.limit + 1)}`, params);
    return pageOf(res.rows.map(fromRow), q.limit);
  }

  prune(beforeMs: number, maxEntries: number): Promise<number> {
    return this.serial.run(async () => {
      let deleted = await this.deleteChunks(`DELETE FROM ${this.table} WHERE id IN (SELECT id FROM ${this.table} WHERE at_ms < $1 ORDER BY id LIMIT $2)`, beforeMs);
      const over = await this.client.query<{ id: string }>(`SELECT id FROM ${this.table} ORDER BY id DESC LIMIT 1 OFFSET $1`, [maxEntries]);
      const id = over.rows[0]?.id;
      if (id !== undefined) deleted += await this.deleteChunks(`DELETE FROM ${this.table} WHERE id IN (SELECT id FROM ${this.table} WHERE id <= $1 ORDER BY id LIMIT $2)`, Number(id));
      return deleted;
    });
  }

  private async deleteChunks(sql: string, bound: number): Promise<number> {
    let deleted = 0;
    for (;;) {
      const n = (await this.client.query(sql, [bound, PRUNE_CHUNK])).rowCount ?? 0;
      deleted += n;
      if (n < PRUNE_CHUNK) return deleted;
    }
  }

  close(): Promise<void> {
    return this.serial.finish(() => this.client.end().catch(() => undefined));
  }
}
