// The `query_recorder` executor. On the DNS thread it turns on execution-path recording, runs the
// rest of the sequence, and appends a compact record to the current batch (batch.ts): no JSON, no
// SQL, no message per query. A full batch, or the actor's flush tick, hands the batch to the
// writer thread (transferred, not copied). At most `queue_size` records wait between capture and
// commit; past that a record is dropped and counted, never waited for. Reads for the API go to
// reader processes. The `recorder:<tag>` actor (control.ts) starts, flushes and restarts the writer;
// this class keeps the current one as the plain reference the DNS thread hands batches to.

import { mkdirSync } from "node:fs";
import { dirname } from "node:path";
import { encodeMessage } from "../../../dns/message.js";
import type { DnsContext } from "../../../engine/context.js";
import { isPromise, runNext, type Continuation, type StepResult } from "../../../engine/types.js";
import type { Logger } from "../../../observability/logger.js";
import type { MetricsHub } from "../../../observability/metrics.js";
import type { EventSink } from "../../../registry/control.js";
import type { ExecutorPlugin } from "../../../registry/types.js";
import { BatchBuilder, ClientTable, NO_CLIENT, StringTable } from "./batch.js";
import type { ReadRequest } from "./filters.js";
import type { PgOptions } from "./pg-schema.js";
import { recorderMetrics, type RecorderMetrics } from "./metrics.js";
import type { WriterData, WriterRequest } from "./protocol.js";
import { ReaderPool } from "./readers.js";
import type { ReaderLoad } from "../../../../machines/recorder.machine.js";
import { RecordStreams } from "./stream.js";
import type { Progress } from "./progress.js";
import { WriterLink } from "./writer-link.js";
import { batchFrom, PrimaryLink, RECORDS_ACK, RECORDS_MESSAGE, type BatchRequest } from "./primary-link.js";
import type { ProcessRole, Reply } from "../../../registry/process-role.js";

export interface RecorderOptions {
  tag: string;
  /** This Sluice's instance name, written on every record. */
  instance: string;
  /** Absolute path of the SQLite file, or null (PostgreSQL only). */
  path: string | null;
  /** The PostgreSQL store (the routes read it when given), or null. */
  postgres: PgOptions | null;
  queueSize: number;
  batchSize: number;
  flushIntervalMs: number;
  memoryTail: number;
  retentionMs: number;
  cleanupIntervalMs: number;
  /** 0: no cap. */
  maxRecords: number;
  /** A data-plane worker sends its batches to the primary's recorder, which writes them (primary-link.ts). */
  process: ProcessRole;
}

/** SQLite page cache of the writer and of each reader, MiB. */
const WRITER_CACHE_MB = 16;
const READER_CACHE_MB = 32;

/** Database files in use, so two recorders never share one (a reload's successor with the same tag may). */
const openPaths = new Map<string, { tag: string; users: number }>();

const NO_ERROR = Symbol("no error");

function errorText(err: unknown): string {
  return err instanceof Error ? err.message : typeof err === "string" ? err : String(err);
}

export class QueryRecorder implements ExecutorPlugin {
  readonly continuation = true;
  private readonly strings = new StringTable();
  /** Client names and group sets of the records (batch.ts). */
  private readonly clients = new ClientTable();
  private batch: BatchBuilder;
  /** Records captured (or reserved by a query in flight) and not yet committed or lost. */
  private queued = 0;
  /** Batches waiting for a writer (none is running). */
  private held: { data: ArrayBuffer; count: number; ips: string[] }[] = [];
  /** The workers' batches waiting for a writer (the primary of several processes). */
  private heldRemote: BatchRequest[] = [];
  /** Unix ms minus monotonic ms, refreshed with each batch: a query's arrival time needs no clock read of its own. */
  private clockOffset = Date.now() - performance.now();
  /** Arrival time of the last record captured (ms since the epoch). */
  private lastAtMs = 0;
  private writer: WriterLink | PrimaryLink | null = null;
  /** What of the current writer's shared totals (progress.ts) `queued` and the metrics already hold. */
  private tally: { link: WriterLink; queue: number; applied: Progress } | null = null;
  private readonly stopRefresh: () => void;
  /** The primary of several processes: takes the workers' batches for its writer. */
  private readonly unlistenWorkers: (() => void) | null = null;
  /** Interned tags, client names and group sets the current writer has been sent. */
  private stringsSent = 0;
  private clientNamesSent = 0;
  private groupSetsSent = 0;
  private readonly readers: ReaderPool;
  readonly streams: RecordStreams;
  private readonly metrics: RecorderMetrics;
  private pathClaimed = false;
  private destroyed = false;
  private closing: Promise<void> | null = null;

