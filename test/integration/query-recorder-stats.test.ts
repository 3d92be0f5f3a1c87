// The recorder's stats routes against known traffic: every count exact, latency figures equal to
// what the records themselves say, and a run of 12 000 queries counted whole (sample_size 12 000)
// by every route, the same whether the rollups or the raw rows answer.
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { buildQuery, udpBurst, udpExchange } from "../helpers/dns.js";
import { deadUdpPort } from "../helpers/responder.js";
import { startSluice, type RunningSluice } from "../helpers/sluice.js";
import { allRecords, apiJson, committed, type RecordJson } from "./recorder-helpers.js";

let s: RunningSluice;
const R = "/api/plugins/rec";
const B = "/api/plugins/bulk";

interface Rows<T = { key: string; count: number; share: number }> {
  ok: boolean;
  sample_size: number;
  rows: T[];
}

async function sendAll(port: number, host: string, name: string, type: string, n: number): Promise<void> {
  for (let i = 0; i < n; i++) await udpExchange(port, buildQuery(name, type), 3000, host);
}

beforeAll(async () => {
  const dead = await deadUdpPort();
  s = await startSluice(`api:
  http: 127.0.0.1:0
plugins:
  - { tag: local, type: hosts, args: { entries: ["a0.stats.test 192.0.2.10", "a1.stats.test 192.0.2.11", "a2.stats.test 192.0.2.12"] } }
  - { tag: is_aaaa, type: qtype, args: [28] }
  - { tag: is_blocked, type: qname, args: ["domain:blocked.test"] }
  - { tag: is_silent, type: qname, args: ["domain:silent.test"] }
  - { tag: is_failing, type: qname, args: ["domain:fail.test"] }
  - { tag: is_bulk, type: qname, args: ["domain:bulk.test"] }
  - { tag: rec, type: query_recorder, args: { path: rec.db, flush_interval_ms: 20 } }
  - { tag: bulk, type: query_recorder, args: { path: bulk.db, flush_interval_ms: 50, queue_size: 100000 } }
  - { tag: dead, type: forward, args: { upstreams: [{ addr: "127.0.0.1:${dead}", timeout: 1 }] } }
  - tag: main
    type: sequence
    args:
      - { matches: $is_bulk, exec: goto bulk_main }
      - exec: $rec
      - { matches: $is_aaaa, exec: reject 5 }
      - { matches: $is_blocked, exec: reject 3 }
      - { matches: $is_silent, exec: return }
      - { matches: $is_failing, exec: $dead }
      - exec: $local
  - tag: bulk_main
    type: sequence
    args:
      - exec: $bulk
      - exec: reject 0
  - { tag: udp, type: udp_server, args: { entry: main, listen: "127.0.0.1:0" } }
  - { tag: udp6, type: udp_server, args: { entry: main, listen: "[::1]:0" } }
`);
  const v4 = s.port("udp");
  for (let i = 0; i < 30; i++) await udpExchange(v4, buildQuery(`a${i % 3}.stats.test`, "A"));
  await sendAll(v4, "127.0.0.1", "ads.blocked.test", "A", 10);
  await sendAll(v4, "127.0.0.1", "x.silent.test", "A", 5);
  await sendAll(v4, "127.0.0.1", "a0.stats.test", "AAAA", 4);
  await sendAll(v4, "127.0.0.1", "y.fail.test", "A", 3);
  await sendAll(s.port("udp6"), "::1", "a1.stats.test", "A", 6);
  await committed(s, "rec", 58);
});

afterAll(async () => {
  await s?.stop();
});

