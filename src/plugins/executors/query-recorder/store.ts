// The writer's side of the database: inserts batches (one transaction for all that are waiting),
// keeps the rollups in step, trims to max_records and applies retention oldest first, clears, and
// holds the newest committed records (memory_tail) for the stream's replay. Runs in the writer
// worker only.

import Database from "better-sqlite3";
import { decodeMessage, type Question } from "../../../dns/message.js";
import { decodeQuery } from "../../../dns/query.js";
import { scanMessage } from "../../../dns/view.js";
import type { BatchRecord } from "./batch.js";
import { Dictionary, GroupSets } from "./dictionary.js";
import type { RawRecord, RawStep } from "./json.js";
import { rawRecord, RECORD_SELECT, type RecordRow } from "./records.js";
import { RollupMaintainer } from "./rollups.js";
import { CLEARED_TABLES, configureWriter, migrate, OUTCOME_ERROR, OUTCOME_NO_RESPONSE, repairRollups } from "./schema.js";

export interface StoreOptions {
  path: string;
  /** Written on every record (`instance` column). */
  instance: string;
  memoryTail: number;
  /** 0: no cap. */
  maxRecords: number;
  retentionMs: number;
  cacheMb: number;
}

/** A committed record with its path, as held for replay. */
export interface TailEntry {
  record: RawRecord;
  steps: RawStep[];
}

/** Records deleted per transaction by trims and retention: each chunk is a short write lock. */
const DELETE_CHUNK = 10_000;

export function questionsOf(query: Buffer): Question[] {
  try {
    return decodeQuery(query).message.questions;
  } catch {
    try {
      return decodeMessage(query).questions;
    } catch {
      return [];
    }
  }
}

/** Lower-case, absolute (trailing dot), as the records show names. */
export const storedName = (name: string): string => (name === "" ? "." : `${name.toLowerCase()}.`);

export function outcomeOf(response: Buffer | null, error: string | null): number {
  if (error !== null) return OUTCOME_ERROR;
  if (response === null) return OUTCOME_NO_RESPONSE;
  const low = response.length >= 4 ? response[3] & 0x0f : 0;
  try {
    const opt = scanMessage(response);
    return opt < 0 ? low : (response[opt + 4] << 4) | low;
  } catch {
    return low;
  }
}

/** Newest committed records, oldest first, at most `capacity`. */
class Tail {
  private items: (TailEntry | undefined)[];
  private next = 0;
  size = 0;

  constructor(readonly capacity: number) {
    this.items = new Array<TailEntry | undefined>(capacity);
  }

  push(e: TailEntry): void {
    this.items[this.next] = e;
    this.next = (this.next + 1) % this.capacity;
    if (this.size < this.capacity) this.size++;
  }

  /** The newest `n`, oldest first. */
  last(n: number): TailEntry[] {
    const k = Math.min(n, this.size);
    const out: TailEntry[] = [];
    for (let i = k; i > 0; i--) out.push(this.items[(this.next - i + this.capacity) % this.capacity] as TailEntry);
    return out;
  }

  clear(): void {
    this.items = new Array<TailEntry | undefined>(this.capacity);
    this.next = 0;
    this.size = 0;
  }
}

export class RecorderStore {
  readonly db: Database.Database;
  readonly tail: Tail;
  /** Rows in records_v2 (kept by counting, not by querying). */
  records = 0;
  private readonly names: Dictionary;
  private readonly clients: Dictionary;
  private readonly tags: Dictionary;
  private readonly clientNames: Dictionary;
  private readonly groupSets: GroupSets;
  private readonly rollups: RollupMaintainer;
  private readonly insRecord: Database.Statement<unknown[]>;
  private readonly insQuestion: Database.Statement<unknown[]>;
  private readonly insStep: Database.Statement<unknown[]>;
  private readonly writeBatch: Database.Transaction<(batch: BatchRecord[]) => { first: number; outcomes: number[] }>;

  get path(): string {
    return this.options.path;
  }

