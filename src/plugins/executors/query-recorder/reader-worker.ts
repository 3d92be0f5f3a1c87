// A recorder reader thread: a read-only connection that answers one API request at a time and
// hands back the response body as JSON text, so neither the query nor the serialisation of a
// large page runs on the event loop that serves DNS. Each request reads one snapshot (a read
// transaction), so a page or a statistic never mixes two states of the database. With a
// PostgreSQL store the connection is PostgreSQL's (pg-reads.ts), opened again after a failure.

import { setPriority } from "node:os";
import { parentPort, workerData } from "node:worker_threads";
import Database from "better-sqlite3";
import type pg from "pg";
import { RouteError } from "../../../registry/control.js";
import type { ReadRequest } from "./filters.js";
import { pgAnswer } from "./pg-reads.js";
import { isConnectionError, pgClient, type PgOptions } from "./pg-schema.js";
import { READER_NICE, type ReaderData, type ReaderJob, type ReaderReply } from "./protocol.js";
import { recordById, recordsPage } from "./records.js";
import { configureReader, hasCurrentSchema } from "./schema.js";
import { distribution, latency, plugins, timeseries, topClients, topNames } from "./stats.js";

const data = workerData as ReaderData;
if (!parentPort || data?.role !== "query-recorder-reader") throw new Error("reader-worker.ts runs as a query recorder's worker thread");
const port = parentPort;

try {
  setPriority(READER_NICE);
} catch {
  // Not permitted here: reads then compete with DNS at equal priority.
}

function sqliteReader(path: string): (req: ReadRequest) => Promise<string> {
  const db = new Database(path, { readonly: true, fileMustExist: true });
  configureReader(db, data.cacheMb);
  const answer = (req: ReadRequest): object => {
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
            return topClients(db, req.filter, req.by, req.limit);
          case "top_qnames":
            return topNames(db, req.filter, req.limit);
          case "qtype":
          case "rcode":
            return distribution(db, req.filter, req.stat);
          case "latency":
            return latency(db, req.filter, req.slowLimit);
          case "timeseries":
            return timeseries(db, req.filter, req.bucketMs, req.buckets, req.nowMs);
        }
    }
  };
  const snapshot = db.transaction((req: ReadRequest) => JSON.stringify(answer(req)));
  return async (req) => {
    if (!hasCurrentSchema(db)) throw new RouteError("query_recorder_read_failed", "the recorder's database has no records table yet");
    return snapshot.deferred(req);
  };
}

function pgReader(o: PgOptions): (req: ReadRequest) => Promise<string> {
  let client: pg.Client | null = null;
  const drop = (c: pg.Client): void => {
    if (client === c) client = null;
    void c.end().catch(() => undefined);
  };
  return async (req) => {
    let c = client;
    try {
      if (c === null) {
        const fresh = pgClient(o, () => drop(fresh), true);
        c = fresh;
        client = fresh;
        await fresh.connect();
      }
      await c.query("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");
      try {
        return JSON.stringify(await pgAnswer(c, o.schema, req));
      } finally {
        await c.query("ROLLBACK").catch(() => undefined);
      }
    } catch (err) {
      if (err instanceof RouteError) throw err;
      if (c !== null && isConnectionError(err)) drop(c);
      const e = err as { code?: string; message?: string };
      // 42P01: no table yet (no writer has reached the store); 57014: statement_timeout.
      const why = e.code === "42P01" ? "the query store has no records table yet" : e.code === "57014" ? `the read took longer than ${o.statementTimeoutMs} ms and was stopped` : `the PostgreSQL query store could not be read: ${e.message ?? String(err)}`;
      throw new RouteError("query_recorder_read_failed", why);
    }
  };
}

function reader(): (req: ReadRequest) => Promise<string> {
  if (data.postgres !== null) return pgReader(data.postgres);
  if (data.path !== null) return sqliteReader(data.path);
  throw new Error("a recorder reader needs a SQLite path or a PostgreSQL store");
}

const read = reader();

port.on("message", ({ id, request }: ReaderJob) => {
  read(request).then(
    (json) => port.postMessage({ id, ok: true, json } satisfies ReaderReply),
    (err: unknown) =>
      port.postMessage((err instanceof RouteError ? { id, ok: false, code: err.code, message: err.message } : { id, ok: false, code: "query_recorder_read_failed", message: `reading the recorder's database failed: ${(err as Error).message}` }) satisfies ReaderReply),
  );
});