  constructor(
    readonly options: RecorderOptions,
    metrics: MetricsHub,
    private readonly log: Logger,
  ) {
    this.batch = new BatchBuilder(this.batchBytes());
    this.metrics = recorderMetrics(metrics, options.tag);
    this.stopRefresh = metrics.beforeCollect(() => this.catchUp());
    this.readers = new ReaderPool({ role: "query-recorder-reader", path: options.path, postgres: options.postgres, cacheMb: READER_CACHE_MB });
    this.streams = new RecordStreams((m) => this.writer?.post(m));
    const role = options.process;
    if (role.kind === "primary") this.unlistenWorkers = role.channel.listen(RECORDS_MESSAGE, options.tag, (m, reply) => this.fromWorker(m.batch, m.ackKey, reply));
  }

  private batchBytes(): number {
    return Math.min(1 << 20, Math.max(4096, this.options.batchSize * 256));
  }

  // ---- DNS thread ------------------------------------------------------------------------------

  execute(ctx: DnsContext, next: Continuation | null): StepResult {
    // The count of records waiting is refreshed from the writer's totals when it looks full (one read).
    if (this.queued >= this.options.queueSize) this.catchUpQueue();
    if (this.queued >= this.options.queueSize || this.destroyed) {
      this.metrics.dropped.value++;
      return runNext(ctx, next);
    }
    // Reserved now, so queries still in flight cannot overfill the queue.
    this.queued++;
    const outer = ctx.path;
    const from = outer === null ? 0 : outer.length;
    if (outer === null) ctx.path = [];
    const query = ctx.queryWire ?? encodeMessage(ctx.query);
    let res: StepResult;
    try {
      res = runNext(ctx, next);
    } catch (err) {
      this.capture(ctx, query, from, outer, err);
      throw err;
    }
    if (isPromise(res)) {
      return res.then(
        (step) => {
          this.capture(ctx, query, from, outer, NO_ERROR);
          return step;
        },
        (err: unknown) => {
          this.capture(ctx, query, from, outer, err);
          throw err;
        },
      );
    }
    this.capture(ctx, query, from, outer, NO_ERROR);
    return res;
  }

  /** Times are from the query's arrival (the server's clock read), to the end of the rest of the sequence. */
  private capture(ctx: DnsContext, query: Buffer, from: number, outer: DnsContext["path"], err: unknown): void {
    const started = ctx.startedAt;
    const elapsedUs = Math.round((performance.now() - started) * 1000);
    let error = err === NO_ERROR ? null : errorText(err);
    let response: Buffer | null = null;
    // As the reference engine does: after an error the response fields stay empty (the server answers SERVFAIL).
    if (error === null && ctx.response !== null) {
      try {
        response = ctx.response.toWire();
      } catch (e) {
        error = `response could not be encoded: ${errorText(e)}`;
      }
    }
    const path = ctx.path;
    // Recording ends with this recorder unless an outer consumer had turned it on.
    if (outer === null) ctx.path = null;
    if (this.destroyed) {
      this.queued--;
      this.metrics.dropped.value++;
      return;
    }
    // The wall-clock offset is read again at each flush and may move back by a millisecond or so (the
    // clock is slewed): a record is never older than the one before it, so newest-first stays arrival order.
    const at = Math.max(started + this.clockOffset, this.lastAtMs);
    this.lastAtMs = at;
    const client = ctx.client;
    this.batch.append(at, elapsedUs, query, response, ctx.clientIp, client === null ? NO_CLIENT : this.clients.of(client), error, path, from, this.strings);
    if (this.batch.count >= this.options.batchSize) this.flush();
  }

  /** Hands the current batch to the writer (or holds it while there is none): a full batch, the actor's flush tick, a clear. */
  flush(): void {
    this.clockOffset = Date.now() - performance.now();
    this.catchUp();
    const count = this.batch.count;
    if (count === 0) return;
    const ips = this.batch.ips;
    const data = this.batch.take();
    this.batch = new BatchBuilder(this.batchBytes());
    if (this.writer === null || this.writer.gone) {
      this.held.push({ data, count, ips });
      return;
    }
    this.send(data, count, ips);
  }

