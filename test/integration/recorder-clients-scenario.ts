// Client names and groups in the query recorder, as one scenario both stores run (SQLite:
// recorder-clients.test.ts, PostgreSQL: recorder-clients-postgres.test.ts): a `clients` provider
// names 127.0.0.x sources (127.0.0.0/8 is all local on Linux), queries come from them over real UDP,
// then records, filters, stats and the stream are read through the API; a reload renames a client.

import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { expect } from "vitest";
import type { RunningSluice } from "../helpers/sluice.js";
import { openSse } from "../helpers/sse.js";
import { allRecords, apiJson, committed, until, type RecordJson } from "./recorder-helpers.js";
import { rcodeFrom } from "../helpers/client-source.js";

/** One query from `source` (a local address); resolves with the answer's rcode. */
export const askFrom = rcodeFrom;

const R = "/api/plugins/rec";


/**
 * annas-phone at .2 (kids) and .17 (kids, and guests by the group's addresses), tv at .3 (no group),
 * .20 unnamed in guests, .1 unnamed in no group. `tvName` renames the tv (the reload).
 */
export function clientsConfig(store: string, tvName = "tv"): string {
  return `
api: { http: "127.0.0.1:0" }
plugins:
  - tag: clients
    type: clients
    args:
      clients:
        - { name: annas-phone, addresses: [127.0.0.2, 127.0.0.17], groups: [kids] }
        - { name: ${tvName}, addresses: [127.0.0.3] }
      groups:
        - { name: kids }
        - { name: guests, addresses: [127.0.0.16/28] }
      neighbour_refresh: 0s
  - { tag: rec, type: query_recorder, args: { ${store}, flush_interval_ms: 20 } }
  - tag: main
    type: sequence
    args:
      - exec: $rec
      - exec: reject 0
  - { tag: udp, type: udp_server, args: { entry: main, listen: "127.0.0.1:0" } }
`;
}

const pause = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** The traffic: 1 from .1, 1 from .3, 2 from .20, 2 from .2, then (a few ms later, so it is the newest) 3 from .17. */
export async function sendTraffic(s: RunningSluice): Promise<void> {
  const port = s.port("udp");
  const plan: [string, number][] = [
    ["127.0.0.1", 1],
    ["127.0.0.3", 1],
    ["127.0.0.20", 2],
    ["127.0.0.2", 2],
  ];
  for (const [source, n] of plan) for (let i = 0; i < n; i++) expect(await askFrom(source, port, `q${i}.${source.split(".")[3]}.clients.test`)).toBe(0);
  // Records carry arrival times in ms: the phone's last address is the newest by a clear margin.
  await pause(5);
  for (let i = 0; i < 3; i++) expect(await askFrom("127.0.0.17", port, `q${i}.17.clients.test`)).toBe(0);
  await committed(s, "rec", 9);
}

interface TopRow {
  key: string;
  count: number;
  share: number;
  client_ip: string;
  client_name: string | null;
}

const top = async (s: RunningSluice, query = ""): Promise<Omit<TopRow, "share">[]> =>
  (await apiJson<{ rows: TopRow[] }>(s, `${R}/stats/top_clients${query}`)).rows.map(({ key, count, client_ip, client_name }) => ({ key, count, client_ip, client_name }));

const who = (records: RecordJson[]): string[] => records.map((r) => `${r.client_ip} ${String(r.client_name)} [${(r.client_groups as string[]).join(",")}]`).sort();

