// A recorder reader thread: a read-only connection that answers one API request at a time and
// hands back the response body as JSON text, so neither the query nor the serialisation of a
// large page runs on the event loop that serves DNS. Each request reads one snapshot (a read
// transaction), so a page or a statistic never mixes two states of the database.

import { setPriority } from "node:os";
import { parentPort, workerData } from "node:worker_threads";
import Database from "better-sqlite3";
import { RouteError } from "../../../registry/control.js";
import type { ReadRequest } from "./filters.js";
import { READER_NICE, type ReaderData, type ReaderJob, type ReaderReply } from "./protocol.js";
import { recordById, recordsPage } from "./records.js";
import { configureReader, hasCurrentSchema } from "./schema.js";
import { distribution, latency, plugins, timeseries, top } from "./stats.js";

const data = workerData as ReaderData;
if (!parentPort || data?.role !== "query-recorder-reader") throw new Error("reader-worker.ts runs as a query recorder's worker thread");
const port = parentPort;

try {
  setPriority(READER_NICE);
} catch {
  // Not permitted here: reads then compete with DNS at equal priority.
}

const db = new Database(data.path, { readonly: true, fileMustExist: true });
configureReader(db, data.cacheMb);

function answer(req: ReadRequest): object {
  switch (req.op) {
    case "records":
      return recordsPage(db, req.filter, req.cursor, req.limit);
    case "record":
      return recordById(db, req.id);
    case "stats":
      switch (req.stat) {
        case "plugins":
          return plugins(db, req.filter, req.kind);
        case "top_clients":
          return top(db, req.filter, "clients", req.limit);
        case "top_qnames":
          return top(db, req.filter, "names", req.limit);
        case "qtype":
        case "rcode":
          return distribution(db, req.filter, req.stat);
        case "latency":
          return latency(db, req.filter, req.slowLimit);
        case "timeseries":
          return timeseries(db, req.filter, req.bucketMs, req.buckets, req.nowMs);
      }
  }
}

const snapshot = db.transaction((req: ReadRequest) => JSON.stringify(answer(req)));

port.on("message", ({ id, request }: ReaderJob) => {
  let reply: ReaderReply;
  try {
    if (!hasCurrentSchema(db)) throw new RouteError("query_recorder_unavailable", "the recorder's database has no records table yet");
    reply = { id, ok: true, json: snapshot.deferred(request) };
  } catch (err) {
    reply = err instanceof RouteError ? { id, ok: false, code: err.code, message: err.message } : { id, ok: false, code: "query_recorder_unavailable", message: `reading the recorder's database failed: ${(err as Error).message}` };
  }
  port.postMessage(reply);
});
