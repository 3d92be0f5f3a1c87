// The writer's side of the PostgreSQL store: one connection, opened (and reopened after a failure)
// on demand. A batch is one transaction of multi-row INSERTs (one array parameter per column) that
// first takes an advisory lock shared by every instance writing the store, so ids are committed in
// increasing order across instances (the stream reads "ids after the last one seen" and must not
// skip a late commit); it ends with a NOTIFY the stream side listens for. The connection listens
// too, so the writer always knows the newest id committed by any instance (where a stream opened
// while the store takes no new connections starts). Retention applies to every instance's records,
// max_records to this instance's own; both delete in chunks. Runs in the writer worker only.

import type pg from "pg";
import type { BatchRecord } from "./batch.js";
import { pgClient, pgMigrate, pgNames, pgText, type PgOptions, type PgStep } from "./pg-schema.js";
import { outcomeOf, questionsOf, storedName } from "./store.js";

/** Rows per INSERT statement (each column travels as one array parameter). */
const ROWS_PER_INSERT = 4096;
/** Records deleted per statement by trims and retention. */
const DELETE_CHUNK = 10_000;
/** One statement for many rows: each column is one array parameter, unnested into rows (the statement is the same for any row count). */
const INSERT = (table: string): string => `INSERT INTO ${table}
  (created_at_ms, instance, elapsed_us, client_ip, qname, qtype, question_count, outcome, error, query, response, steps, client_name, client_groups)
  SELECT u.c, $2, u.e, u.ip, u.qn, u.qt, u.qc, u.oc, u.er, u.q, u.rs, u.st::jsonb, u.cn, string_to_array(u.cg, ',')
  FROM unnest($1::bigint[], $3::bigint[], $4::text[], $5::text[], $6::integer[], $7::integer[], $8::integer[], $9::text[], $10::bytea[], $11::bytea[], $12::text[], $13::text[], $14::text[])
    AS u(c, e, ip, qn, qt, qc, oc, er, q, rs, st, cn, cg)
  RETURNING id`;

/** The id in a writer's NOTIFY payload (`{"instance": …, "id": n}`), or NaN. */
function notifiedId(payload: string | undefined): number {
  try {
    return Number((JSON.parse(payload ?? "") as { id?: unknown }).id);
  } catch {
    return Number.NaN;
  }
}

export interface PgStoreOptions {
  pg: PgOptions;
  instance: string;
  /** 0: no cap (per instance). */
  maxRecords: number;
  retentionMs: number;
}

export class PgRecorderStore {
  private client: pg.Client | null = null;
  private readonly names: ReturnType<typeof pgNames>;
  private readonly insertSql: string;
  /** This instance's rows (counted at connect and after deletions, kept by adding in between). */
  records = 0;
  /** Newest record id committed by any instance, as far as this connection has seen (read at connect, then its commits and every NOTIFY); null before the first connect. */
  newestId: number | null = null;

  constructor(private readonly options: PgStoreOptions) {
    this.names = pgNames(options.pg.schema);
    this.insertSql = INSERT(this.names.records);
  }

  /** The open connection, or a new one (migrated); throws when the server cannot be reached. */
  async connect(): Promise<pg.Client> {
    if (this.client) return this.client;
    const c = pgClient(this.options.pg, () => {
      if (this.client === c) this.client = null;
    });
    try {
      await c.connect();
      await pgMigrate(c, this.options.pg.schema);
      this.records = await this.countOwn(c);
      c.on("notification", (n) => this.saw(notifiedId(n.payload)));
      await c.query(`LISTEN ${this.names.channel}`);
      // The store's word, not the largest ever seen (a store emptied and made again starts ids anew).
      this.newestId = Number((await c.query<{ id: string | null }>(`SELECT max(id) AS id FROM ${this.names.records}`)).rows[0].id ?? 0);
    } catch (err) {
      void c.end().catch(() => undefined);
      throw err;
    }
    this.client = c;
    return c;
  }

  /** Drops the connection after an error (the next call opens another). */
  reset(): void {
    const c = this.client;
    this.client = null;
    void c?.end().catch(() => undefined);
  }

  private saw(id: number): void {
    if (Number.isSafeInteger(id) && id > (this.newestId ?? -1)) this.newestId = id;
  }

  private async countOwn(c: pg.Client): Promise<number> {
    return Number((await c.query<{ n: string }>(`SELECT count(*) AS n FROM ${this.names.records} WHERE instance = $1`, [this.options.instance])).rows[0].n);
  }