  constructor(private readonly options: StoreOptions) {
    this.db = new Database(options.path);
    configureWriter(this.db, options.cacheMb);
    migrate(this.db, options.instance);
    repairRollups(this.db);
    this.db.exec("CREATE TEMP TABLE IF NOT EXISTS gone (id INTEGER PRIMARY KEY, created_at_ms INTEGER NOT NULL)");
    this.names = new Dictionary(this.db, "names_v2", "name");
    this.clients = new Dictionary(this.db, "clients_v2", "ip");
    this.tags = new Dictionary(this.db, "tags_v2", "tag");
    this.clientNames = new Dictionary(this.db, "client_names_v2", "name");
    this.groupSets = new GroupSets(this.db);
    this.rollups = new RollupMaintainer(this.db);
    this.insRecord = this.db.prepare(
      "INSERT INTO records_v2 (created_at_ms, elapsed_us, client_id, name_id, qtype, question_count, outcome, error, query, response, instance, client_name_id, group_set_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
    );
    this.insQuestion = this.db.prepare("INSERT INTO questions_v2 (record_id, question_index, name_id, qtype, qclass) VALUES (?, ?, ?, ?, ?)");
    this.insStep = this.db.prepare("INSERT INTO steps_v2 (record_id, event_index, sequence_tag, node_index, kind, tag, outcome) VALUES (?, ?, ?, ?, ?, ?, ?)");
    this.writeBatch = this.db.transaction((batch: BatchRecord[]) => this.insertAll(batch));
    this.records = Number(this.db.prepare("SELECT count(*) FROM records_v2").pluck().get());
    this.tail = new Tail(options.memoryTail);
    this.loadTail();
  }

  /** Inserts records in one transaction; returns the ids given and the entries for the tail. */
  insert(batch: BatchRecord[]): TailEntry[] {
    if (batch.length === 0) return [];
    // BEGIN IMMEDIATE: the write lock is taken first, so a writer still finishing (the old generation's,
    // across a reload) makes this one wait busy_timeout; a deferred transaction that read first gets SQLITE_BUSY at once.
    const { first, outcomes } = this.writeBatch.immediate(batch);
    this.records += batch.length;
    const entries = batch.map((r, i): TailEntry => ({
      record: {
        id: first + i,
        createdAtMs: Math.round(r.createdAtMs),
        elapsedUs: r.elapsedUs,
        clientIp: r.clientIp,
        clientName: r.clientName,
        clientGroups: r.clientGroups,
        instance: this.options.instance,
        outcome: outcomes[i],
        error: r.error,
        query: r.query,
        response: outcomes[i] >= 0 ? r.response : null,
      },
      steps: r.steps,
    }));
    for (const e of entries.length > this.tail.capacity ? entries.slice(-this.tail.capacity) : entries) this.tail.push(e);
    return entries;
  }

  private insertAll(batch: BatchRecord[]): { first: number; outcomes: number[] } {
    let first = 0;
    let last = 0;
    const outcomes: number[] = [];
    for (const r of batch) {
      const questions = questionsOf(r.query);
      const q0 = questions[0];
      const nameId = this.names.id(q0 ? storedName(q0.name) : "");
      const outcome = outcomeOf(r.response, r.error);
      outcomes.push(outcome);
      const clientNameId = r.clientName === null ? null : this.clientNames.id(r.clientName);
      const id = Number(
        this.insRecord.run(
          Math.round(r.createdAtMs),
          r.elapsedUs,
          this.clients.id(r.clientIp),
          nameId,
          q0 ? q0.type : 0,
          questions.length,
          outcome,
          r.error,
          r.query,
          outcome >= 0 ? r.response : null,
          this.options.instance,
          clientNameId,
          this.groupSets.id(r.clientGroups),
        ).lastInsertRowid,
      );
      if (first === 0) first = id;
      last = id;
      questions.forEach((q, i) => this.insQuestion.run(id, i, i === 0 ? nameId : this.names.id(storedName(q.name)), q.type, q.class));
      r.steps.forEach((s, i) => this.insStep.run(id, i, this.tags.id(s.sequenceTag), s.nodeIndex, s.kind, this.tags.id(s.tag), s.outcome));
    }
    // One writer, one transaction: the ids of this batch are consecutive.
    this.rollups.added(first, last);
    return { first, outcomes };
  }

  /** Deletes every record of the current generation; returns how many there were. */
  clear(): number {
    const n = Number(this.db.prepare("SELECT count(*) FROM records_v2").pluck().get());
    this.db.transaction(() => {
      for (const t of CLEARED_TABLES) this.db.exec(`DELETE FROM ${t}`);
    }).immediate();
    this.resetDictionaries();
    this.records = 0;
    this.tail.clear();
    this.vacuum();
    return n;
  }