describe("known traffic (58 queries)", () => {
  test("rcode, qtype, top_clients and top_qnames count every record", async () => {
    const share = (n: number): number => n / 58;
    expect(await apiJson<Rows>(s, `${R}/stats/rcode`)).toEqual({
      ok: true,
      sample_size: 58,
      rows: [
        { key: "NOERROR", count: 36, share: share(36) },
        { key: "NXDOMAIN", count: 10, share: share(10) },
        { key: "_NO_RESPONSE", count: 5, share: share(5) },
        { key: "REFUSED", count: 4, share: share(4) },
        { key: "_ERROR", count: 3, share: share(3) },
      ],
    });
    expect(await apiJson<Rows>(s, `${R}/stats/qtype`)).toEqual({ ok: true, sample_size: 58, rows: [{ key: "A", count: 54, share: share(54) }, { key: "AAAA", count: 4, share: share(4) }] });
    expect(await apiJson<Rows>(s, `${R}/stats/top_clients`)).toEqual({ ok: true, sample_size: 58, rows: [{ key: "127.0.0.1", count: 52, share: share(52), client_ip: "127.0.0.1", client_name: null }, { key: "::1", count: 6, share: share(6), client_ip: "::1", client_name: null }] });
    const names = await apiJson<Rows>(s, `${R}/stats/top_qnames`);
    expect(names.rows.map((r) => [r.key, r.count])).toEqual([
      ["a1.stats.test.", 16],
      ["a0.stats.test.", 14],
      ["a2.stats.test.", 10],
      ["ads.blocked.test.", 10],
      ["x.silent.test.", 5],
      ["y.fail.test.", 3],
    ]);
    expect((await apiJson<Rows>(s, `${R}/stats/top_qnames?limit=2`)).rows.map((r) => r.key)).toEqual(["a1.stats.test.", "a0.stats.test."]);
    // Filters narrow the sample; matcher_tag keeps the records in which that matcher matched.
    expect(await apiJson<Rows>(s, `${R}/stats/top_clients?matcher_tag=is_blocked`)).toEqual({ ok: true, sample_size: 10, rows: [{ key: "127.0.0.1", count: 10, share: 1, client_ip: "127.0.0.1", client_name: null }] });
    expect((await apiJson<Rows>(s, `${R}/stats/rcode?client_ip=::1`)).rows).toEqual([{ key: "NOERROR", count: 6, share: 1 }]);
    expect((await apiJson<Rows>(s, `${R}/stats/qtype?status=error`)).sample_size).toBe(3);
  });

  test("plugins: checked, matched, executed and query_total per matcher, executor and builtin", async () => {
    const row = (kind: string, tag: string, checked: number, matched: number, executed: number, total: number): object => ({ kind, tag, checked, matched, executed, query_total: total, query_share: total / 58 });
    const all = await apiJson<Rows<object>>(s, `${R}/stats/plugins`);
    expect(all).toEqual({
      ok: true,
      sample_size: 58,
      rows: [
        row("builtin", "reject", 0, 0, 14, 14),
        row("builtin", "return", 0, 0, 5, 5),
        row("executor", "local", 0, 0, 36, 36),
        row("executor", "dead", 0, 0, 3, 3),
        row("matcher", "is_aaaa", 58, 4, 0, 58),
        row("matcher", "is_blocked", 54, 10, 0, 54),
        row("matcher", "is_silent", 44, 5, 0, 44),
        row("matcher", "is_failing", 39, 3, 0, 39),
      ],
    });
    const matchers = await apiJson<Rows<{ kind: string }>>(s, `${R}/stats/plugins?kind=matcher`);
    expect(matchers.sample_size).toBe(58);
    expect(matchers.rows.map((r) => r.kind)).toEqual(["matcher", "matcher", "matcher", "matcher"]);
    const v6 = await apiJson<Rows<{ tag: string; query_total: number; query_share: number }>>(s, `${R}/stats/plugins?client_ip=::1&kind=executor`);
    expect(v6).toEqual({ ok: true, sample_size: 6, rows: [row("executor", "local", 0, 0, 6, 6)].map((r) => ({ ...r, query_share: 1 })) });
    expect((await apiJson<{ code: string }>(s, `${R}/stats/plugins?kind=server`, undefined, 400)).code).toBe("invalid_query");
  });

  test("latency: average, nearest-rank percentiles, histogram and slowest names agree with the records", async () => {
    const records = await allRecords(s, "rec");
    expect(records).toHaveLength(58);
    const us = records.map((r) => r.elapsed_us).sort((a, b) => a - b);
    // Latencies are kept to three significant digits (exact below 1 ms).
    const bucket = (v: number): number => (v < 1000 ? v : Math.floor(v / 10 ** (String(v).length - 3)) * 10 ** (String(v).length - 3));
    const rank = (q: number): number => bucket(us[Math.max(1, Math.ceil(q * us.length)) - 1]) / 1000;
    const lat = await apiJson<{ sample_size: number; avg_ms: number; p50_ms: number; p95_ms: number; p99_ms: number; max_ms: number; histogram: { lt_ms: number | null; count: number }[]; slow_top: { qname: string; count: number; avg_ms: number; max_ms: number }[] }>(s, `${R}/stats/latency`);
    expect(lat.sample_size).toBe(58);
    expect(lat.avg_ms).toBe(Math.round(us.reduce((a, b) => a + b, 0) / 58) / 1000);
    expect(lat.max_ms).toBe(us[57] / 1000);
    expect([lat.p50_ms, lat.p95_ms, lat.p99_ms]).toEqual([rank(0.5), rank(0.95), rank(0.99)]);
    const edges = [1, 5, 10, 20, 50, 100, 300, 1000];
    expect(lat.histogram.map((h) => h.lt_ms)).toEqual([...edges, null]);
    expect(lat.histogram.map((h) => h.count)).toEqual([...edges, Infinity].map((e, i) => us.filter((v) => v < e * 1000 && (i === 0 || v >= edges[i - 1] * 1000)).length));
    const perName = new Map<string, number[]>();
    for (const r of records) perName.set(r.questions_json[0].name.toLowerCase(), [...(perName.get(r.questions_json[0].name.toLowerCase()) ?? []), r.elapsed_us]);
    const expected = [...perName]
      .map(([qname, v]) => ({ qname, count: v.length, avg: v.reduce((a, b) => a + b, 0) / v.length, max: Math.max(...v) }))
      .sort((a, b) => b.avg - a.avg || b.count - a.count)
      .map((x) => ({ qname: x.qname, count: x.count, avg_ms: Math.round(x.avg) / 1000, max_ms: x.max / 1000 }));
    expect(lat.slow_top).toEqual(expected);
    expect((await apiJson<{ slow_top: unknown[] }>(s, `${R}/stats/latency?slow_limit=2`)).slow_top).toHaveLength(2);
    expect((await apiJson<{ slow_top: unknown[] }>(s, `${R}/stats/latency?limit=3`)).slow_top).toHaveLength(3);
    const none = await apiJson<{ sample_size: number; avg_ms: null; p50_ms: null }>(s, `${R}/stats/latency?qname=nothing-like-this`);
    expect(none).toMatchObject({ sample_size: 0, avg_ms: null, p50_ms: null, slow_top: [] });
  });

  test("timeseries: 60 one-minute points ending now, oldest first, every record in its minute", async () => {
    const records = await allRecords(s, "rec");
    const ts = await apiJson<{ sample_size: number; bucket_ms: number; points: { bucket_ms: number; total: number; error_count: number; no_response_count: number; avg_ms: number; p95_ms: number }[] }>(s, `${R}/stats/timeseries`);
    expect(ts.bucket_ms).toBe(60_000);
    expect(ts.points).toHaveLength(60);
    expect(ts.points[59].bucket_ms).toBe(Math.floor(Date.now() / 60_000) * 60_000);
    for (let i = 1; i < 60; i++) expect(ts.points[i].bucket_ms - ts.points[i - 1].bucket_ms).toBe(60_000);
    expect(ts.sample_size).toBe(58);
    for (const p of ts.points) {
      const inside = records.filter((r) => Math.floor(r.created_at_ms / 60_000) * 60_000 === p.bucket_ms);
      expect(p.total).toBe(inside.length);
      expect(p.error_count).toBe(inside.filter((r) => r.error !== null).length);
      expect(p.no_response_count).toBe(inside.filter((r) => r.error === null && !r.has_response).length);
      expect(p.avg_ms).toBe(inside.length ? Math.round(inside.reduce((a, r) => a + r.elapsed_us, 0) / inside.length) / 1000 : 0);
    }
    const hours = await apiJson<{ points: { total: number }[]; bucket_ms: number }>(s, `${R}/stats/timeseries?bucket=hour&buckets=3`);
    expect(hours.bucket_ms).toBe(3_600_000);
    expect(hours.points.map((p) => p.total).reduce((a, b) => a + b, 0)).toBe(58);
    expect((await apiJson<{ code: string }>(s, `${R}/stats/timeseries?buckets=721`, undefined, 400)).code).toBe("invalid_query");
    expect((await apiJson<{ code: string }>(s, `${R}/stats/timeseries?bucket=day`, undefined, 400)).code).toBe("invalid_query");
  });
});

