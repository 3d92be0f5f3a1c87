// The writer's side of the PostgreSQL store: one connection, opened (and reopened after a failure)
// on demand. A batch is one transaction: it first takes an advisory lock shared by every instance
// writing the store, so ids are committed in increasing order across instances (the stream reads
// "ids after the last one seen" and must not skip a late commit), then streams the rows with
// `COPY … FROM STDIN` (pg-copy.ts: text format; per row about 0.6 × the CPU, the writer's and the
// server's together, of the multi-row INSERTs it replaced), and ends with a NOTIFY the stream side
// listens for. The connection listens too, so the writer always knows the newest id committed by any
// instance (where a stream opened while the store takes no new connections starts). Retention
// applies to every instance's records, max_records to this instance's own; both delete in chunks.
// Runs in the writer worker only.

import { randomUUID } from "node:crypto";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import pg from "pg";
import { from as copyFrom } from "pg-copy-streams";
import type { BatchRecord } from "./batch.js";
import { COPY_COLUMNS, CopyEncoder } from "./pg-copy.js";
import { pgClient, pgMigrate, pgNames, pgText, type PgOptions } from "./pg-schema.js";

/** Records deleted per statement by trims and retention. */
const DELETE_CHUNK = 10_000;
/** A DO block running `body` (PL/pgSQL): a statement that returns no rows, which a COPY's query may hold. */
function doBlock(body: string): string {
  let tag = "$sluice$";
  for (let n = 0; body.includes(tag); n++) tag = `$sluice${n}$`;
  return `DO ${tag}BEGIN ${body}; END${tag}`;
}

/**
 * A batch is one query of several statements, so one round trip (on a busy host each one waits for the
 * server to be scheduled: 2–5 ms apiece, half of a small batch's time, were five): the transaction, the lock, the COPY,
 * the NOTIFY and the commit. Around a COPY only statements without rows fit (the COPY stream is the
 * query), hence the lock and the NOTIFY in DO blocks. COPY returns no ids, but the identity's sequence
 * was advanced by this session alone, row after row, so its currval is the batch's last id; the NOTIFY
 * carries it, with `writer` telling this connection its own. Literals, not parameters: a query of
 * several statements takes none.
 */
function batchSql(o: { lock: string; table: string; channel: string; instance: string; writer: string }): string {
  const payload = `json_build_object('instance', ${pg.escapeLiteral(pgText(o.instance))}::text, 'id', currval(pg_get_serial_sequence(${pg.escapeLiteral(o.table)}, 'id')), 'writer', ${pg.escapeLiteral(o.writer)}::text)::text`;
  return [
    "BEGIN",
    doBlock(`PERFORM pg_advisory_xact_lock(hashtext(${pg.escapeLiteral(o.lock)}))`),
    `COPY ${o.table} (${COPY_COLUMNS.join(", ")}) FROM STDIN`,
    doBlock(`PERFORM pg_notify(${pg.escapeLiteral(o.channel)}, ${payload})`),
    "COMMIT",
  ].join("; ");
}

/** The id in a writer's NOTIFY payload (`{"instance": …, "id": n, "writer": …}`, no writer before COPY) and its writer, or NaN. */
function notified(payload: string | undefined): { id: number; writer: unknown } {
  try {
    const p = JSON.parse(payload ?? "") as { id?: unknown; writer?: unknown };
    return { id: Number(p.id), writer: p.writer };
  } catch {
    return { id: Number.NaN, writer: null };
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
  /** The query of a batch (batchSql). */
  private readonly batchSql: string;
  private readonly lastIdSql: string;
  /** Tells this writer's NOTIFYs from others' (instance names may repeat). */
  private readonly writer = randomUUID();
  /** Bumped by each of this writer's NOTIFYs that comes back. */
  private ownNotifies = 0;
  private readonly encoder: CopyEncoder;
  /** This instance's rows (counted at connect and after deletions, kept by adding in between). */
  records = 0;
  /** Newest record id committed by any instance, as far as this connection has seen (read at connect, then its commits and every NOTIFY); null before the first connect. */
  newestId: number | null = null;

  constructor(private readonly options: PgStoreOptions) {
    this.names = pgNames(options.pg.schema);
    this.batchSql = batchSql({ lock: this.names.lock, table: this.names.records, channel: this.names.channel, instance: options.instance, writer: this.writer });
    this.lastIdSql = `SELECT currval(pg_get_serial_sequence(${pg.escapeLiteral(this.names.records)}, 'id')) AS id`;
    this.encoder = new CopyEncoder(options.instance);
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
      c.on("notification", (n) => {
        const { id, writer } = notified(n.payload);
        this.saw(id);
        if (writer === this.writer) this.ownNotifies++;
      });
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

  /** Writes `batch` (iterated once per attempt) in one transaction; throws (nothing written) on any failure. */
  async insert(batch: Iterable<BatchRecord>): Promise<void> {
    const rows = batch[Symbol.iterator]();
    const first = rows.next();
    if (first.done === true) return;
    const c = await this.connect();
    const notifies = this.ownNotifies;
    const encoded = { rows: 0 };
    try {
      // Rows are encoded chunk by chunk as the connection takes them; a failure on either side (or of any statement) rejects.
      await pipeline(Readable.from(this.encoder.chunks(first.value, rows, encoded), { objectMode: false }), c.query(copyFrom(this.batchSql)));
    } catch (err) {
      await c.query("ROLLBACK").catch(() => undefined);
      throw err;
    }
    this.records += encoded.rows;
    // PostgreSQL hands a session its own notifications before it says it is ready for the next query,
    // so the batch's NOTIFY has been seen; should one ever come later, currval (session state) tells.
    if (this.ownNotifies === notifies) this.saw(Number((await c.query<{ id: string }>(this.lastIdSql)).rows[0].id));
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
