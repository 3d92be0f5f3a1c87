// The cache's plugin routes over the real API, with real DNS (UDP) through `cache` in front of
// `forward` to a counting upstream: cursor paging over 1 000 entries while they change, every status
// code of entries / DELETE entries/<id> / load_dump, the row shape, and dump → flush → load_dump.
import { afterAll, beforeAll, expect, test } from "vitest";
import { QTYPE, RCODE } from "../../src/dns/constants.js";
import { decodeMessage, type Message } from "../../src/dns/message.js";
import { answerIps, query, buildQuery, rcodeOf, udpBurst, udpExchange } from "../helpers/dns.js";
import { answerWith, startResponder, type Responder } from "../helpers/responder.js";
import { startSluice, type RunningSluice } from "../helpers/sluice.js";
import { asked, negative, sleep } from "./cache-helpers.js";

/** The address the upstream answers for `name`: one fixed address per name, so answers can be checked. */
function ipFor(name: string): string {
  let h = 0;
  for (const ch of name.toLowerCase()) h = (h * 31 + ch.charCodeAt(0)) % 65_521;
  return `10.${(h >> 8) & 0xff}.${h & 0xff}.${(name.length % 250) + 1}`;
}

let up: Responder;
let s: RunningSluice;
beforeAll(async () => {
  up = await startResponder((q: Message) => {
    const { name, type } = q.questions[0];
    const lower = name.toLowerCase();
    if (lower.startsWith("nx.")) return negative(q, RCODE.NXDOMAIN, 600, 45);
    if (type === QTYPE.AAAA) return answerWith(q, ["2001:db8::1", "2001:db8::2"], 120);
    return answerWith(q, [ipFor(lower)], 300);
  });
  s = await startSluice(`
api:
  http: 127.0.0.1:0
plugins:
  - tag: c
    type: cache
    args: { size: 10000 }
  - tag: main
    type: sequence
    args:
      - exec: $c
      - matches: "!has_resp"
        exec: forward 127.0.0.1:${up.port}
  - { tag: udp, type: udp_server, args: { entry: main, listen: "127.0.0.1:0" } }
`);
});
afterAll(async () => {
  await s.stop();
  await up.close();
});

interface Reply {
  status: number;
  headers: Headers;
  body: Buffer;
  json: Record<string, unknown>;
}

async function call(path: string, init: RequestInit = {}): Promise<Reply> {
  const res = await s.api(path, init);
  const body = Buffer.from(await res.arrayBuffer());
  let json: Record<string, unknown> = {};
  if ((res.headers.get("content-type") ?? "").startsWith("application/json")) json = JSON.parse(body.toString("utf8")) as Record<string, unknown>;
  return { status: res.status, headers: res.headers, body, json };
}

interface Row {
  id: string;
  domain: string;
  [field: string]: unknown;
}
interface Page {
  ok: boolean;
  entries: Row[];
  next_cursor: string | null;
  total_entries: number;
}

async function page(query: string): Promise<Page> {
  const r = await call(`/api/plugins/c/entries${query}`);
  expect(r.status, JSON.stringify(r.json)).toBe(200);
  return r.json as unknown as Page;
}

/** Every entry's id and domain, newest first, through the cursor. */
async function allRows(): Promise<Row[]> {
  const rows: Row[] = [];
  let cursor: string | null = null;
  do {
    const p: Page = await page(`?limit=500${cursor ? `&cursor=${cursor}` : ""}`);
    rows.push(...p.entries);
    cursor = p.next_cursor;
  } while (cursor !== null);
  return rows;
}

async function flush(): Promise<void> {
  expect((await call("/api/plugins/c/flush", { method: "POST" })).status).toBe(200);
}

/** Asks each name once over UDP (A); every one must be answered with its address. */
async function fill(names: string[]): Promise<void> {
  const packets = names.map((n, i) => buildQuery(n, "A", { id: i + 1 }));
  const answers = await udpBurst(s.udpPort, packets, { perTick: 20, timeoutMs: 10_000 });
  expect(answers.size).toBe(names.length);
  for (const [id, raw] of answers) expect(answerIps(decodeMessage(raw))).toEqual([ipFor(names[id - 1])]);
}