  /** Writes `batch` in one transaction; throws (nothing written) on any failure. */
  async insert(batch: BatchRecord[]): Promise<void> {
    if (batch.length === 0) return;
    const c = await this.connect();
    await c.query("BEGIN");
    try {
      await c.query("SELECT pg_advisory_xact_lock(hashtext($1))", [this.names.lock]);
      let maxId = 0;
      for (let i = 0; i < batch.length; i += ROWS_PER_INSERT) {
        const res = await c.query<{ id: string }>(this.insertSql, this.columns(batch.slice(i, i + ROWS_PER_INSERT)));
        for (const row of res.rows) maxId = Math.max(maxId, Number(row.id));
      }
      await c.query("SELECT pg_notify($1, $2)", [this.names.channel, JSON.stringify({ instance: this.options.instance, id: maxId })]);
      await c.query("COMMIT");
      this.saw(maxId);
    } catch (err) {
      await c.query("ROLLBACK").catch(() => undefined);
      throw err;
    }
    this.records += batch.length;
  }

  /** The statement's parameters: one array per column ($2 is the instance, the same for every row). */
  private columns(rows: BatchRecord[]): unknown[] {
    const cols: unknown[][] = Array.from({ length: 13 }, () => []);
    for (const r of rows) {
      const questions = questionsOf(r.query);
      const q0 = questions[0];
      const outcome = outcomeOf(r.response, r.error);
      const steps: PgStep[] = r.steps.map((s) => ({ s: pgText(s.sequenceTag), n: s.nodeIndex, k: s.kind, t: pgText(s.tag), o: s.outcome }));
      const row = [
        Math.round(r.createdAtMs),
        r.elapsedUs,
        pgText(r.clientIp),
        pgText(q0 ? storedName(q0.name) : ""),
        q0 ? q0.type : 0,
        questions.length,
        outcome,
        r.error === null ? null : pgText(r.error),
        r.query,
        outcome >= 0 ? r.response : null,
        JSON.stringify(steps),
        r.clientName === null ? null : pgText(r.clientName),
        // Unnested as text (an array of arrays would be flattened): group names have no commas.
        pgText(r.clientGroups.join(",")),
      ];
      row.forEach((v, i) => cols[i].push(v));
    }
    return [cols[0], this.options.instance, ...cols.slice(1)];
  }

  /** Deletes every record of the store (all instances); returns how many there were. Ids go on from where they were. */
  async clear(): Promise<number> {
    const c = await this.connect();
    await c.query("BEGIN");
    try {
      const n = Number((await c.query<{ n: string }>(`SELECT count(*) AS n FROM ${this.names.records}`)).rows[0].n);
      await c.query(`TRUNCATE ${this.names.records}`);
      await c.query("COMMIT");
      this.records = 0;
      return n;
    } catch (err) {
      await c.query("ROLLBACK").catch(() => undefined);
      throw err;
    }
  }

  /** Deletes, DELETE_CHUNK at a time, the oldest rows matching `where` ($1.. = params), at most `count`. */
  private async deleteOldest(c: pg.Client, where: string, params: unknown[], count: number): Promise<number> {
    let deleted = 0;
    while (deleted < count) {
      const limit = Math.min(DELETE_CHUNK, count - deleted);
      const res = await c.query(`DELETE FROM ${this.names.records} WHERE id IN (SELECT id FROM ${this.names.records} WHERE ${where} ORDER BY created_at_ms, id LIMIT ${limit})`, params);
      const n = res.rowCount ?? 0;
      if (n === 0) break;
      deleted += n;
    }
    return deleted;
  }

  /** This instance's records down to max_records once past it by 1 %. */
  async trimIfNeeded(): Promise<number> {
    const cap = this.options.maxRecords;
    if (cap <= 0 || this.records <= cap + Math.floor(cap / 100)) return 0;
    const c = await this.connect();
    // Recounted first: another instance's DELETE records may have emptied the table meanwhile.
    this.records = await this.countOwn(c);
    const n = this.records > cap ? await this.deleteOldest(c, "instance = $1", [this.options.instance], this.records - cap) : 0;
    this.records -= n;
    return n;
  }

  /** Retention (every instance's records) and the cap (this instance's); returns how many were deleted. */
  async cleanup(nowMs: number): Promise<number> {
    const c = await this.connect();
    let deleted = await this.deleteOldest(c, "created_at_ms < $1", [nowMs - this.options.retentionMs], Number.MAX_SAFE_INTEGER);
    this.records = await this.countOwn(c);
    const cap = this.options.maxRecords;
    if (cap > 0 && this.records > cap) {
      const n = await this.deleteOldest(c, "instance = $1", [this.options.instance], this.records - cap);
      this.records -= n;
      deleted += n;
    }
    return deleted;
  }

  async close(): Promise<void> {
    const c = this.client;
    this.client = null;
    await c?.end().catch(() => undefined);
  }
}
