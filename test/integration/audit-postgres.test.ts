// The audit trail in PostgreSQL against a real, throwaway server: two instances write one trail (its
// own schema, no SQLite file), the filters and paging read the same as SQLite's, pruning by
// max_entries and retention, and a server that goes away: reads are 503 audit_unavailable while
// entries wait in memory, and once it is back (the actor's retry timer sent by the test) they are
// written.
import { existsSync } from "node:fs";
import { join } from "node:path";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { PostgresServer, requirePostgres } from "../helpers/postgres.js";
import { startSluice, type RunningSluice } from "../helpers/sluice.js";
import { auditPage, entriesAtLeast, entry, sendTimer, trailOf, until } from "./audit-helpers.js";

let server: PostgresServer;
let a: RunningSluice;
let b: RunningSluice;

const config = (audit: string): string => `api:
  http:
    listen: 127.0.0.1:0
    audit: ${audit}
plugins:
  - { tag: c, type: cache, args: { size: 100 } }
  - { tag: d, type: cache, args: { size: 100 } }
  - { tag: main, type: sequence, args: [{ exec: $c }, { exec: reject 3 }] }
`;

const flush = (s: RunningSluice, tag = "c"): Promise<Response> => s.api(`/api/plugins/${tag}/flush`, { method: "POST" });

requirePostgres();

describe("PostgreSQL audit store", () => {
  beforeAll(async () => {
    server = await PostgresServer.start();
    const audit = `{ postgres: { url: "${server.url()}" }, retention: 30d, max_entries: 8 }`;
    a = await startSluice(config(audit));
    b = await startSluice(config(audit));
  });

  afterAll(async () => {
    await a?.stop();
    await b?.stop();
    server?.destroy();
  });

  test("two instances write one trail in schema sluice_audit; no SQLite file; filters and paging as with SQLite", async () => {
    await until("both stores open", () => trailOf(a).actor.getSnapshot().matches("ready") && trailOf(b).actor.getSnapshot().matches("ready"));
    // One after the other: each instance numbers its entries when it writes them (50 ms later).
    expect((await flush(a)).status).toBe(200);
    await entriesAtLeast(b, 1);
    expect((await flush(b, "d")).status).toBe(200);
    await entriesAtLeast(a, 2);
    expect((await a.api("/api/plugins/nope/flush", { method: "POST" })).status).toBe(404);
    const fromA = await entriesAtLeast(a, 3);
    expect((await auditPage(b)).entries).toEqual(fromA);
    expect(fromA.map((e) => [e.path, e.tag, e.status, e.code])).toEqual([
      ["/api/plugins/nope/flush", "nope", 404, "plugin_route_not_found"],
      ["/api/plugins/d/flush", "d", 200, null],
      ["/api/plugins/c/flush", "c", 200, null],
    ]);
    expect(existsSync(join(a.dir, "data", "audit.db"))).toBe(false);
    const ids = (q: string): Promise<number[]> => auditPage(a, q).then((p) => p.entries.map((e) => e.id));
    expect(await ids("tag=d")).toEqual([fromA[1].id]);
    expect(await ids("status=4xx")).toEqual([fromA[0].id]);
    expect(await ids("status=200&method=post")).toEqual([fromA[1].id, fromA[2].id]);
    // Substrings, any case: the route's pattern, and the summary (the route's own line).
    expect(await ids("route=%7BTAG%7D%2Fflush")).toEqual([fromA[0].id, fromA[1].id, fromA[2].id]);
    expect(await ids(`q=${encodeURIComponent(fromA[2].summary.toUpperCase())}`)).toEqual([fromA[2].id]);
    expect(await ids("actor=anonymous&via=none")).toEqual(fromA.map((e) => e.id));
    expect(await ids(`from_ms=${fromA[1].at_ms}&to_ms=${fromA[1].at_ms}`)).toContain(fromA[1].id);
    expect(await ids("q=100%25")).toEqual([]);
    const first = await auditPage(a, "limit=2");
    expect(first.entries.map((e) => e.id)).toEqual([fromA[0].id, fromA[1].id]);
    expect(first.next_cursor).toBe(String(fromA[1].id));
    const second = await auditPage(a, `limit=2&cursor=${first.next_cursor}`);
    expect(second).toEqual({ ok: true, entries: [fromA[2]], next_cursor: null });
    const c = new pg.Client({ connectionString: server.url() });
    await c.connect();
    try {
      expect(Number((await c.query<{ n: string }>("SELECT count(*) AS n FROM sluice_audit.audit_v1")).rows[0].n)).toBe(3);
    } finally {
      await c.end();
    }
  });

  test("pruning: retention, then the oldest beyond max_entries", async () => {
    const sink = trailOf(a).sink;
    const now = Date.now();
    for (let i = 0; i < 3; i++) sink.append(entry({ at_ms: now - 40 * 86_400_000, summary: `too old ${i}` }));
    for (let i = 0; i < 9; i++) sink.append(entry({ summary: `pg ${i}` }));
    await entriesAtLeast(a, 9, "q=pg%20");
    const actor = trailOf(a).actor;
    await until("the prune timer's state", () => actor.getSnapshot().matches({ ready: { prune: "waiting" } }));
    const prunes = actor.getSnapshot().context.prunes;
    sendTimer(a, "xstate.after.pruneInterval.audit.ready.prune.waiting");
    await until("the prune", () => actor.getSnapshot().context.prunes > prunes);
    expect(actor.getSnapshot().context).toMatchObject({ last_prune_error: null, last_prune_deleted: 7 });
    expect((await auditPage(a)).entries.map((e) => e.summary)).toEqual([8, 7, 6, 5, 4, 3, 2, 1].map((i) => `pg ${i}`));
  });

  test("the server stops: reads are 503 audit_unavailable, entries wait; back, they are written", async () => {
    server.stop();
    const trail = trailOf(a);
    await until("the store to be given up", () => trail.actor.getSnapshot().matches("failed"), 10_000);
    const res = await a.api("/api/audit");
    expect([res.status, ((await res.json()) as { code: string }).code]).toEqual([503, "audit_unavailable"]);
    expect((await flush(a)).status).toBe(200);
    expect(trail.queued()).toBe(1);
    await server.resume();
    // The retry delay (1 s, doubling) is sent now instead of waited for; more may have failed meanwhile.
    await until("the store open again", () => {
      if (trail.actor.getSnapshot().matches("failed")) sendTimer(a, "xstate.after.retryDelay.audit.failed");
      return trail.actor.getSnapshot().matches("ready");
    });
    const entries = await entriesAtLeast(a, 1, "tag=c&status=200");
    expect(entries[0]).toMatchObject({ path: "/api/plugins/c/flush" });
    expect(trail.queued()).toBe(0);
  });
});