test("cursor paging over 1 000 entries visits each exactly once while names are added and old ones hit between pages", async () => {
  await flush();
  const names = Array.from({ length: 1000 }, (_, i) => `p${i}.page.test`);
  await fill(names);
  const upstreamBefore = up.seen.length;
  expect((await page("?limit=1")).total_entries).toBe(1000);

  const visits = new Map<string, number>();
  let cursor: string | null = null;
  let pages = 0;
  let added = 0;
  do {
    const p: Page = await page(`?limit=97${cursor ? `&cursor=${cursor}` : ""}`);
    pages++;
    expect(p.ok).toBe(true);
    expect(p.total_entries).toBe(1000 + added);
    expect(p.entries.length).toBe(p.next_cursor === null ? 1000 - 97 * (pages - 1) : 97);
    for (const row of p.entries) visits.set(row.domain, (visits.get(row.domain) ?? 0) + 1);
    cursor = p.next_cursor;
    // Between pages: five new names stored, five old ones answered from the cache again.
    for (let k = 0; k < 5; k++) {
      await query(s.udpPort, `new${pages}-${k}.page.test`);
      added++;
      const old = names[(pages * 131 + k * 17) % 1000];
      expect(answerIps(await query(s.udpPort, old))).toEqual([ipFor(old)]);
    }
  } while (cursor !== null);

  expect(pages).toBe(11);
  // Each of the 1 000 exactly once; names stored after the first page was read are not part of this walk.
  expect([...visits.entries()].filter(([, n]) => n !== 1)).toEqual([]);
  expect([...visits.keys()].sort()).toEqual([...names].sort());
  // The old names were hits: only the new ones reached the upstream.
  expect(up.seen.length - upstreamBefore).toBe(added);
  // A fresh walk sees everything stored now, each once.
  const now = await allRows();
  expect(now).toHaveLength(1000 + added);
  expect(new Set(now.map((r) => r.id)).size).toBe(1000 + added);

  // qname: a case-insensitive substring of the question name.
  const filtered = await page("?qname=P99");
  expect(filtered.total_entries).toBe(11);
  expect(filtered.entries.map((r) => r.domain).sort()).toEqual(["p99.page.test", ...Array.from({ length: 10 }, (_, i) => `p99${i}.page.test`)].sort());
  // Without a limit, a page holds 100.
  expect((await page("")).entries).toHaveLength(100);
  expect((await page("?limit=500")).entries).toHaveLength(500);
});

