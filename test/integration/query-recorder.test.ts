// query_recorder over real DNS traffic (UDP from 127.0.0.1 and ::1) and a real SQLite file: every
// field of a record, the execution path, cursor paging over 1 000 records, and every filter of the
// records route against traffic whose shape the test knows.
import Database from "better-sqlite3";
import { hostname } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { EDNS_OPTION } from "../../src/dns/constants.js";
import { encodeEcs } from "../../src/dns/ecs.js";
import { decodeMessage, replyTo, type Message } from "../../src/dns/message.js";
import { buildQuery, rcodeOf, udpExchange, udpBurst } from "../helpers/dns.js";
import { answerWith, deadUdpPort, startResponder, type Responder } from "../helpers/responder.js";
import { startSluice, type RunningSluice } from "../helpers/sluice.js";
import { allRecords, apiJson, committed, type Page, type RecordJson } from "./recorder-helpers.js";

let up: Responder;
let s: RunningSluice;
const R = "/api/plugins/rec";

/** Answers *.up.test: A → two addresses, AAAA → one, nx.* → NXDOMAIN with an SOA; OPT with an NSID option. */
function upstream(q: Message): Message {
  const name = q.questions[0].name.toLowerCase();
  let reply: Message;
  if (name.startsWith("nx.")) {
    reply = replyTo(q, 3);
    const soa = Buffer.concat([Buffer.from([2, 110, 115, 0, 4, 104, 111, 115, 116, 0]), Buffer.from([0, 0, 0, 7, 0, 0, 14, 16, 0, 0, 7, 8, 0, 9, 58, 128, 0, 0, 1, 44])]);
    reply.authorities = [{ name: "up.test", type: 6, class: 1, ttl: 60, data: soa }];
  } else if (q.questions[0].type === 28) {
    reply = answerWith(q, ["2001:db8::1"], 120);
  } else {
    reply = answerWith(q, ["192.0.2.1", "192.0.2.2"], 300);
  }
  reply.edns = { udpSize: 1232, extRcode: 0, version: 0, flags: 0, options: [{ code: EDNS_OPTION.NSID, data: Buffer.from("up1") }] };
  return reply;
}

async function send(name: string, type: string, opts: Parameters<typeof buildQuery>[2] = {}, host = "127.0.0.1"): Promise<Message | null> {
  const port = host === "::1" ? s.port("udp6") : s.port("udp");
  const raw = await udpExchange(port, buildQuery(name, type, opts), 3000, host);
  return raw ? decodeMessage(raw) : null;
}

let t0 = 0;
let t1 = 0;
const ecs = encodeEcs({ family: 1, sourcePrefix: 24, scopePrefix: 0, address: new Uint8Array([198, 51, 100, 0]) });

beforeAll(async () => {
  up = await startResponder((q) => upstream(q));
  const dead = await deadUdpPort();
  s = await startSluice(`api:
  http: 127.0.0.1:0
plugins:
  - { tag: blocklist, type: domain_set, args: { exps: ["domain:blocked.test"] } }
  - { tag: is_blocked, type: qname, args: ["$blocklist"] }
  - { tag: is_silent, type: qname, args: ["domain:silent.test"] }
  - { tag: is_failing, type: qname, args: ["domain:fail.test"] }
  - { tag: rec, type: query_recorder, args: { path: data/rec.db, flush_interval_ms: 20 } }
  - { tag: up, type: forward, args: { upstreams: [{ addr: "127.0.0.1:${up.port}" }] } }
  - { tag: dead, type: forward, args: { upstreams: [{ addr: "127.0.0.1:${dead}", timeout: 1 }] } }
  - tag: main
    type: sequence
    args:
      - exec: $rec
      - { matches: $is_blocked, exec: reject 3 }
      - { matches: $is_silent, exec: return }
      - { matches: $is_failing, exec: $dead }
      - exec: $up
  - { tag: udp, type: udp_server, args: { entry: main, listen: "127.0.0.1:0" } }
  - { tag: udp6, type: udp_server, args: { entry: main, listen: "[::1]:0" } }
`);
  t0 = Date.now();
  await send("A.Up.test", "A", { id: 0x1234, dnssecOk: true, edns: { options: [{ code: EDNS_OPTION.ECS, data: ecs }] } });
  await send("b.up.test", "AAAA");
  await send("nx.up.test", "A");
  await send("ads.blocked.test", "A");
  await send("x.silent.test", "TXT");
  expect(rcodeOf((await send("y.fail.test", "A")) as Message)).toBe(2);
  await send("c.up.test", "A", {}, "::1");
  t1 = Date.now();
  await committed(s, "rec", 7);
});

