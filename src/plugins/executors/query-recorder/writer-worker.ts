// The recorder's writer thread: owns the database connection that writes. Batches that arrive while
// one is being written are written together, in one transaction; every other request (clear,
// cleanup, replay) is taken in arrival order, so "flush, then clear" needs nothing more than
// sending the last batch before the clear.

import { statSync } from "node:fs";
import { setPriority } from "node:os";
import { parentPort, workerData } from "node:worker_threads";
import { readBatch, type BatchRecord } from "./batch.js";
import { recordFrame } from "./json.js";
import { WRITER_NICE, type WriterData, type WriterReply, type WriterRequest } from "./protocol.js";
import { RecorderStore } from "./store.js";

/** Most records written in one transaction when batches pile up (fewer while streaming: each commit is one message of frames). */
const MAX_COALESCED = 16_384;
const MAX_COALESCED_LIVE = 2048;
/** The database size is measured at most this often. */
const SIZE_EVERY_MS = 1000;
/** Errors after which the connection cannot be trusted: the thread ends and the recorder's actor starts a new one. */
const FATAL = /SQLITE_(CORRUPT|NOTADB|IOERR|CANTOPEN|READONLY)/;

const data = workerData as WriterData;
if (!parentPort || data?.role !== "query-recorder-writer") throw new Error("writer-worker.ts runs as the query recorder's worker thread");
const port = parentPort;

try {
  setPriority(WRITER_NICE);
} catch {
  // Not permitted or not supported here: the writer then competes with DNS at equal priority.
}

const post = (m: WriterReply): void => port.postMessage(m);
const store = new RecorderStore(data.options);
const strings: string[] = [];
const queue: WriterRequest[] = [];
let scheduled = false;
let live = false;
let closing = false;
let sizeAt = 0;

function dbBytes(): number {
  let n = 0;
  for (const f of [data.options.path, `${data.options.path}-wal`]) {
    try {
      n += statSync(f).size;
    } catch {
      // No WAL file right after a TRUNCATE checkpoint.
    }
  }
  return n;
}

function fatal(err: unknown): never {
  post({ t: "log", level: "error", msg: "query recorder database failed; the writer restarts", err: (err as Error).message });
  try {
    store.db.close();
  } catch {
    // Already unusable.
  }
  process.exit(1);
}

function writeBatches(batches: Extract<WriterRequest, { t: "batch" }>[]): void {
  const started = performance.now();
  let records: BatchRecord[] = [];
  let count = 0;
  for (const b of batches) {
    // Interned tags arrive with the batch that first uses them.
    strings.length = b.stringsFrom;
    strings.push(...b.strings);
    count += b.count;
    records = records.concat(readBatch(b.data, b.count, strings, b.ips));
  }
  let frames: string[] | null = null;
  let lost = 0;
  try {
    const entries = store.insert(records);
    if (live) frames = entries.map((e) => recordFrame(e.record, e.steps));
    store.trimIfNeeded();
  } catch (err) {
    if (FATAL.test(String((err as { code?: string }).code))) fatal(err);
    lost = count;
    post({ t: "log", level: "warn", msg: "query recorder batch not written; its records are lost", err: (err as Error).message });
  }
  const now = Date.now();
  const size = now - sizeAt >= SIZE_EVERY_MS ? dbBytes() : null;
  if (size !== null) sizeAt = now;
  post({ t: "committed", count, lost, seconds: (performance.now() - started) / 1000, records: store.records, dbBytes: size, frames });
}

function answer(id: number, work: () => number): void {
  try {
    const value = work();
    post({ t: "done", id, ok: true, value, records: store.records });
  } catch (err) {
    if (FATAL.test(String((err as { code?: string }).code))) fatal(err);
    post({ t: "done", id, ok: false, message: (err as Error).message, records: store.records });
  }
}

function drain(): void {
  scheduled = false;
  while (queue.length > 0) {
    const m = queue[0];
    if (m.t === "batch") {
      const batches: Extract<WriterRequest, { t: "batch" }>[] = [];
      let n = 0;
      const max = live ? MAX_COALESCED_LIVE : MAX_COALESCED;
      while (queue.length > 0 && queue[0].t === "batch" && (n === 0 || n + queue[0].count <= max)) {
        const b = queue.shift() as Extract<WriterRequest, { t: "batch" }>;
        n += b.count;
        batches.push(b);
      }
      writeBatches(batches);
      continue;
    }
    queue.shift();
    switch (m.t) {
      case "clear":
        answer(m.id, () => store.clear());
        break;
      case "cleanup":
        answer(m.id, () => store.cleanup(m.now));
        break;
      case "live":
        live = m.on;
        break;
      case "replay": {
        const entries = store.tail.last(m.afterId === null ? m.tail : store.tail.capacity).filter((e) => m.afterId === null || e.record.id > m.afterId);
        post({ t: "replay", client: m.client, frames: entries.map((e) => recordFrame(e.record, e.steps)) });
        break;
      }
      case "close":
        closing = true;
        break;
    }
    if (closing) break;
  }
  if (closing) {
    store.close();
    port.close();
  }
}

port.on("message", (m: WriterRequest) => {
  if (closing) return;
  queue.push(m);
  // Messages that arrive while one is handled join the queue; the next turn takes them together.
  if (!scheduled) {
    scheduled = true;
    setImmediate(drain);
  }
});

post({ t: "ready", records: store.records, dbBytes: dbBytes() });
sizeAt = Date.now();