test("entries, DELETE entries/<id> and load_dump answer every status code with the one error shape", async () => {
  await flush();
  await fill(["a.codes.test", "b.codes.test", "c.codes.test"]);
  const errorOf = async (path: string, init: RequestInit = {}): Promise<[number, unknown]> => {
    const r = await call(path, init);
    expect(r.json).toEqual({ ok: false, code: expect.any(String) as string, message: expect.any(String) as string });
    return [r.status, r.json.code];
  };
  for (const q of ["limit=0", "limit=abc", "limit=501", "limit=-1", "limit=1.5", "cursor=nonsense", "cursor=b!", "unknown=1"]) {
    expect(await errorOf(`/api/plugins/c/entries?${q}`), q).toEqual([400, "invalid_query"]);
  }
  // A well-formed cursor that this cache never handed out: a bare stamp, or a stamp with another's MAC.
  const issued = (await page("?limit=1")).next_cursor as string;
  const [, mac] = issued.split(".");
  for (const forged of ["b1", "b2", `b1.${mac}`, `bzz.${mac}`, `${issued.split(".")[0]}.${"A".repeat(16)}`]) {
    expect(await errorOf(`/api/plugins/c/entries?cursor=${forged}`), forged).toEqual([400, "invalid_query"]);
  }
  expect((await page(`?limit=1&cursor=${issued}`)).entries).toHaveLength(1);

  const [row] = (await page("?qname=b.codes")).entries;
  const del = await call(`/api/plugins/c/entries/${row.id}`, { method: "DELETE" });
  expect([del.status, del.json]).toEqual([200, { ok: true, deleted: true }]);
  expect(await errorOf(`/api/plugins/c/entries/${row.id}`, { method: "DELETE" })).toEqual([404, "cache_entry_not_found"]);
  // Ids that this cache could not have handed out: not base64url, or not a key once decoded.
  for (const bad of ["not*an*id", Buffer.from("hello").toString("base64url"), `${row.id}x`, "%20"]) {
    expect(await errorOf(`/api/plugins/c/entries/${bad}`, { method: "DELETE" }), bad).toEqual([400, "invalid_cache_entry_id"]);
  }
  // The deleted entry is really gone: the next query goes upstream; the others are still hits.
  const before = asked(up, "b.codes.test");
  await query(s.udpPort, "b.codes.test");
  await query(s.udpPort, "a.codes.test");
  expect(asked(up, "b.codes.test")).toBe(before + 1);
  expect(asked(up, "a.codes.test")).toBe(1);

  // load_dump with bytes that are no dump: 400, and the cache is exactly as it was.
  const identity = (r: Row): unknown[] => [r.id, r.domain, r.cached_at_ms, r.expires_at_ms, r.answers];
  const rows = await allRows();
  expect(rows).toHaveLength(3);
  const dump = (await call("/api/plugins/c/dump")).body;
  const altered = Buffer.from(dump);
  altered[altered.length - 5] ^= 0xff;
  for (const garbage of [Buffer.from("this is not a cache dump"), Buffer.alloc(0), dump.subarray(0, dump.length - 7), altered]) {
    const body = new Uint8Array(garbage);
    expect(await errorOf("/api/plugins/c/load_dump", { method: "POST", body, headers: { "content-type": "application/octet-stream" } })).toEqual([400, "invalid_cache_dump"]);
    expect((await allRows()).map(identity)).toEqual(rows.map(identity));
  }

  // Routes exist only for a cache of the running configuration.
  expect(await errorOf("/api/plugins/nope/entries")).toEqual([404, "plugin_route_not_found"]);
  expect(await errorOf("/api/plugins/main/entries")).toEqual([404, "plugin_route_not_found"]);
  expect(await errorOf("/api/plugins/udp/flush", { method: "POST" })).toEqual([404, "plugin_route_not_found"]);
});

test("a row carries every field with the values the stored answer implies", async () => {
  await flush();
  const started = Date.now();
  // A with DO and CD set; AAAA with two answers; a negative answer whose SOA minimum (45) sets its TTL.
  const plain = buildQuery("Shape.Test", "A", { dnssecOk: true, id: 7 });
  plain[3] |= 0x10;
  expect(await udpExchange(s.udpPort, plain)).not.toBeNull();
  expect((await query(s.udpPort, "six.shape.test", "AAAA")).answers).toHaveLength(2);
  expect(rcodeOf(await query(s.udpPort, "nx.shape.test"))).toBe(RCODE.NXDOMAIN);
  const stored = Date.now();

  const p = await page("?qname=shape.test");
  expect(p.total_entries).toBe(3);
  const byDomain = new Map(p.entries.map((r) => [r.domain, r]));
  const time = { cached_at_ms: expect.any(Number) as number, expires_at_ms: expect.any(Number) as number, last_access_ms: expect.any(Number) as number, remaining_ttl: expect.any(Number) as number };
  const a = byDomain.get("shape.test");
  expect(a).toEqual({
    id: expect.stringMatching(/^[A-Za-z0-9_-]+$/) as string,
    domain: "shape.test",
    qtype: "A",
    qclass: "IN",
    rcode: "NOERROR",
    answer_count: 1,
    authority_count: 0,
    additional_count: 0,
    ttl: 300,
    fresh: true,
    stale: false,
    do_bit: true,
    cd_bit: true,
    ecs: null,
    ...time,
    answers: [{ name: "Shape.Test.", class: "IN", ttl: 300, rr_type: "A", payload_kind: "a", payload_text: ipFor("shape.test"), payload: { address: ipFor("shape.test") } }],
  });
  expect(byDomain.get("six.shape.test")).toMatchObject({
    qtype: "AAAA",
    rcode: "NOERROR",
    answer_count: 2,
    ttl: 120,
    do_bit: false,
    cd_bit: false,
    answers: ["2001:db8::1", "2001:db8::2"].map((ip) => ({ name: "six.shape.test.", class: "IN", ttl: 120, rr_type: "AAAA", payload_kind: "aaaa", payload_text: ip, payload: { address: ip } })),
  });
  expect(byDomain.get("nx.shape.test")).toMatchObject({ qtype: "A", rcode: "NXDOMAIN", answer_count: 0, authority_count: 1, ttl: 45, fresh: true, stale: false, answers: [] });
  for (const row of p.entries) {
    const r = row as unknown as Record<string, number>;
    expect(r.cached_at_ms).toBeGreaterThanOrEqual(started - 50);
    expect(r.cached_at_ms).toBeLessThanOrEqual(stored + 50);
    expect(r.expires_at_ms - r.cached_at_ms).toBe(r.ttl * 1000);
    expect(r.remaining_ttl).toBeLessThanOrEqual(r.ttl);
    expect(r.remaining_ttl).toBeGreaterThanOrEqual(r.ttl - 2);
    expect(r.last_access_ms).toBe(r.cached_at_ms);
  }
  // A hit moves last_access_ms, and only that.
  await sleep(60);
  const hit = buildQuery("shape.test", "A", { dnssecOk: true });
  hit[3] |= 0x10;
  expect(decodeMessage((await udpExchange(s.udpPort, hit)) as Buffer).answers).toHaveLength(1);
  const [again] = (await page("?qname=shape.test&limit=500")).entries.filter((r) => r.domain === "shape.test");
  expect(again.last_access_ms as number).toBeGreaterThanOrEqual((a?.cached_at_ms as number) + 50);
  expect({ ...again, last_access_ms: 0, remaining_ttl: 0 }).toEqual({ ...a, last_access_ms: 0, remaining_ttl: 0 });
});