afterAll(async () => {
  await s?.stop();
  await up?.close();
});

const byName = async (name: string): Promise<RecordJson> => {
  const page = await apiJson<Page>(s, `${R}/records?qname=${encodeURIComponent(name)}`);
  expect(page.records).toHaveLength(1);
  return page.records[0];
};

describe("a record", () => {
  test("has every field of the spec's record, decoded from the real request and response", async () => {
    const r = await byName("a.up.test");
    expect(Object.keys(r).sort()).toEqual(
      [
        "id", "created_at_ms", "elapsed_ms", "elapsed_us", "request_id", "client_ip", "client_name", "client_groups", "instance", "questions_json", "req_rd", "req_cd", "req_ad", "req_opcode", "req_edns_json", "error", "has_response", "rcode",
        "resp_aa", "resp_tc", "resp_ra", "resp_ad", "resp_cd", "answer_count", "authority_count", "additional_count", "answers_json", "authorities_json", "additionals_json", "signature_json", "resp_edns_json",
      ].sort(),
    );
    expect(r.id).toBeGreaterThan(0);
    expect(r.created_at_ms).toBeGreaterThanOrEqual(t0);
    expect(r.created_at_ms).toBeLessThanOrEqual(t1);
    expect(r.elapsed_us).toBeGreaterThan(0);
    expect(r.elapsed_ms).toBe(Math.round(r.elapsed_us / 1000));
    expect(r).toMatchObject({
      request_id: 0x1234,
      client_ip: "127.0.0.1",
      // No clients provider: no name, no groups.
      client_name: null,
      client_groups: [],
      // No cluster section: the host name.
      instance: hostname(),
      // The name as the client wrote it (0x20 case kept).
      questions_json: [{ name: "A.Up.test.", qtype: "A", qclass: "IN" }],
      req_rd: true,
      req_cd: false,
      req_ad: false,
      req_opcode: "QUERY",
      req_edns_json: { udp_payload_size: 1232, ext_rcode: 0, version: 0, dnssec_ok: true, z: 0, options: [{ code: 8, name: "ECS", payload_kind: "ecs", payload: { family: 1, source_prefix: 24, scope_prefix: 0, address: "198.51.100.0" } }] },
      error: null,
      has_response: true,
      rcode: "NOERROR",
      resp_aa: false,
      resp_tc: false,
      resp_ra: true,
      resp_ad: false,
      resp_cd: false,
      answer_count: 2,
      authority_count: 0,
      additional_count: 0,
      authorities_json: [],
      additionals_json: [],
      signature_json: [],
      resp_edns_json: { udp_payload_size: 1232, ext_rcode: 0, version: 0, dnssec_ok: false, z: 0, options: [{ code: 3, name: "NSID", payload_kind: "nsid", payload: { hex: "757031", text: "up1" } }] },
    });
    expect(r.answers_json).toEqual(
      ["192.0.2.1", "192.0.2.2"].map((address) => ({ name: "A.Up.test.", class: "IN", ttl: 300, rr_type: "A", payload_kind: "a", payload_text: address, payload: { address } })),
    );
  });

  test("an NXDOMAIN carries its authority section; an error has no response; a sequence that ends without one is _NO_RESPONSE", async () => {
    const nx = await byName("nx.up.test");
    expect(nx).toMatchObject({ rcode: "NXDOMAIN", has_response: true, answer_count: 0, authority_count: 1 });
    expect((nx.authorities_json as { rr_type: string; payload: object }[])[0]).toMatchObject({ rr_type: "SOA", payload: { mname: "ns.", rname: "host.", serial: 7 } });
    const failed = await byName("y.fail.test");
    expect(failed).toMatchObject({ has_response: false, rcode: null, resp_aa: null, answer_count: 0, answers_json: [] });
    expect(failed.error).toMatch(/ECONNREFUSED|timed out/);
    const silent = await byName("x.silent.test");
    expect(silent).toMatchObject({ has_response: false, rcode: null, error: null, questions_json: [{ name: "x.silent.test.", qtype: "TXT", qclass: "IN" }] });
    expect((await byName("c.up.test")).client_ip).toBe("::1");
  });

  test("records/<id> adds the execution path from the recorder on, with matcher outcomes after negation", async () => {
    const id = (await byName("ads.blocked.test")).id;
    const detail = await apiJson<{ ok: boolean; record: { record: RecordJson; steps: unknown[] } }>(s, `${R}/records/${id}`);
    expect(detail.record.record.id).toBe(id);
    expect(detail.record.record.rcode).toBe("NXDOMAIN");
    expect(detail.record.steps).toEqual([
      { event_index: 0, sequence_tag: "main", node_index: 1, kind: "matcher", tag: "is_blocked", outcome: "matched" },
      { event_index: 1, sequence_tag: "main", node_index: 1, kind: "builtin", tag: "reject", outcome: "stop" },
    ]);
    const fwd = await apiJson<{ record: { steps: { tag: string; outcome: string }[] } }>(s, `${R}/records/${(await byName("b.up.test")).id}`);
    expect(fwd.record.steps.map((x) => `${x.tag}:${x.outcome}`)).toEqual(["is_blocked:not_matched", "is_silent:not_matched", "is_failing:not_matched", "up:entered", "up:next"]);
    const err = await apiJson<{ record: { steps: { tag: string; outcome: string }[] } }>(s, `${R}/records/${(await byName("y.fail.test")).id}`);
    expect(err.record.steps.slice(-2).map((x) => `${x.tag}:${x.outcome}`)).toEqual(["dead:entered", "dead:error"]);
  });

  test("records/<id>: 400 invalid_record_id for ids that are not positive integers, 404 record_not_found", async () => {
    for (const bad of ["0", "-1", "abc", "1.5", "01", "99999999999999999"]) {
      expect((await apiJson<{ code: string }>(s, `${R}/records/${bad}`, undefined, 400)).code, bad).toBe("invalid_record_id");
    }
    const nf = await apiJson<{ code: string; message: string }>(s, `${R}/records/999999`, undefined, 404);
    expect(nf).toMatchObject({ ok: false, code: "record_not_found", message: "record 999999 does not exist" });
  });

  test("the database is a real SQLite file with the v2 tables", async () => {
    const db = new Database(join(s.dir, "data", "rec.db"), { readonly: true });
    try {
      const tables = (db.prepare("SELECT name FROM sqlite_master WHERE type = 'table'").pluck().all() as string[]).sort();
      expect(tables).toEqual(expect.arrayContaining(["records_v2", "questions_v2", "steps_v2", "recorder_schema"]));
      expect(db.prepare("SELECT count(*) FROM records_v2").pluck().get()).toBe(7);
      expect(db.prepare("SELECT count(*) FROM questions_v2").pluck().get()).toBe(7);
      expect(db.prepare("SELECT journal_mode FROM pragma_journal_mode").pluck().get()).toBe("wal");
    } finally {
      db.close();
    }
  });
});

