// The PostgreSQL recorder writes with COPY (text format, pg-copy.ts), against a real, throwaway
// PostgreSQL server: text the COPY format or an array literal gives a meaning to (backslash, tab,
// newline, carriage return, other control characters, quotes, braces, commas, `\N`, `NULL`, an empty
// element, NUL, a lone surrogate, non-ASCII) reads back identical through the records route, the
// detail route and top_qnames — in the name of a query asked over DNS (bytes no UTF-8 text could
// hold included) and in every text column a record has (written by a second writer of the same
// store); a batch the server refuses half-way through its COPY (a long one too, refused with many
// chunks sent and many to come) is lost alone, rolled back whole and counted, and the writer goes on
// with the next on the same connection.
import pg from "pg";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { buildQuery, udpExchange } from "../helpers/dns.js";
import { PostgresServer, requirePostgres } from "../helpers/postgres.js";
import { serversYaml, startSluice, type RunningSluice } from "../helpers/sluice.js";
import type { BatchRecord } from "../../src/plugins/executors/query-recorder/batch.js";
import { KIND_CODES, OUTCOME_CODES } from "../../src/plugins/executors/query-recorder/batch.js";
import { copyText, copyTextArray } from "../../src/plugins/executors/query-recorder/pg-copy.js";
import { pgNames } from "../../src/plugins/executors/query-recorder/pg-schema.js";
import { PgRecorderStore } from "../../src/plugins/executors/query-recorder/pg-store.js";
import { allRecords, apiJson, metric, until, type RecordJson } from "./recorder-helpers.js";

const R = "/api/plugins/rec";
const SCHEMA = "copy";
let server: PostgresServer;
let s: RunningSluice;
let db: pg.Client;

requirePostgres();

const config = (): string => `
api: { http: "127.0.0.1:0" }
plugins:
  - { tag: rec, type: query_recorder, args: { postgres: { url: "${server.url()}", schema: ${SCHEMA}, connect_timeout_ms: 5000 }, flush_interval_ms: 20, batch_size: 8 } }
  - tag: main
    type: sequence
    args:
      - exec: $rec
      - exec: reject 0
${serversYaml()}`;

/**
 * A name with every byte COPY or an array literal treats specially, as presentation text (\DDD for
 * control and non-ASCII bytes, \\ for a backslash in a label; quotes, braces and commas as they are).
 */
const HOSTILE_NAME = String.raw`t\009ab\010nl\013cr\008bs\\bs"q{b},c\001\127\255\\N.x\\.copy.test`;

beforeAll(async () => {
  server = await PostgresServer.start();
  s = await startSluice(config());
  db = new pg.Client({ connectionString: server.url() });
  await db.connect();
});

afterAll(async () => {
  await db?.end();
  await s?.stop();
  server?.destroy();
});

describe("COPY text values", () => {
  test("escapes what COPY reads specially, leaves NUL out, and quotes every array element", () => {
    expect(copyText("plain.example.")).toBe("plain.example.");
    expect(copyText("a\\b\tc\nd\re\bf\fg\vh\0i")).toBe("a\\\\b\\tc\\nd\\re\\bf\\fg\\vhi");
    expect(copyText("\\N")).toBe("\\\\N");
    expect(copyTextArray([])).toBe("{}");
    // The literal {"a,b","{c}","\"q\"","NULL",""} with its backslashes doubled for COPY.
    expect(copyTextArray(["a,b", "{c}", '"q"', "NULL", ""])).toBe('{"a,b","{c}","\\\\"q\\\\"","NULL",""}');
  });
});

