// Messages between the DNS thread and the recorder's writer thread and reader processes, and where the compiled workers are.

import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import type { Filter, ReadRequest } from "./filters.js";
import type { PgOptions } from "./pg-schema.js";
import type { PgStoreOptions } from "./pg-store.js";
import type { StoreOptions } from "./store.js";

export type { Filter, ReadRequest };

/** To the writer. */
export type WriterRequest =
  /**
   * Records of one batch (batch.ts), the interned tags, client names and group sets added since the
   * previous batch (each list's new entries from its index `…From`), and the batch's client addresses.
   */
  | { t: "batch"; stringsFrom: number; strings: string[]; clientNamesFrom: number; clientNames: string[]; groupSetsFrom: number; groupSets: (readonly string[])[]; ips: string[]; data: ArrayBuffer; count: number }
  | { t: "clear"; id: number }
  | { t: "cleanup"; id: number; now: number }
  /** Serialise committed records for the stream (only while someone listens). */
  | { t: "live"; on: boolean }
  /** The newest `tail` records (after `afterId` when given) for one stream client. */
  | { t: "replay"; client: number; tail: number; afterId: number | null }
  | { t: "close" };

/** From the writer. */
export type WriterReply =
  /** `idleThread`: the writer's kernel thread id when it runs under SCHED_IDLE (priority.ts), else null. */
  | { t: "ready"; records: number; dbBytes: number; idleThread: number | null }
  | { t: "done"; id: number; ok: true; value: number; records: number }
  | { t: "done"; id: number; ok: false; message: string; records: number }
  | { t: "replay"; client: number; frames: string[] }
  /** SSE frames of committed records, while someone streams (with PostgreSQL: any instance's, from its feed). */
  | { t: "frames"; frames: string[] }
  | { t: "log"; level: "info" | "warn" | "error"; msg: string; err: string };

export interface WriterData {
  role: "query-recorder-writer";
  /** The SQLite store, the PostgreSQL store, or both (at least one). */
  sqlite: StoreOptions | null;
  postgres: PgStoreOptions | null;
  memoryTail: number;
}

/** What the writer thread is started with: WriterData and the memory where it counts its commits (progress.ts). */
export interface WriterThreadData extends WriterData {
  progress: SharedArrayBuffer;
}

/** A reader reads PostgreSQL when there is one, else the SQLite file. */
export interface ReaderData {
  role: "query-recorder-reader";
  path: string | null;
  postgres: PgOptions | null;
  cacheMb: number;
}

/** To a reader: one request at a time. */
export interface ReaderJob {
  id: number;
  request: ReadRequest;
}

/** To a reader process: its data first (and whether it runs under SCHED_IDLE: readers.ts), then jobs. */
export type ReaderMessage = { t: "open"; data: ReaderData; idle: boolean } | ({ t: "read" } & ReaderJob);

/** From a reader: the response body as JSON text, or an error with its API code. */
export type ReaderReply = { id: number; ok: true; json: string } | { id: number; ok: false; code: string; message: string };

const here = fileURLToPath(import.meta.url);

/** A worker's compiled file: beside this one when compiled; from dist/ when run from the TypeScript sources (tests). */
export function workerFile(name: "writer-worker" | "reader-worker"): string {
  return here.endsWith(".ts") ? resolve(dirname(here), "..", "..", "..", "..", "dist", "src", "plugins", "executors", "query-recorder", `${name}.js`) : join(dirname(here), `${name}.js`);
}

/** Nice value of the writer thread (Linux sets it per thread): DNS on the main thread goes first. */
export const WRITER_NICE = 10;
/** Nice value of every thread of a reader process (the lowest). */
export const READER_NICE = 19;
