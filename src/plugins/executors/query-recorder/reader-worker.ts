// A recorder reader process: a read-only connection that answers one API request at a time and
// hands back the response body as JSON text, so neither the query nor the serialisation of a
// large page runs on the event loop that serves DNS. Each request reads one snapshot (a read
// transaction), so a page or a statistic never mixes two states of the database. With a
// PostgreSQL store the connection is PostgreSQL's (pg-reads.ts), opened again after a failure.
//
// A process, not a thread: every thread of it runs at nice 19, and under SCHED_IDLE unless the pool
// says otherwise (readers.ts), V8's garbage-collection and compiler helpers included. A reader thread's allocations were collected by
// the DNS process's shared helper threads at nice 0, which took the core from DNS at equal weight
// (docs/operations.md, "Reads").

import Database from "better-sqlite3";
import type pg from "pg";
import { RouteError } from "../../../registry/control.js";
import type { ReadRequest } from "./filters.js";
import { pgAnswer } from "./pg-reads.js";
import { idlePolicy, lowerEveryThread } from "./priority.js";
import { isConnectionError, pgClient, type PgOptions } from "./pg-schema.js";
import { READER_NICE, type ReaderData, type ReaderMessage, type ReaderReply } from "./protocol.js";
import { recordById, recordsPage } from "./records.js";
import { configureReader, hasCurrentSchema } from "./schema.js";
import { distribution, latency, plugins, timeseries, topClients, topNames } from "./stats.js";

if (!process.send) throw new Error("reader-worker.js runs as a query recorder's reader process (forked with an IPC channel)");
const send = process.send.bind(process) as (m: ReaderReply) => boolean;

lowerEveryThread(READER_NICE);
// The recorder is gone (its process ended or closed the channel): nothing is left to answer.
process.on("disconnect", () => process.exit(0));

function sqliteReader(path: string, cacheMb: number): (req: ReadRequest) => Promise<string> {
  const db = new Database(path, { readonly: true, fileMustExist: true });
  configureReader(db, cacheMb);
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

function reader(data: ReaderData): (req: ReadRequest) => Promise<string> {
  if (data.postgres !== null) return pgReader(data.postgres);
  if (data.path !== null) return sqliteReader(data.path, data.cacheMb);
  throw new Error("a recorder reader needs a SQLite path or a PostgreSQL store");
}

// The first message is the reader's data, then one job at a time.
let read: ((req: ReadRequest) => Promise<string>) | null = null;

process.on("message", (m: ReaderMessage) => {
  if (m.t === "open") {
    if (m.idle) idlePolicy(process.pid, true);
    read = reader(m.data);
    return;
  }
  const { id, request } = m;
  if (read === null) throw new Error("a recorder reader was sent a read before its data");
  read(request).then(
    (json) => send({ id, ok: true, json }),
    (err: unknown) => send(err instanceof RouteError ? { id, ok: false, code: err.code, message: err.message } : { id, ok: false, code: "query_recorder_read_failed", message: `reading the recorder's database failed: ${(err as Error).message}` }),
  );
});
