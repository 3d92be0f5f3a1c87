// Pieces of the query recorder that need no process: the batch format between the DNS thread and the
// writer, the split of a time range into rollup buckets and raw edges, and the filters.
import { describe, expect, test } from "vitest";
import type { PathEvent } from "../../src/engine/context.js";
import type { ClientIdentity } from "../../src/engine/clients.js";
import { BatchBuilder, ClientTable, KIND_CODES, NO_CLIENT, OUTCOME_CODES, readBatch, StringTable } from "../../src/plugins/executors/query-recorder/batch.js";
import { filterSql, onlyTime, parseFilter } from "../../src/plugins/executors/query-recorder/filters.js";
import { HOUR_MS, LATENCY_HOURS, LATENCY_MINUTES, MINUTE_MS } from "../../src/plugins/executors/query-recorder/rollups.js";
import { OUTCOME_ERROR, OUTCOME_NO_RESPONSE } from "../../src/plugins/executors/query-recorder/schema.js";
import { plan } from "../../src/plugins/executors/query-recorder/stats.js";
import { RouteError } from "../../src/registry/control.js";

describe("batches", () => {
  const identity = (name: string | null, groups: string[]): ClientIdentity => ({ name, groups, memberOf: new Set(name === null ? groups : [name, ...groups]), paused: false });

  test("what the DNS thread appends is what the writer reads, across growth and many addresses", () => {
    const strings = new StringTable();
    const clients = new ClientTable();
    // Equal group sets of different identities share one set; a client seen but not named has groups and no name.
    const identities = [null, identity("annas-phone", ["kids", "guests"]), identity(null, ["guests"]), identity("tv", ["kids", "guests"]), identity("laptop", [])];
    const b = new BatchBuilder(64);
    const path: PathEvent[] = [
      { sequenceTag: "outer", nodeIndex: 0, kind: "executor", tag: "before", outcome: "entered" },
      { sequenceTag: "main", nodeIndex: 3, kind: "matcher", tag: "is_ads", outcome: "not_matched" },
      { sequenceTag: "main", nodeIndex: null, kind: "builtin", tag: "reject", outcome: "stop" },
    ];
    const want = Array.from({ length: 300 }, (_, i) => ({
      createdAtMs: 1_795_000_000_000 + i + 0.25,
      elapsedUs: i * 1000 + 7,
      query: Buffer.from(Array.from({ length: 20 + (i % 7) }, (_, j) => (i + j) & 0xff)),
      response: i % 3 === 0 ? null : Buffer.alloc(30 + i, i & 0xff),
      clientIp: i % 2 === 0 ? `192.0.2.${i % 50}` : `2001:db8::${i}`,
      clientName: identities[i % 5]?.name ?? null,
      clientGroups: identities[i % 5]?.groups ?? [],
      error: i % 5 === 0 ? `upstream «${i}» failed` : null,
    }));
    want.forEach((r, i) => {
      const who = identities[i % 5];
      b.append(r.createdAtMs, r.elapsedUs, r.query, r.response, r.clientIp, who === null ? NO_CLIENT : clients.of(who), r.error, path, 1, strings);
    });
    expect(b.count).toBe(300);
    expect(clients.names.list).toEqual(["annas-phone", "tv", "laptop"]);
    expect(clients.sets).toEqual([[], ["kids", "guests"], ["guests"]]);
    // The same identity object is one lookup: the very reference it was given before.
    expect(clients.of(identities[1] as ClientIdentity)).toBe(clients.of(identities[1] as ClientIdentity));
    const got = readBatch(b.take(), b.count, strings.list, b.ips, { names: clients.names.list, sets: clients.sets });
    expect(got).toHaveLength(300);
    got.forEach((r, i) => {
      const w = want[i];
      expect({ ...r, query: [...r.query], response: r.response && [...r.response] }).toEqual({
        ...w,
        query: [...w.query],
        response: w.response && [...w.response],
        steps: path.slice(1).map((e) => ({ sequenceTag: e.sequenceTag, nodeIndex: e.nodeIndex, kind: KIND_CODES[e.kind], tag: e.tag, outcome: OUTCOME_CODES[e.outcome] })),
      });
    });
  });
});