/** Records, filters, stats after sendTraffic. */
export async function checkNamesAndGroups(s: RunningSluice): Promise<void> {
  const all = await allRecords(s, "rec");
  expect(all).toHaveLength(9);
  expect(who(all)).toEqual([
    "127.0.0.1 null []",
    "127.0.0.17 annas-phone [kids,guests]",
    "127.0.0.17 annas-phone [kids,guests]",
    "127.0.0.17 annas-phone [kids,guests]",
    "127.0.0.2 annas-phone [kids]",
    "127.0.0.2 annas-phone [kids]",
    "127.0.0.20 null [guests]",
    "127.0.0.20 null [guests]",
    "127.0.0.3 tv []",
  ]);
  // The detail has them too.
  const one = await apiJson<{ record: { record: RecordJson } }>(s, `${R}/records/${all.find((r) => r.client_ip === "127.0.0.17")?.id}`);
  expect(one.record.record).toMatchObject({ client_name: "annas-phone", client_groups: ["kids", "guests"] });

  expect(await allRecords(s, "rec", "client_name=annas-phone")).toHaveLength(5);
  expect(who(await allRecords(s, "rec", "client_name=tv"))).toEqual(["127.0.0.3 tv []"]);
  expect(await allRecords(s, "rec", "client_name=nobody")).toEqual([]);
  expect(who(await allRecords(s, "rec", "group=guests"))).toEqual([
    "127.0.0.17 annas-phone [kids,guests]",
    "127.0.0.17 annas-phone [kids,guests]",
    "127.0.0.17 annas-phone [kids,guests]",
    "127.0.0.20 null [guests]",
    "127.0.0.20 null [guests]",
  ]);
  expect(await allRecords(s, "rec", "group=kids")).toHaveLength(5);
  // client_ip is a substring: 127.0.0.2 is in 127.0.0.20 too, which is not in kids.
  expect(await allRecords(s, "rec", "group=kids&client_ip=127.0.0.2")).toHaveLength(2);
  expect(await allRecords(s, "rec", "group=kids&client_ip=127.0.0.17")).toHaveLength(3);
  expect(await allRecords(s, "rec", "group=guests&client_name=annas-phone")).toHaveLength(3);
  expect(await allRecords(s, "rec", "group=nobody")).toEqual([]);
  // Paging with a filter follows the cursor over every match once.
  expect((await allRecords(s, "rec", "group=kids", 2)).map((r) => r.id)).toEqual((await allRecords(s, "rec", "group=kids")).map((r) => r.id));

  for (const bad of ["client_name=anna%20phone", "client_name=-x", "group=kids,guests", "group=%C3%A9"]) {
    const body = await apiJson<{ ok: boolean; code: string; message: string }>(s, `${R}/records?${bad}`, undefined, 400);
    expect(body, bad).toMatchObject({ ok: false, code: "invalid_query" });
    expect(body.message, bad).toMatch(/client_name|group/);
    await apiJson(s, `${R}/stats/top_clients?${bad}`, undefined, 400);
  }

  expect((await apiJson<{ sample_size: number }>(s, `${R}/stats/rcode?client_name=annas-phone`)).sample_size).toBe(5);
  expect((await apiJson<{ sample_size: number }>(s, `${R}/stats/timeseries?group=guests&buckets=2`)).sample_size).toBe(5);
  expect((await apiJson<{ sample_size: number }>(s, `${R}/stats/latency?group=kids&client_name=tv`)).sample_size).toBe(0);

  const byIp = [
    { key: "127.0.0.17", count: 3, client_ip: "127.0.0.17", client_name: "annas-phone" },
    { key: "127.0.0.2", count: 2, client_ip: "127.0.0.2", client_name: "annas-phone" },
    { key: "127.0.0.20", count: 2, client_ip: "127.0.0.20", client_name: null },
    { key: "127.0.0.1", count: 1, client_ip: "127.0.0.1", client_name: null },
    { key: "127.0.0.3", count: 1, client_ip: "127.0.0.3", client_name: "tv" },
  ];
  const byName = [
    // The phone over both its addresses; its row's address is the one it used last.
    { key: "annas-phone", count: 5, client_ip: "127.0.0.17", client_name: "annas-phone" },
    { key: "127.0.0.20", count: 2, client_ip: "127.0.0.20", client_name: null },
    { key: "127.0.0.1", count: 1, client_ip: "127.0.0.1", client_name: null },
    { key: "tv", count: 1, client_ip: "127.0.0.3", client_name: "tv" },
  ];
  expect(await top(s)).toEqual(byIp);
  expect(await top(s, "?by=ip")).toEqual(byIp);
  expect(await top(s, "?by=name")).toEqual(byName);
  // The same from the matching records (any filter but time) as from the rollups (SQLite).
  expect(await top(s, "?qtype=A")).toEqual(byIp);
  expect(await top(s, "?qtype=A&by=name")).toEqual(byName);
  expect(await top(s, "?by=name&limit=1")).toEqual(byName.slice(0, 1));
  expect(await top(s, "?group=kids")).toEqual(byIp.slice(0, 2));
  expect(await top(s, "?group=kids&by=name")).toEqual(byName.slice(0, 1));
  const shares = await apiJson<{ sample_size: number; rows: TopRow[] }>(s, `${R}/stats/top_clients?by=name`);
  expect(shares.sample_size).toBe(9);
  expect(shares.rows[0].share).toBeCloseTo(5 / 9);
  await apiJson(s, `${R}/stats/top_clients?by=mac`, undefined, 400);

  // Metrics stay per group, never per client.
  const metrics = await (await s.api("/api/metrics")).text();
  expect(metrics).not.toMatch(/annas-phone|127\.0\.0\.17|"tv"/);
}

/** The stream carries the fields. */
export async function checkStream(s: RunningSluice): Promise<void> {
  const stream = await openSse(`${s.apiUrl}${R}/stream`);
  try {
    await stream.next();
    expect(await askFrom("127.0.0.17", s.port("udp"), "live.clients.test")).toBe(0);
    const frames = await stream.until((f) => f.event === "record", 10_000);
    const record = (JSON.parse(frames[frames.length - 1].data ?? "") as { record: RecordJson }).record;
    expect(record).toMatchObject({ client_ip: "127.0.0.17", client_name: "annas-phone", client_groups: ["kids", "guests"] });
  } finally {
    await stream.close();
  }
  await committed(s, "rec", 10);
}

/** A reload renames the tv: its records keep the name they had; top_clients names the address as it was last. */
export async function checkRename(s: RunningSluice, store: string): Promise<void> {
  writeFileSync(join(s.dir, "sluice.yaml"), clientsConfig(store, "living-room-tv"));
  expect((await s.api("/api/reload", { method: "POST" })).status).toBe(202);
  await until("reload ok", async () => (await apiJson<{ status: string }>(s, "/api/reload/status")).status === "ok");
  expect(await askFrom("127.0.0.3", s.port("udp"), "after.clients.test")).toBe(0);
  await committed(s, "rec", 11);
  expect(await allRecords(s, "rec", "client_name=tv")).toHaveLength(1);
  expect((await allRecords(s, "rec", "client_name=living-room-tv")).map((r) => r.questions_json[0].name)).toEqual(["after.clients.test."]);
  const tv = { key: "127.0.0.3", count: 2, client_ip: "127.0.0.3", client_name: "living-room-tv" };
  expect((await top(s)).find((r) => r.key === "127.0.0.3")).toEqual(tv);
  expect((await top(s, "?qtype=A")).find((r) => r.key === "127.0.0.3")).toEqual(tv);
  const names = (await top(s, "?by=name")).filter((r) => r.client_ip === "127.0.0.3");
  expect(names).toEqual([
    { key: "living-room-tv", count: 1, client_ip: "127.0.0.3", client_name: "living-room-tv" },
    { key: "tv", count: 1, client_ip: "127.0.0.3", client_name: "tv" },
  ]);
}