describe("PostgreSQL store written with COPY", () => {
  test("a hostile query name reads back identical: records, the detail, the qname filter and top_qnames", async () => {
    const packet = buildQuery(HOSTILE_NAME, "TXT");
    expect(await udpExchange(s.port("udp"), packet)).not.toBeNull();
    const [rec] = await until("the hostile record", async () => {
      const r = await allRecords(s, "rec");
      return r.length > 0 ? r : undefined;
    });
    expect(rec.questions_json).toEqual([{ name: `${HOSTILE_NAME}.`, qtype: "TXT", qclass: "IN" }]);
    const detail = await apiJson<{ record: { record: RecordJson; steps: { tag: string }[] } }>(s, `${R}/records/${rec.id}`);
    expect(detail.record.record).toEqual(rec);
    expect(detail.record.steps.map((x) => x.tag)).toEqual(["reject"]);
    // The name column as stored (lower case, absolute) is what the filter and the statistics see.
    const stored = `${HOSTILE_NAME.toLowerCase()}.`;
    const { rows } = await db.query<{ qname: string; query: Buffer }>(`SELECT qname, query FROM ${pgNames(SCHEMA).records} WHERE id = $1`, [rec.id]);
    expect(rows).toEqual([{ qname: stored, query: packet }]);
    const filtered = await allRecords(s, "rec", `qname=${encodeURIComponent(String.raw`\\bs"q{b},c\001`)}`);
    expect(filtered.map((r) => r.id)).toEqual([rec.id]);
    const top = await apiJson<{ rows: { key: string; count: number }[] }>(s, `${R}/stats/top_qnames`);
    expect(top.rows).toContainEqual(expect.objectContaining({ key: stored, count: 1 }));
  });

  test("hostile text in every column written through a second writer of the store reads back identical", async () => {
    const instance = "inst\t\\x\n1";
    const store = new PgRecorderStore({ pg: { url: server.url(), schema: SCHEMA, statementTimeoutMs: 10_000, connectTimeoutMs: 1000 }, instance, maxRecords: 0, retentionMs: 86_400_000 });
    const query = buildQuery("written.copy.test", "A");
    const response = Buffer.from(query);
    response[2] |= 0x80;
    const groups = ["a,b", "{c}", '"q"', "back\\slash", "NULL", "", "tab\there", "nl\nx", "nul\0x", "ünï€"];
    const record: BatchRecord = {
      createdAtMs: Date.now(),
      elapsedUs: 1234,
      query,
      response,
      clientIp: "fd00::1%eth\t0\\",
      clientName: 'name \t\\"{},\r\n\\N',
      clientGroups: groups,
      error: "e\tr\nr\\o\"r{,}\r\0x\u0001\u007f ünï € \ud800 \\N \\.",
      steps: [{ sequenceTag: "seq\n1\\", nodeIndex: 3, kind: KIND_CODES.executor, tag: 't\tag"\\{x}', outcome: OUTCOME_CODES.error }],
    };
    // A clean record in the same batch: one bad value must not shift the columns of the next row.
    const clean: BatchRecord = { ...record, clientIp: "192.0.2.1", clientName: null, clientGroups: [], error: null, steps: [] };
    try {
      await store.insert([record, clean]);
    } finally {
      await store.close();
    }
    const written = await until("the written records", async () => {
      // (instance= takes instance names only: the records are found by what they show.)
      const r = (await allRecords(s, "rec")).filter((x) => x.instance === instance);
      return r.length === 2 ? r : undefined;
    });
    const [hostile, plain] = [...written].sort((a, b) => a.id - b.id);
    expect(hostile).toMatchObject({
      instance,
      client_ip: record.clientIp,
      client_name: record.clientName,
      client_groups: groups.map((g) => g.replace("\0", "")),
      // NUL cannot be stored; a lone surrogate became U+FFFD on its way to UTF-8.
      error: "e\tr\nr\\o\"r{,}\rx\u0001\u007f ünï € \ufffd \\N \\.",
      // An error: the response is not kept.
      has_response: false,
      questions_json: [{ name: "written.copy.test.", qtype: "A", qclass: "IN" }],
    });
    expect(plain).toMatchObject({ instance, client_ip: "192.0.2.1", client_name: null, client_groups: [], error: null, has_response: true, rcode: "NOERROR" });
    const detail = await apiJson<{ record: { steps: unknown[] } }>(s, `${R}/records/${hostile.id}`);
    expect(detail.record.steps).toEqual([{ event_index: 0, sequence_tag: "seq\n1\\", node_index: 3, kind: "executor", tag: 't\tag"\\{x}', outcome: "error" }]);
    // The array is an array (the GIN index and group= see each element), not one joined string.
    const { rows } = await db.query<{ n: number }>(`SELECT array_length(client_groups, 1) AS n FROM ${pgNames(SCHEMA).records} WHERE id = $1`, [hostile.id]);
    expect(rows).toEqual([{ n: groups.length }]);
    // The element "NULL" is the text NULL: group= finds it.
    expect((await allRecords(s, "rec", "group=NULL")).map((r) => r.id)).toEqual([hostile.id]);
  });

  test("a batch the server refuses half-way through its COPY is lost alone (counted, rolled back whole); the writer goes on", async () => {
    const t = pgNames(SCHEMA).records;
    await db.query(`CREATE FUNCTION ${SCHEMA}.refuse() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN IF NEW.qname LIKE 'boom.%' THEN RAISE EXCEPTION 'refused by the test'; END IF; RETURN NEW; END$$`);
    await db.query(`CREATE TRIGGER refuse BEFORE INSERT ON ${t} FOR EACH ROW EXECUTE FUNCTION ${SCHEMA}.refuse()`);
    try {
      const dropped = await metric(s, /query_recorder_dropped_total\{plugin_tag="rec"\}/);
      const before = await allRecords(s, "rec");
      expect(await udpExchange(s.port("udp"), buildQuery("boom.copy.test", "A"))).not.toBeNull();
      await until("the refused batch counted", async () => (await metric(s, /query_recorder_dropped_total\{plugin_tag="rec"\}/)) === dropped + 1);
      expect(await udpExchange(s.port("udp"), buildQuery("after.copy.test", "A"))).not.toBeNull();
      const after = await until("the next batch", async () => {
        const r = await allRecords(s, "rec");
        return r.length > before.length ? r : undefined;
      });
      expect(after.map((r) => r.questions_json[0].name).filter((n) => !before.some((b) => b.questions_json[0].name === n))).toEqual(["after.copy.test."]);
      expect(s.logs.map((l) => JSON.stringify(l)).some((l) => l.includes("batch not written to PostgreSQL") && l.includes("refused by the test"))).toBe(true);

      // A long COPY refused in its middle (many chunks sent, many to come): none of its rows stay, and the same connection writes the next batch.
      const store = new PgRecorderStore({ pg: { url: server.url(), schema: SCHEMA, statementTimeoutMs: 10_000, connectTimeoutMs: 1000 }, instance: "long", maxRecords: 0, retentionMs: 86_400_000 });
      const row = (name: string): BatchRecord => ({ createdAtMs: Date.now(), elapsedUs: 1, query: buildQuery(name, "A"), response: null, clientIp: "192.0.2.9", clientName: null, clientGroups: [], error: null, steps: [] });
      try {
        const long = Array.from({ length: 20_000 }, (_, i) => row(i === 10_000 ? "boom.long.copy.test" : `r${i}.long.copy.test`));
        await expect(store.insert(long)).rejects.toThrow(/refused by the test/);
        await store.insert([row("next.long.copy.test")]);
      } finally {
        await store.close();
      }
      const { rows } = await db.query<{ qname: string }>(`SELECT qname FROM ${t} WHERE instance = 'long'`);
      expect(rows).toEqual([{ qname: "next.long.copy.test." }]);
    } finally {
      await db.query(`DROP TRIGGER refuse ON ${t}`);
    }
  });
});
