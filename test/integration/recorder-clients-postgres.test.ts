// Client names and groups in the query recorder's PostgreSQL store (issue 26), against a real,
// throwaway PostgreSQL server: the scenario of recorder-clients-scenario.ts (records, client_name= and
// group= filters, top_clients by address and by name, the stream, a rename by reload); a store made by
// the previous Sluice (records_v1 without the client columns) gets them in place, without a new
// version (an older instance sharing the store would refuse one), its records without a name or
// groups, and the older Sluice's inserts still work; the filters can use their indexes.
import pg from "pg";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { buildQuery } from "../helpers/dns.js";
import { PostgresServer, requirePostgres } from "../helpers/postgres.js";
import { startSluice, type RunningSluice } from "../helpers/sluice.js";
import { allRecords, committed } from "./recorder-helpers.js";
import { askFrom, checkNamesAndGroups, checkRename, checkStream, clientsConfig, sendTraffic } from "./recorder-clients-scenario.js";

requirePostgres();

let server: PostgresServer;
const store = (schema: string): string => `postgres: { url: "${server.url()}", schema: ${schema}, connect_timeout_ms: 5000 }`;

beforeAll(async () => {
  server = await PostgresServer.start();
});
afterAll(() => server?.destroy());

describe("names and groups in PostgreSQL", () => {
  let s: RunningSluice;
  beforeAll(async () => {
    s = await startSluice(clientsConfig(store("names")));
  });
  afterAll(() => s?.stop());

  test("records carry the client's name and groups; records and stats filter by them; top_clients names the clients", async () => {
    await sendTraffic(s);
    await checkNamesAndGroups(s);
  });

  test("the stream carries them", () => checkStream(s));

  test("a renamed client: its records keep the name they had, top_clients names its address as last known", () => checkRename(s, store("names")));
});

/** records_v1 as the previous Sluice made it (pg-schema.ts before the client columns). */
const OLD_V1 = `
CREATE SCHEMA old;
CREATE TABLE old.recorder_schema (version integer PRIMARY KEY, created_at_ms bigint NOT NULL);
INSERT INTO old.recorder_schema VALUES (1, 0);
CREATE TABLE old.records_v1 (
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
CREATE INDEX records_v1_time ON old.records_v1 (created_at_ms, id);
CREATE INDEX records_v1_instance ON old.records_v1 (instance, created_at_ms, id);
`;

/** The previous Sluice's insert (its column list), one row. */
const oldInsert = (c: pg.Client, ip: string, at: number): Promise<unknown> =>
  c.query("INSERT INTO old.records_v1 (created_at_ms, instance, elapsed_us, client_ip, qname, qtype, question_count, outcome, error, query, response, steps) VALUES ($1, 'old-host', 500, $2, 'old.clients.test.', 1, 1, -2, NULL, $3, NULL, '[]')", [at, ip, buildQuery("old.clients.test", "A")]);

describe("a store of the previous Sluice", () => {
  let s: RunningSluice;
  let c: pg.Client;
  beforeAll(async () => {
    c = new pg.Client({ connectionString: server.url() });
    await c.connect();
    await c.query(OLD_V1);
    await oldInsert(c, "127.0.0.9", Date.now() - 3_600_000);
    s = await startSluice(clientsConfig(store("old")));
  });
  afterAll(async () => {
    await s?.stop();
    await c?.end();
  });

  test("gets the client columns in place: old records have no name and no groups, new ones have them, an older writer still inserts", async () => {
    expect((await allRecords(s, "rec")).map((r) => [r.client_ip, r.client_name, r.client_groups, r.instance])).toEqual([["127.0.0.9", null, [], "old-host"]]);
    expect(await askFrom("127.0.0.17", s.port("udp"), "new.clients.test")).toBe(0);
    await committed(s, "rec", 2);
    // An instance of the previous Sluice sharing the store: its insert names only its columns.
    await oldInsert(c, "127.0.0.2", Date.now());
    await committed(s, "rec", 3);
    expect((await allRecords(s, "rec")).map((r) => [r.client_ip, r.client_name, r.client_groups])).toEqual([
      ["127.0.0.2", null, []],
      ["127.0.0.17", "annas-phone", ["kids", "guests"]],
      ["127.0.0.9", null, []],
    ]);
    expect(await allRecords(s, "rec", "group=guests")).toHaveLength(1);
    expect(await allRecords(s, "rec", "client_name=annas-phone")).toHaveLength(1);

    // Still version 1: the previous Sluice refuses a store of a newer version.
    expect((await c.query("SELECT version FROM old.recorder_schema")).rows).toEqual([{ version: 1 }]);
    const indexes = (await c.query<{ indexname: string }>("SELECT indexname FROM pg_indexes WHERE schemaname = 'old' ORDER BY 1")).rows.map((r) => r.indexname);
    expect(indexes).toEqual(expect.arrayContaining(["records_v1_client_groups", "records_v1_client_name"]));
    // With sequential scans priced out, both filters are answered through their indexes.
    await c.query("BEGIN");
    try {
      await c.query("SET LOCAL enable_seqscan = off");
      const plan = async (where: string, value: string): Promise<string> => (await c.query<{ "QUERY PLAN": string }>(`EXPLAIN SELECT id FROM old.records_v1 r WHERE ${where}`, [value])).rows.map((r) => r["QUERY PLAN"]).join("\n");
      expect(await plan("r.client_groups @> ARRAY[$1::text]", "kids")).toMatch(/records_v1_client_groups/);
      expect(await plan("r.client_name = $1", "annas-phone")).toMatch(/records_v1_client_name/);
    } finally {
      await c.query("ROLLBACK");
    }
  });
});