test("dump → flush → load_dump serves the same names from the cache; flush is POST only, GET answers 405", async () => {
  await flush();
  const names = Array.from({ length: 20 }, (_, i) => `d${i}.dump.test`);
  await fill(names);
  const rowsBefore = await allRows();

  const dump = await call("/api/plugins/c/dump");
  expect(dump.status).toBe(200);
  expect(dump.headers.get("content-type")).toBe("application/octet-stream");
  expect(dump.headers.get("content-disposition")).toBe('attachment; filename="c.dump"');
  expect(dump.body.length).toBeGreaterThan(20 * 30);

  const cleared = await call("/api/plugins/c/flush", { method: "POST" });
  expect([cleared.status, cleared.json]).toEqual([200, { ok: true, cleared_entries: 20 }]);
  expect((await page("")).total_entries).toBe(0);

  // Any content type, or none (fetch sends none for bytes), is read as the dump.
  const loaded = await call("/api/plugins/c/load_dump", { method: "POST", body: new Uint8Array(dump.body) });
  expect([loaded.status, loaded.json]).toEqual([200, { ok: true, loaded_entries: 20 }]);
  expect((await allRows()).map((r) => [r.id, r.domain])).toEqual(rowsBefore.map((r) => [r.id, r.domain]));

  // Every name is answered again, correctly, and the upstream hears of none of them.
  const seen = up.seen.length;
  for (const n of names) expect(answerIps(await query(s.udpPort, n))).toEqual([ipFor(n)]);
  expect(up.seen.length).toBe(seen);

  // GET changes nothing: 405 naming the method to use, and every entry is still served from the cache.
  const getFlush = await call("/api/plugins/c/flush");
  expect(getFlush.status).toBe(405);
  expect(getFlush.headers.get("allow")).toBe("POST");
  expect(getFlush.json).toEqual({ ok: false, code: "method_not_allowed", message: "GET does not change anything here: use POST /api/plugins/c/flush" });
  expect((await page("")).total_entries).toBe(20);
  const postFlush = await call("/api/plugins/c/flush", { method: "POST" });
  expect([postFlush.status, postFlush.json]).toEqual([200, { ok: true, cleared_entries: 20 }]);
  await query(s.udpPort, names[0]);
  expect(up.seen.length).toBe(seen + 1);
});