describe("plan", () => {
  /** Every ms of [lo, hi] is covered exactly once by the rollup buckets and the raw ranges. */
  function covers(lo: number, hi: number): void {
    const p = plan(lo, hi, [LATENCY_HOURS, LATENCY_MINUTES]);
    const pieces: [number, number][] = [...p.raw, ...p.rollups.map(({ r, a, b }): [number, number] => [a * r.bucketMs, (b + 1) * r.bucketMs - 1])].sort((x, y) => x[0] - y[0]);
    expect(pieces[0][0]).toBe(lo);
    expect(pieces[pieces.length - 1][1]).toBe(hi);
    for (let i = 1; i < pieces.length; i++) expect(pieces[i][0], JSON.stringify(pieces)).toBe(pieces[i - 1][1] + 1);
    // Raw rows are read for less than a minute at each end (two partial minutes when no whole one fits).
    for (const [a, b] of p.raw) expect(b - a).toBeLessThan(2 * MINUTE_MS);
  }

  test("whole hours come from the hour rollup, whole minutes at the edges from the minute rollup, the rest raw", () => {
    const h = 500_000 * HOUR_MS;
    covers(h, h + 3 * HOUR_MS - 1);
    covers(h + 1234, h + 5 * HOUR_MS + 17 * MINUTE_MS + 999);
    covers(h + 59 * MINUTE_MS + 1, h + HOUR_MS + 30);
    covers(h + 5, h + 6);
    const p = plan(h + 1234, h + 5 * HOUR_MS + 17 * MINUTE_MS + 999, [LATENCY_HOURS, LATENCY_MINUTES]);
    expect(p.rollups.map(({ r, a, b }) => [r.table, a, b])).toEqual([
      ["rollup_latency_hours_v2", 500_001, 500_004],
      ["rollup_latency_minutes_v2", 500_000 * 60 + 1, 500_000 * 60 + 59],
      ["rollup_latency_minutes_v2", 500_005 * 60, 500_005 * 60 + 16],
    ]);
  });

  test("an open range is all rollups", () => {
    const p = plan(0, Number.MAX_SAFE_INTEGER, [LATENCY_HOURS, LATENCY_MINUTES]);
    expect(p.raw).toEqual([]);
    expect(p.rollups).toHaveLength(1);
  });
});

describe("filters", () => {
  test("values are parsed and normalised; empty ones are absent", () => {
    expect(parseFilter({})).toEqual({ sinceMs: null, untilMs: null, qname: null, clientIp: null, qtype: null, outcome: null, status: "all", matcherTag: null, instance: null, clientName: null, group: null });
    expect(onlyTime(parseFilter({ since_ms: 5, qname: " ", rcode: "" }))).toBe(true);
    const f = parseFilter({ qname: " Example.COM ", client_ip: "FD00::", qtype: "aaaa", rcode: "nxdomain", status: "ERROR", matcher_tag: "ads" });
    expect(f).toMatchObject({ qname: "example.com", clientIp: "fd00::", qtype: 28, outcome: 3, status: "error", matcherTag: "ads" });
    expect(parseFilter({ rcode: "_error" }).outcome).toBe(OUTCOME_ERROR);
    expect(parseFilter({ rcode: "_NO_RESPONSE" }).outcome).toBe(OUTCOME_NO_RESPONSE);
    expect(parseFilter({ qtype: "TYPE65" }).qtype).toBe(65);
    expect(parseFilter({ instance: " sluice-a " }).instance).toBe("sluice-a");
    expect(onlyTime(parseFilter({ instance: "b" }))).toBe(false);
    expect(parseFilter({ client_name: " Annas-Phone ", group: "kids" })).toMatchObject({ clientName: "Annas-Phone", group: "kids" });
    expect(onlyTime(parseFilter({ client_name: "tv" }))).toBe(false);
    expect(onlyTime(parseFilter({ group: "kids" }))).toBe(false);
  });

  test.each([{ qtype: "NOPE" }, { rcode: "FAILED" }, { status: "some" }, { since_ms: 10, until_ms: 9 }, { since_ms: "x" }, { qname: "a".repeat(300) }, { instance: "a b" }, { instance: "-x" }, { instance: "a".repeat(254) }, { client_name: "anna phone" }, { client_name: "-x" }, { group: "a,b" }, { group: "k".repeat(64) }])("%j is invalid_query", (q) => {
    let err: unknown;
    try {
      parseFilter(q);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(RouteError);
    expect((err as RouteError).code).toBe("invalid_query");
  });

  test("LIKE wildcards in a substring are literal", () => {
    const { params } = filterSql(parseFilter({ qname: "a%b_c\\d" }));
    expect(params[0]).toBe("%a\\%b\\_c\\\\d%");
  });
});
