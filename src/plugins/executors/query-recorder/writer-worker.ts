// The recorder's writer thread: owns the connections that write, to the SQLite file, to the
// PostgreSQL store, or to both. Batches that arrive while one is being written are written
// together, in one transaction per store; every other request (clear, cleanup, replay) is taken in
// arrival order, so "flush, then clear" needs nothing more than sending the last batch before the
// clear. While PostgreSQL cannot be reached, the batch in hand is retried with backoff and the rest
// wait here; the DNS thread counts them as queued, so past queue_size it drops (and counts) new
// records instead of waiting.

import { statSync } from "node:fs";
import { setPriority } from "node:os";
import { parentPort, workerData } from "node:worker_threads";
import { batchRecords, type BatchRecord, type ClientLists } from "./batch.js";
import { recordFrame } from "./json.js";
import { PgFeed } from "./pg-feed.js";
import { isConnectionError } from "./pg-schema.js";
import { PgRecorderStore } from "./pg-store.js";
import { idlePolicy, ownThreadId } from "./priority.js";
import { WriterProgress } from "./progress.js";
import { WRITER_NICE, type WriterReply, type WriterRequest, type WriterThreadData } from "./protocol.js";
import { RecorderStore } from "./store.js";

/** Most records written in one transaction when batches pile up (fewer while streaming: each commit is one message of frames). */
const MAX_COALESCED = 16_384;
const MAX_COALESCED_LIVE = 2048;
/** The database size is measured at most this often. */
const SIZE_EVERY_MS = 1000;
/** Errors after which the connection cannot be trusted: the thread ends and the recorder's actor starts a new one. */
const FATAL = /SQLITE_(CORRUPT|NOTADB|IOERR|CANTOPEN|READONLY)/;
/** Waits between attempts to reach PostgreSQL: doubling from the first to the last. */
const RETRY_FIRST_MS = 250;
const RETRY_MAX_MS = 5000;

type Batch = Extract<WriterRequest, { t: "batch" }>;

const data = workerData as WriterThreadData;
if (!parentPort || data?.role !== "query-recorder-writer") throw new Error("writer-worker.ts runs as the query recorder's worker thread");
const port = parentPort;
const progress = new WriterProgress(data.progress);

try {
  setPriority(WRITER_NICE);
} catch {
  // Not permitted or not supported here: the writer then competes with DNS at equal priority.
}
// Below that, where Linux allows it: DNS's thread takes the core from the writer as soon as it wakes.
const ownTid = ownThreadId();
const idleThread = ownTid !== null && idlePolicy(ownTid, false) ? ownTid : null;

const post = (m: WriterReply): void => port.postMessage(m);
const errorText = (err: unknown): string => (err instanceof Error ? err.message : String(err));
/** A store that cannot be opened ends the thread with the reason as its last log line (a thrown SqliteError crosses the thread boundary as its code alone). */
function opened<T>(open: () => T): T {
  try {
    return open();
  } catch (err) {
    post({ t: "log", level: "error", msg: "query recorder store could not be opened", err: errorText(err) });
    process.exit(1);
  }
}
const sqliteOptions = data.sqlite;
const pgOptions = data.postgres;
const sqlite = sqliteOptions ? opened(() => new RecorderStore(sqliteOptions)) : null;
const postgres = pgOptions ? opened(() => new PgRecorderStore(pgOptions)) : null;
/** With PostgreSQL the stream shows every instance's records, read back from the store, from the newest id the writer knows of. */
const feed = data.postgres
  ? new PgFeed(
      data.postgres.pg,
      data.memoryTail,
      () => postgres?.newestId ?? null,
      (frames) => post({ t: "frames", frames }),
      (client, frames) => post({ t: "replay", client, frames }),
    )
  : null;
const strings: string[] = [];
/** The DNS thread's ClientTable, as far as the batches so far have brought it. */
const clientNames: string[] = [];
const groupSets: (readonly string[])[] = [];
const queue: WriterRequest[] = [];
let draining = false;
let live = false;
let closing = false;
/** A close arrived: a batch that cannot reach PostgreSQL is given up instead of retried. */
let closeRequested = false;
let pgDown = false;
let sizeAt = 0;