describe("filters", () => {
  const ids = async (query: string): Promise<string[]> => (await allRecords(s, "rec", query)).map((r) => r.questions_json[0]?.name.toLowerCase() ?? "").sort();

  test("qname (case-insensitive substring), client_ip, qtype, rcode, status, matcher_tag, time", async () => {
    expect(await ids("qname=UP.TEST")).toEqual(["a.up.test.", "b.up.test.", "c.up.test.", "nx.up.test."]);
    expect(await ids("qname=.up.test.")).toHaveLength(4);
    expect(await ids("qname=%25")).toEqual([]);
    expect(await ids("qname=_")).toEqual([]);
    expect(await ids("client_ip=%3A%3A1")).toEqual(["c.up.test."]);
    expect(await ids("client_ip=127.0")).toHaveLength(6);
    expect(await ids("qtype=aaaa")).toEqual(["b.up.test."]);
    expect(await ids("qtype=TXT")).toEqual(["x.silent.test."]);
    expect(await ids("rcode=NXDOMAIN")).toEqual(["ads.blocked.test.", "nx.up.test."]);
    expect(await ids("rcode=noerror")).toEqual(["a.up.test.", "b.up.test.", "c.up.test."]);
    expect(await ids("rcode=_ERROR")).toEqual(["y.fail.test."]);
    expect(await ids("status=error")).toEqual(["y.fail.test."]);
    expect(await ids("status=no_response")).toEqual(["x.silent.test."]);
    expect(await ids("status=has_response")).toHaveLength(5);
    expect(await ids("status=all&qname=&rcode=")).toHaveLength(7);
    expect(await ids("matcher_tag=is_blocked")).toEqual(["ads.blocked.test."]);
    expect(await ids("matcher_tag=no_such_matcher")).toEqual([]);
    expect((await ids(`instance=${hostname()}`)).length).toBe((await ids("")).length);
    expect(await ids("instance=some-other-instance")).toEqual([]);
    expect(await ids("qname=up.test&qtype=A&client_ip=127")).toEqual(["a.up.test.", "nx.up.test."]);
    const all = await allRecords(s, "rec");
    const mid = all.find((r) => r.questions_json[0]?.name === "nx.up.test.") as RecordJson;
    expect(await ids(`since_ms=${mid.created_at_ms}&until_ms=${mid.created_at_ms}`)).toContain("nx.up.test.");
    expect((await ids(`since_ms=${t1 + 60_000}`)).length).toBe(0);
    expect((await ids(`until_ms=${t0 - 1}`)).length).toBe(0);
  });

  test("bad values are 400 invalid_query", async () => {
    for (const q of ["limit=0", "limit=501", "limit=x", "cursor=abc", "cursor=1:2:3", "qtype=NOPE", "rcode=NOPE", "status=maybe", "since_ms=-1", "since_ms=5&until_ms=4", "since_ms=1.5", "instance=a%20b", "instance=.x"]) {
      const body = await apiJson<{ ok: boolean; code: string; message: string }>(s, `${R}/records?${q}`, undefined, 400);
      expect(body, q).toMatchObject({ ok: false, code: "invalid_query" });
      expect(body.message.length, q).toBeGreaterThan(5);
    }
  });
});