  /** Deletes up to `count` of the oldest records (only those older than `cutoffMs` when given), DELETE_CHUNK per transaction. */
  private deleteOldest(cutoffMs: number | null, count: number): number {
    const select = this.db.prepare(
      `INSERT INTO temp.gone (id, created_at_ms) SELECT id, created_at_ms FROM records_v2 INDEXED BY records_v2_time ${cutoffMs === null ? "" : "WHERE created_at_ms < ?"} ORDER BY created_at_ms, id LIMIT ?`,
    );
    const chunk = this.db.transaction((limit: number): number => {
      const n = (cutoffMs === null ? select.run(limit) : select.run(cutoffMs, limit)).changes;
      if (n === 0) return 0;
      const through = Number(this.db.prepare("SELECT max(created_at_ms) FROM temp.gone").pluck().get());
      for (const t of ["steps_v2", "questions_v2"]) this.db.exec(`DELETE FROM ${t} WHERE record_id IN (SELECT id FROM temp.gone)`);
      this.db.exec("DELETE FROM records_v2 WHERE id IN (SELECT id FROM temp.gone)");
      this.db.exec("DELETE FROM temp.gone");
      this.rollups.deletedThrough(through);
      return n;
    });
    let deleted = 0;
    while (deleted < count) {
      const n = chunk.immediate(Math.min(DELETE_CHUNK, count - deleted));
      if (n === 0) break;
      deleted += n;
      this.records -= n;
    }
    return deleted;
  }

  /** Keeps at most max_records: once the table is past the cap by 1 % of it, the oldest go down to the cap. */
  trimIfNeeded(): number {
    const cap = this.options.maxRecords;
    if (cap <= 0 || this.records <= cap + Math.floor(cap / 100)) return 0;
    return this.deleteOldest(null, this.records - cap);
  }

  /** Retention, the cap, and housekeeping; returns how many records were deleted. */
  cleanup(nowMs: number): number {
    const deleted = this.deleteOldest(nowMs - this.options.retentionMs, Number.MAX_SAFE_INTEGER) + (this.options.maxRecords > 0 && this.records > this.options.maxRecords ? this.deleteOldest(null, this.records - this.options.maxRecords) : 0);
    if (deleted > 0) {
      // Names and addresses no record uses any more.
      this.db.exec("DELETE FROM names_v2 WHERE id NOT IN (SELECT name_id FROM records_v2) AND id NOT IN (SELECT name_id FROM questions_v2)");
      this.db.exec("DELETE FROM clients_v2 WHERE id NOT IN (SELECT client_id FROM records_v2)");
      this.db.exec("DELETE FROM client_names_v2 WHERE id NOT IN (SELECT client_name_id FROM records_v2 WHERE client_name_id IS NOT NULL)");
      this.db.exec("DELETE FROM group_sets_v2 WHERE id NOT IN (SELECT group_set_id FROM records_v2 WHERE group_set_id IS NOT NULL)");
      this.db.exec("DELETE FROM group_members_v2 WHERE set_id NOT IN (SELECT id FROM group_sets_v2)");
      this.resetDictionaries();
      this.vacuum();
    }
    this.db.pragma("optimize");
    return deleted;
  }

  private resetDictionaries(): void {
    this.names.reset();
    this.clients.reset();
    this.clientNames.reset();
    this.groupSets.reset();
  }

  private vacuum(): void {
    this.db.pragma("wal_checkpoint(PASSIVE)");
    this.db.pragma("incremental_vacuum");
  }

  /** The newest records at start, so a stream's replay survives a restart or a reload. */
  private loadTail(): void {
    const rows = this.db.prepare(`${RECORD_SELECT} ORDER BY r.id DESC LIMIT ?`).raw().all(this.tail.capacity) as RecordRow[];
    const steps = this.db.prepare("SELECT s.node_index, s.kind, s.outcome, a.tag, b.tag FROM steps_v2 s JOIN tags_v2 a ON a.id = s.sequence_tag JOIN tags_v2 b ON b.id = s.tag WHERE s.record_id = ? ORDER BY s.event_index").raw();
    for (const row of rows.reverse()) {
      const record = rawRecord(row);
      const path = (steps.all(record.id) as [number | null, number, number, string, string][]).map(([nodeIndex, kind, out, sequenceTag, tag]) => ({ nodeIndex, kind, outcome: out, sequenceTag, tag }));
      this.tail.push({ record, steps: path });
    }
  }

  close(): void {
    try {
      this.db.pragma("wal_checkpoint(TRUNCATE)");
    } finally {
      this.db.close();
    }
  }
}