  private send(data: ArrayBuffer, count: number, ips: string[]): void {
    const writer = this.writer as WriterLink | PrimaryLink;
    // To the primary, every batch carries the whole tables (see primary-link.ts).
    if (writer instanceof PrimaryLink) {
      this.stringsSent = 0;
      this.clientNamesSent = 0;
      this.groupSetsSent = 0;
    }
    const list = this.strings.list;
    const names = this.clients.names.list;
    const sets = this.clients.sets;
    const m: WriterRequest = {
      t: "batch",
      stringsFrom: this.stringsSent,
      strings: list.slice(this.stringsSent),
      clientNamesFrom: this.clientNamesSent,
      clientNames: names.slice(this.clientNamesSent),
      groupSetsFrom: this.groupSetsSent,
      groupSets: sets.slice(this.groupSetsSent),
      ips,
      data,
      count,
    };
    this.stringsSent = list.length;
    this.clientNamesSent = names.length;
    this.groupSetsSent = sets.length;
    if (writer instanceof PrimaryLink) {
      if (!writer.post(m)) this.lose(count);
    } else writer.post(m, [data]);
    this.metrics.queue.value = this.queued;
  }

  /** Takes the records the writer has finished off `queued` (a read of one shared number). */
  private catchUpQueue(): void {
    const t = this.tally;
    if (t === null) return;
    const answered = t.link.progress.answered();
    this.queued -= answered - t.queue;
    t.queue = answered;
  }

  /** Applies what the writer has committed since the last look: `queued` and the metrics. */
  private catchUp(): void {
    const t = this.tally;
    if (t === null) return;
    this.catchUpQueue();
    const p = t.link.progress.read();
    const a = t.applied;
    const lost = p.lost - a.lost;
    this.metrics.written.value += p.answered - a.answered - lost;
    this.metrics.dropped.value += lost;
    const b = this.metrics.batch;
    for (let i = 0; i < b.counts.length; i++) b.counts[i] += p.commitCounts[i] - a.commitCounts[i];
    b.sum += p.commitSeconds - a.commitSeconds;
    b.count += p.commits - a.commits;
    this.metrics.records.value = p.records;
    if (p.dbBytes !== null) this.metrics.dbBytes.value = p.dbBytes;
    this.metrics.queue.value = this.queued;
    t.applied = p;
  }

  private lose(count: number): void {
    this.queued -= count;
    this.metrics.dropped.value += count;
  }

  /**
   * A worker's batch (the primary of several processes): to the writer when it runs and the queue has
   * room, else dropped and counted here; either way the worker hears it, and stops counting it.
   */
  private fromWorker(value: unknown, ackKey: unknown, reply: Reply): void {
    const batch = batchFrom(value);
    if (batch === null || typeof ackKey !== "string") return;
    const count = batch.count;
    let lost = 0;
    if (this.queued + count > this.options.queueSize) this.catchUpQueue();
    if (this.destroyed || this.queued + count > this.options.queueSize) {
      lost = count;
      this.metrics.dropped.value += count;
    } else {
      this.queued += count;
      // While no writer runs (this recorder starting, a restart), the batch waits like this process's own.
      if (this.writer === null || this.writer.gone || this.writer instanceof PrimaryLink) this.heldRemote.push(batch);
      else this.toWriter(this.writer, batch);
      this.metrics.queue.value = this.queued;
    }
    reply({ t: RECORDS_ACK, key: ackKey, count, lost });
  }

  private toWriter(writer: WriterLink, batch: BatchRequest): void {
    // The writer's tables are now the worker's: this recorder's own next batch sends its whole tables.
    this.stringsSent = 0;
    this.clientNamesSent = 0;
    this.groupSetsSent = 0;
    writer.post(batch, [batch.data]);
  }

  // ---- writer lifecycle (driven by the recorder:<tag> actor) ------------------------------------

  private writerData(): WriterData {
    const o = this.options;
    const common = { instance: o.instance, maxRecords: o.maxRecords, retentionMs: o.retentionMs };
    return {
      role: "query-recorder-writer",
      sqlite: o.path === null ? null : { ...common, path: o.path, memoryTail: o.memoryTail, cacheMb: WRITER_CACHE_MB },
      postgres: o.postgres === null ? null : { ...common, pg: o.postgres },
      memoryTail: o.memoryTail,
    };
  }

