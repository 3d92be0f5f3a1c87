// The recorder's PostgreSQL store: connection settings, its schema and how it is versioned. The
// versioning is SQLite's (schema.ts): a `recorder_schema` table lists the versions a database holds
// and each version's tables carry its number. Several instances share one database, so migrations
// run under an advisory lock, and a database that holds a version newer than this Sluice knows is
// refused rather than written in a layout it does not understand.
//
// Layout: one plain row per record, no dictionaries or rollups (PostgreSQL aggregates indexed
// columns fast enough for the stats routes): the question's name and type on the row (the servers
// answer a query with more than one question FORMERR before any plugin sees it), the wire bytes,
// and the execution path as a jsonb array.
//
// Additions that an older Sluice can live with (a nullable column or one with a default, which its
// inserts leave out, and indexes) do not take a new version: an older instance sharing the store
// would refuse it. They are made when missing, found by a look at the catalog under the same lock:
// the client's name and groups (issue 26), with a b-tree index per name and a GIN index on the groups.

import type * as Pg from "pg";
import { lazyModule } from "../../../lazy-module.js";

const pg = lazyModule<typeof Pg>("pg");

export interface PgOptions {
  url: string;
  /** PostgreSQL schema (namespace) of the recorder's tables; created when missing. */
  schema: string;
  /** Longest a read may run, ms (statement_timeout of the reader connections). */
  statementTimeoutMs: number;
  connectTimeoutMs: number;
}

export const PG_SCHEMA_VERSION = 1;

/** Steps in `records_v1.steps`: {s: sequence tag, n: node index, k: kind code, t: tag, o: outcome code}. */
export interface PgStep {
  s: string;
  n: number | null;
  k: number;
  t: string;
  o: number;
}

/** Table and channel names of one store (the schema name is validated by the plugin's args). */
export function pgNames(schema: string): { records: string; versions: string; channel: string; lock: string } {
  return { records: `${schema}.records_v${PG_SCHEMA_VERSION}`, versions: `${schema}.recorder_schema`, channel: `${schema}_records`, lock: `sluice.query_recorder.${schema}` };
}

const V1 = (records: string): string => `
CREATE TABLE IF NOT EXISTS ${records} (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  created_at_ms bigint NOT NULL,
  instance text NOT NULL,
  elapsed_us bigint NOT NULL,
  client_ip text NOT NULL,
  qname text NOT NULL,
  qtype integer NOT NULL,
  question_count integer NOT NULL,
  outcome integer NOT NULL,
  error text,
  query bytea NOT NULL,
  response bytea,
  steps jsonb NOT NULL
);
CREATE INDEX IF NOT EXISTS records_v1_time ON ${records} (created_at_ms, id);
CREATE INDEX IF NOT EXISTS records_v1_instance ON ${records} (instance, created_at_ms, id);
`;

/** Columns and indexes added to records_v1 since it was made (see the top of this file). */
const CLIENT_COLUMNS = ["client_name", "client_groups"];
const CLIENT_INDEXES = ["records_v1_client_name", "records_v1_client_groups"];
const CLIENTS_DDL = (records: string): string => `
ALTER TABLE ${records} ADD COLUMN IF NOT EXISTS client_name text, ADD COLUMN IF NOT EXISTS client_groups text[] NOT NULL DEFAULT '{}';
CREATE INDEX IF NOT EXISTS records_v1_client_name ON ${records} (client_name, created_at_ms, id) WHERE client_name IS NOT NULL;
CREATE INDEX IF NOT EXISTS records_v1_client_groups ON ${records} USING gin (client_groups);
`;

/** A client for `o`; `readTimeout` sets statement_timeout (readers). Errors of an idle connection are handled by the caller's `onError`. */
export function pgClient(o: PgOptions, onError: (err: Error) => void, readTimeout = false): Pg.Client {
  const c = new (pg().Client)({
    connectionString: o.url,
    connectionTimeoutMillis: o.connectTimeoutMs,
    application_name: "sluice query_recorder",
    ...(readTimeout ? { statement_timeout: o.statementTimeoutMs } : {}),
  });
  c.on("error", onError);
  return c;
}

/** Errors that mean "the server cannot be reached now", as opposed to a statement that failed. */
export function isConnectionError(err: unknown): boolean {
  const e = err as { code?: unknown; message?: unknown };
  const code = typeof e?.code === "string" ? e.code : "";
  if (/^(08|57P|53)/.test(code) || /^E(CONNREFUSED|CONNRESET|NOENT|PIPE|TIMEDOUT|HOSTUNREACH|NETUNREACH|AI_AGAIN)$/.test(code)) return true;
  return typeof e?.message === "string" && /connection|terminated|timeout|not queryable|ended/i.test(e.message);
}

/** Creates the schema and this version's tables when missing; refuses a database of a newer version. */
export async function pgMigrate(c: Pg.Client, schema: string): Promise<void> {
  const n = pgNames(schema);
  await c.query("BEGIN");
  try {
    await c.query("SELECT pg_advisory_xact_lock(hashtext($1))", [n.lock]);
    await c.query(`CREATE SCHEMA IF NOT EXISTS ${schema}`);
    await c.query(`CREATE TABLE IF NOT EXISTS ${n.versions} (version integer PRIMARY KEY, created_at_ms bigint NOT NULL)`);
    const have = (await c.query<{ version: number }>(`SELECT version FROM ${n.versions}`)).rows.map((r) => Number(r.version));
    const newest = Math.max(0, ...have);
    if (newest > PG_SCHEMA_VERSION) throw new Error(`the PostgreSQL query store (schema ${schema}) has version ${newest}, newer than this Sluice's ${PG_SCHEMA_VERSION}; upgrade Sluice or give this recorder another postgres.schema`);
    if (!have.includes(PG_SCHEMA_VERSION)) {
      await c.query(V1(n.records));
      await c.query(`INSERT INTO ${n.versions} (version, created_at_ms) VALUES ($1, $2)`, [PG_SCHEMA_VERSION, Date.now()]);
    }
    // Only when something is missing: the DDL would lock the table each time an instance connects.
    const cols = await c.query(`SELECT 1 FROM information_schema.columns WHERE table_schema = $1 AND table_name = $2 AND column_name = ANY($3)`, [schema, `records_v${PG_SCHEMA_VERSION}`, CLIENT_COLUMNS]);
    const idx = await c.query(`SELECT 1 FROM pg_indexes WHERE schemaname = $1 AND indexname = ANY($2)`, [schema, CLIENT_INDEXES]);
    if (cols.rowCount !== CLIENT_COLUMNS.length || idx.rowCount !== CLIENT_INDEXES.length) await c.query(CLIENTS_DDL(n.records));
    await c.query("COMMIT");
  } catch (err) {
    await c.query("ROLLBACK").catch(() => undefined);
    throw err;
  }
}

/** Text PostgreSQL accepts (no NUL characters). */
export const pgText = (s: string): string => (s.includes("\0") ? s.replace(/\0/g, "") : s);