describe("12 000 queries", () => {
  const routes = ["plugins", "top_clients", "top_qnames", "qtype", "rcode", "latency", "timeseries?bucket=hour&buckets=2"];
  let first: RecordJson;

  beforeAll(async () => {
    const packets = Array.from({ length: 12_000 }, (_, i) => buildQuery(`n${i % 500}.bulk.test`, i % 4 === 0 ? "AAAA" : "A", { id: i % 0x10000 }));
    // Ids repeat past 65 535; answers are collected per id, so send in slices.
    for (let i = 0; i < packets.length; i += 6000) {
      const answers = await udpBurst(s.port("udp"), packets.slice(i, i + 6000), { timeoutMs: 20_000, perTick: 25 });
      expect(answers.size).toBe(6000);
    }
    await committed(s, "bulk", 12_000, 30_000);
    first = (await allRecords(s, "bulk", "", 500)).at(-1) as RecordJson;
  }, 60_000);

  test.each(routes)("stats/%s has sample_size 12 000", async (route) => {
    expect((await apiJson<{ sample_size: number }>(s, `${B}/stats/${route}`)).sample_size).toBe(12_000);
  });

  test("top_qnames and qtype split the 12 000 exactly", async () => {
    const names = await apiJson<Rows>(s, `${B}/stats/top_qnames?limit=1000`);
    expect(names.rows).toHaveLength(500);
    expect(names.rows.every((r) => r.count === 24)).toBe(true);
    expect((await apiJson<Rows>(s, `${B}/stats/qtype`)).rows.map((r) => [r.key, r.count])).toEqual([
      ["A", 9000],
      ["AAAA", 3000],
    ]);
  });

  test.each(routes)("stats/%s: rollups, raw rows and a mix of both give the same answer", async (route) => {
    const sep = route.includes("?") ? "&" : "?";
    const rolled = await apiJson(s, `${B}/stats/${route}`);
    // `qname=.` matches every name and forces the raw path; a since_ms inside a minute makes edges raw.
    const raw = await apiJson(s, `${B}/stats/${route}${sep}qname=.`);
    const mixed = await apiJson(s, `${B}/stats/${route}${sep}since_ms=${first.created_at_ms}`);
    expect(raw).toEqual(rolled);
    expect(mixed).toEqual(rolled);
  });
});