  /**
   * Starts a writer thread; resolves once its stores are open (PostgreSQL may still be unreachable),
   * rejects when they cannot be. `exited` is told if it then ends other than by closeWriter.
   */
  async startWriter(exited: (error: Error | null) => void): Promise<void> {
    const role = this.options.process;
    if (role.kind === "worker") {
      // The primary's recorder writes; its answer ends the batch's place in this worker's queue.
      this.writer = new PrimaryLink(role.channel, this.options.tag, (ack) => {
        this.queued -= ack.count;
        this.metrics.queue.value = this.queued;
      });
      for (const b of this.held.splice(0)) this.send(b.data, b.count, b.ips);
      return;
    }
    const link = new WriterLink(
      this.writerData(),
      {
        records: (n) => (this.metrics.records.value = n),
        replay: (m) => this.streams.replayed(m.client, m.frames),
        frames: (m) => this.streams.committed(m.frames),
        log: (m) => this.log[m.level](m.err ? { err: m.err } : {}, m.msg),
        exit: (error) => {
          if (this.writer !== link) return;
          this.writerGone();
          this.log.warn({ err: error?.message }, "query recorder writer stopped");
          exited(error);
        },
      },
    );
    const { records, dbBytes } = await link.ready;
    if (this.destroyed) {
      await link.close();
      return;
    }
    this.metrics.records.value = records;
    this.metrics.dbBytes.value = dbBytes;
    this.writer = link;
    this.tally = { link, queue: 0, applied: link.progress.read() };
    this.stringsSent = 0;
    this.clientNamesSent = 0;
    this.groupSetsSent = 0;
    for (const b of this.held.splice(0)) this.send(b.data, b.count, b.ips);
    for (const b of this.heldRemote.splice(0)) this.toWriter(link, b);
    this.streams.writerStarted();
  }

  /** The records the writer held are lost; those captured meanwhile wait for the next writer. */
  private writerGone(): void {
    // Its last transactions count: its totals outlive it.
    this.catchUp();
    this.tally = null;
    this.writer = null;
    const held = [...this.held, ...this.heldRemote].reduce((n, b) => n + b.count, 0);
    const lost = this.queued - held - this.batch.count;
    if (lost > 0) {
      this.queued -= lost;
      this.metrics.dropped.value += lost;
    }
  }

  /** Commits what was captured and lets the writer end (the plugin goes, or the actor stops). */
  closeWriter(): Promise<void> {
    const link = this.writer;
    if (link !== null) {
      this.flush();
      this.writer = null;
      const done = link.close().then(() => {
        // What it committed while closing; then it is done with.
        this.catchUp();
        if (this.tally?.link === link) this.tally = null;
      });
      this.closing = (this.closing ?? Promise.resolve()).then(() => done);
    }
    return this.closing ?? Promise.resolve();
  }

  // ---- operations and reads (the API) -----------------------------------------------------------

  /** Commits what is queued, then deletes every record of the current generation and the replay tail. */
  async clear(): Promise<number> {
    this.flush();
    if (this.writer === null) throw new Error("the recorder's writer is not running");
    return this.writer.request({ t: "clear" });
  }

  /** Retention, the max_records cap and housekeeping, in the writer. */
  async cleanup(): Promise<number> {
    this.flush();
    if (this.writer === null) throw new Error("the recorder's writer is not running");
    return this.writer.request({ t: "cleanup", now: Date.now() });
  }

  /** The reader processes' queue, the cell the actor's read admission (recorderReadersFree) reads. */
  get readerLoad(): ReaderLoad {
    return this.readers.load;
  }

  /** The response body of a records or stats route, as JSON text (admitted by the actor first: RECORDS.READ). */
  read(request: ReadRequest): Promise<string> {
    return this.readers.read(request);
  }

  /** A stream client: the newest `tail` records (or those after Last-Event-ID), then each new one. */
  openStream(sink: EventSink, tail: number, lastEventId: string | null): () => void {
    return this.streams.open(sink, Math.min(tail, this.options.memoryTail), lastEventId);
  }

  // ---- lifecycle -------------------------------------------------------------------------------

  async init(): Promise<void> {
    const path = this.options.path;
    if (path !== null) {
      const user = openPaths.get(path);
      if (user && user.tag !== this.options.tag) throw new Error(`${path} is already the database of query_recorder '${user.tag}'; give each recorder its own file`);
      openPaths.set(path, { tag: this.options.tag, users: (user?.users ?? 0) + 1 });
      this.pathClaimed = true;
      mkdirSync(dirname(path), { recursive: true });
    }
    // The writer is the actor's start-up (control.ts): the plugin is ready once its database is open.
  }

  async destroy(): Promise<void> {
    this.unlistenWorkers?.();
    this.streams.endAll();
    // Nothing is captured from here on; what was captured is committed before the thread ends. The
    // actor outlives destroy (it stops after it), so the final commit is awaited here, not at its stop.
    this.destroyed = true;
    await this.closeWriter();
    this.stopRefresh();
    await this.readers.close();
    if (this.pathClaimed && this.options.path !== null) {
      const user = openPaths.get(this.options.path);
      if (user && user.users > 1) user.users--;
      else openPaths.delete(this.options.path);
      this.pathClaimed = false;
    }
  }
}