function dbBytes(): number {
  if (!sqlite) return 0;
  let n = 0;
  for (const f of [sqlite.path, `${sqlite.path}-wal`]) {
    try {
      n += statSync(f).size;
    } catch {
      // No WAL file right after a TRUNCATE checkpoint.
    }
  }
  return n;
}

/** Rows of the store the routes read. */
const records = (): number => (postgres ? postgres.records : (sqlite?.records ?? 0));

function fatal(err: unknown): never {
  post({ t: "log", level: "error", msg: "query recorder database failed; the writer restarts", err: errorText(err) });
  try {
    sqlite?.db.close();
  } catch {
    // Already unusable.
  }
  process.exit(1);
}

/** Writes to SQLite; null when the transaction failed. */
function writeSqlite(store: RecorderStore, batch: BatchRecord[]): string[] | null {
  try {
    const entries = store.insert(batch);
    store.trimIfNeeded();
    return live && !feed ? entries.map((e) => recordFrame(e.record, e.steps)) : [];
  } catch (err) {
    if (FATAL.test(String((err as { code?: string }).code))) fatal(err);
    post({ t: "log", level: "warn", msg: "query recorder batch not written to SQLite", err: errorText(err) });
    return null;
  }
}

/** Clears and cleanups waiting behind a batch that cannot be written fail now rather than wait for PostgreSQL. */
function refuseWaiting(why: string): void {
  for (let i = queue.length - 1; i >= 0; i--) {
    const m = queue[i];
    if (m.t !== "clear" && m.t !== "cleanup") continue;
    queue.splice(i, 1);
    post({ t: "done", id: m.id, ok: false, message: `PostgreSQL cannot be reached: ${why}`, records: records() });
  }
}

/** Writes to PostgreSQL, retrying while it cannot be reached; false when the batch is given up. */
async function writePostgres(store: PgRecorderStore, batch: Iterable<BatchRecord>): Promise<boolean> {
  for (let wait = RETRY_FIRST_MS; ; wait = Math.min(wait * 2, RETRY_MAX_MS)) {
    try {
      await store.insert(batch);
      if (pgDown) post({ t: "log", level: "info", msg: "PostgreSQL query store reachable again", err: "" });
      pgDown = false;
      break;
    } catch (err) {
      store.reset();
      if (!isConnectionError(err) || closeRequested) {
        post({ t: "log", level: "warn", msg: "query recorder batch not written to PostgreSQL; its records are lost", err: errorText(err) });
        return false;
      }
      if (!pgDown) post({ t: "log", level: "warn", msg: "PostgreSQL query store unreachable; records wait (up to queue_size) while the writer retries", err: errorText(err) });
      pgDown = true;
      refuseWaiting(errorText(err));
      await new Promise((r) => setTimeout(r, wait));
    }
  }
  try {
    await store.trimIfNeeded();
  } catch (err) {
    post({ t: "log", level: "warn", msg: "query recorder trim failed; it is tried again after the next batch", err: errorText(err) });
  }
  return true;
}

async function writeBatches(batches: Batch[]): Promise<void> {
  const started = performance.now();
  const parts: { batch: Batch; strings: readonly string[]; clients: ClientLists }[] = [];
  let count = 0;
  for (const b of batches) {
    // Interned tags, client names and group sets arrive with the batch that first uses them.
    strings.length = b.stringsFrom;
    strings.push(...b.strings);
    clientNames.length = b.clientNamesFrom;
    clientNames.push(...b.clientNames);
    groupSets.length = b.groupSetsFrom;
    groupSets.push(...b.groupSets);
    count += b.count;
    // The tables as this batch knows them (a few tags and names): decoded later, it must not see a later batch's.
    parts.push({ batch: b, strings: strings.slice(), clients: { names: clientNames.slice(), sets: groupSets.slice() } });
  }
  // Decoded as they are written: PostgreSQL parses the first rows while the rest are decoded (again on a retry).
  const rows: Iterable<BatchRecord> = {
    *[Symbol.iterator]() {
      for (const p of parts) yield* batchRecords(p.batch.data, p.batch.count, p.strings, p.batch.ips, p.clients);
    },
  };
  const decoded = sqlite ? [...rows] : null;
  const frames = sqlite && decoded ? writeSqlite(sqlite, decoded) : [];
  // The store the routes read decides whether the records count as written.
  const written = postgres ? await writePostgres(postgres, decoded ?? rows) : frames !== null;
  const now = Date.now();
  const size = sqlite && now - sizeAt >= SIZE_EVERY_MS ? dbBytes() : null;
  if (size !== null) sizeAt = now;
  // Totals in shared memory, not a message per commit (progress.ts says why); frames only while someone streams.
  progress.committed(count, written ? 0 : count, (performance.now() - started) / 1000, records(), size);
  if (frames !== null && frames.length > 0) post({ t: "frames", frames });
}