test("paging 1 000 records with a cursor visits each record once, newest first", async () => {
  const before = (await allRecords(s, "rec")).length;
  const packets = Array.from({ length: 1000 }, (_, i) => buildQuery(`p${i}.page.up.test`, "A", { id: i }));
  const answers = await udpBurst(s.port("udp"), packets, { timeoutMs: 15_000, perTick: 20 });
  expect(answers.size).toBe(1000);
  await committed(s, "rec", before + 1000);
  const seen: RecordJson[] = [];
  let cursor: string | null = null;
  let pages = 0;
  do {
    const page: Page = await apiJson<Page>(s, `${R}/records?qname=page.up.test&limit=37${cursor ? `&cursor=${cursor}` : ""}`);
    seen.push(...page.records);
    cursor = page.next_cursor;
    pages++;
  } while (cursor !== null);
  expect(pages).toBe(Math.ceil(1000 / 37));
  expect(new Set(seen.map((r) => r.id)).size).toBe(1000);
  expect(new Set(seen.map((r) => r.questions_json[0].name)).size).toBe(1000);
  for (let i = 1; i < seen.length; i++) {
    const [a, b] = [seen[i - 1], seen[i]];
    expect(a.created_at_ms > b.created_at_ms || (a.created_at_ms === b.created_at_ms && a.id > b.id)).toBe(true);
  }
});