/** clear and cleanup: both stores; the answer is the count of the store the routes read. */
async function answer(id: number, onSqlite: (s: RecorderStore) => number, onPostgres: (s: PgRecorderStore) => Promise<number>): Promise<void> {
  try {
    const a = sqlite ? onSqlite(sqlite) : 0;
    const value = postgres ? await onPostgres(postgres) : a;
    progress.stored(records(), null);
    post({ t: "done", id, ok: true, value, records: records() });
  } catch (err) {
    if (FATAL.test(String((err as { code?: string }).code))) fatal(err);
    if (postgres && isConnectionError(err)) postgres.reset();
    post({ t: "done", id, ok: false, message: errorText(err), records: records() });
  }
}

async function drain(): Promise<void> {
  while (queue.length > 0 && !closing) {
    const m = queue[0];
    if (m.t === "batch") {
      const batches: Batch[] = [];
      let n = 0;
      const max = live ? MAX_COALESCED_LIVE : MAX_COALESCED;
      for (let next = queue[0]; queue.length > 0 && next.t === "batch" && (n === 0 || n + next.count <= max); next = queue[0]) {
        queue.shift();
        n += next.count;
        batches.push(next);
      }
      await writeBatches(batches);
      continue;
    }
    queue.shift();
    switch (m.t) {
      case "clear":
        await answer(m.id, (s) => s.clear(), (s) => s.clear());
        break;
      case "cleanup":
        await answer(m.id, (s) => s.cleanup(m.now), (s) => s.cleanup(m.now));
        break;
      case "live":
        live = m.on;
        break;
      case "replay":
        if (sqlite) {
          const entries = sqlite.tail.last(m.afterId === null ? m.tail : sqlite.tail.capacity).filter((e) => m.afterId === null || e.record.id > m.afterId);
          post({ t: "replay", client: m.client, frames: entries.map((e) => recordFrame(e.record, e.steps)) });
        }
        break;
      case "close":
        closing = true;
        break;
    }
  }
  draining = false;
  if (closing) {
    await feed?.close();
    sqlite?.close();
    await postgres?.close();
    port.close();
  }
}

port.on("message", (m: WriterRequest) => {
  if (closing) return;
  if (m.t === "close") closeRequested = true;
  // The PostgreSQL feed keeps its own order (pg-feed.ts): streams need not wait behind batches.
  if (feed && m.t === "live") return feed.setLive(m.on);
  if (feed && m.t === "replay") return feed.replay(m.client, m.tail, m.afterId);
  queue.push(m);
  // Messages that arrive while one is handled join the queue; the next turn takes them together.
  if (!draining) {
    draining = true;
    setImmediate(() => void drain());
  }
});

/** Ready once the stores are open. PostgreSQL unreachable is not a reason to fail: the writer retries; a refusal (newer schema, bad credentials) is. */
async function start(): Promise<void> {
  if (postgres) {
    try {
      await postgres.connect();
    } catch (err) {
      if (!isConnectionError(err)) throw err;
      pgDown = true;
      post({ t: "log", level: "warn", msg: "PostgreSQL query store unreachable at start; records wait (up to queue_size) while the writer retries", err: errorText(err) });
    }
  }
  const size = dbBytes();
  progress.stored(records(), size);
  post({ t: "ready", records: records(), dbBytes: size, idleThread });
  sizeAt = Date.now();
}

start().catch((err: unknown) => {
  post({ t: "log", level: "error", msg: "query recorder store could not be opened", err: errorText(err) });
  process.exit(1);
});
