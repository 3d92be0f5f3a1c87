// The audit trail over the real API and a real SQLite file (issue 27, item 6): an entry for every
// state-changing request and every refused one, the filters and cursor paging of GET /api/audit, the
// stream, bad query strings, and the file (0600, in data/audit.db by default).
import { statSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, expect, test } from "vitest";
import { isHeartbeat, openSse } from "../helpers/sse.js";
import { startSluice, type RunningSluice } from "../helpers/sluice.js";
import { AUTH, auditPage, drained, entriesAtLeast, JSON_BODY, trailOf } from "./audit-helpers.js";

const YAML = `api:
  http:
    listen: 127.0.0.1:0
    sse_heartbeat: 200ms
    auth: { type: basic, username: admin, password: s3cret }
plugins:
  - { tag: c, type: cache, args: { size: 100 } }
  - { tag: m, type: qname, args: ["domain:blocked.test"] }
  - { tag: main, type: sequence, args: [{ matches: $m, exec: reject 5 }, { exec: $c }, { exec: reject 3 }] }
  - { tag: udp, type: udp_server, args: { entry: main, listen: "127.0.0.1:0" } }
`;

let s: RunningSluice;
let started: number;
beforeAll(async () => {
  started = Date.now();
  s = await startSluice(YAML);
});
afterAll(async () => {
  await s.stop();
});

const post = (path: string, body?: unknown, headers: Record<string, string> = AUTH): Promise<Response> =>
  s.api(path, { method: "POST", headers: { ...headers, ...(body === undefined ? {} : JSON_BODY) }, body: body === undefined ? undefined : JSON.stringify(body) });

test("state-changing requests and refused ones are audited, reads are not; the file is 0600", async () => {
  const before = (await auditPage(s)).entries.length;
  expect((await post("/api/plugins/m/mode", { mode: "always_true" })).status).toBe(200);
  expect((await post("/api/plugins/c/flush")).status).toBe(200);
  // Refused: no credentials (a GET too), and a POST with wrong ones.
  expect((await s.api("/api/config")).status).toBe(401);
  expect((await post("/api/plugins/c/flush", undefined, { authorization: `Basic ${Buffer.from("admin:wrong").toString("base64")}` })).status).toBe(401);
  // A POST to no route is still a state-changing request that was tried.
  expect((await post("/api/nothing/here")).status).toBe(404);
  // Reads are not audited.
  expect((await s.api("/api/control", { headers: AUTH })).status).toBe(200);
  const entries = (await entriesAtLeast(s, before + 5)).slice(0, 5);
  // Who: the signed-in user (or the name a refused request tried), how, and with which role.
  expect(entries.map((e) => [e.method, e.route, e.path, e.tag, e.status, e.code, e.actor, e.via, e.role])).toEqual([
    ["POST", "/api/nothing/here", "/api/nothing/here", null, 404, "not_found", "admin", "basic", "admin"],
    ["POST", "/api/plugins/{tag}/flush", "/api/plugins/c/flush", "c", 401, "unauthorized", "admin", "basic", null],
    ["GET", "/api/config", "/api/config", null, 401, "unauthorized", "anonymous", "none", null],
    ["POST", "/api/plugins/{tag}/flush", "/api/plugins/c/flush", "c", 200, null, "admin", "basic", "admin"],
    ["POST", "/api/plugins/{tag}/mode", "/api/plugins/m/mode", "m", 200, null, "admin", "basic", "admin"],
  ]);
  // The route's own summary line where it declares one, else method and path.
  expect(entries[0].summary).toBe("POST /api/nothing/here");
  expect(entries[2].summary).toBe("GET /api/config");
  expect(entries[4].summary).toContain("always_true");
  for (const e of entries) {
    expect(e.address).toBe("127.0.0.1");
    expect(e.at_ms).toBeGreaterThanOrEqual(started);
    expect(e.at_ms).toBeLessThanOrEqual(Date.now());
  }
  // Newest first, ids increasing with time.
  expect(entries.map((e) => e.id)).toEqual([...entries.map((e) => e.id)].sort((a, b) => b - a));
  expect(statSync(join(s.dir, "data", "audit.db")).mode & 0o777).toBe(0o600);
  await post("/api/plugins/m/mode", { mode: "normal" });
});

test("filters combine and a cursor pages through the newest first, each entry once", async () => {
  for (let i = 0; i < 4; i++) await post("/api/plugins/c/flush");
  await s.api("/api/plugins/c/flush", { method: "POST" });
  await post("/api/plugins/m/mode", { mode: "always_false" });
  await drained(s);
  const all = await entriesAtLeast(s, 6);
  const ids = (list: { id: number }[]): number[] => list.map((e) => e.id);
  const expectFilter = async (query: string, keep: (e: (typeof all)[number]) => boolean): Promise<void> => {
    const page = await auditPage(s, `${query}&limit=500`);
    expect(ids(page.entries), query).toEqual(ids(all.filter(keep)));
    expect(page.entries.length, query).toBeGreaterThan(0);
  };
  await expectFilter("tag=c", (e) => e.tag === "c");
  await expectFilter("tag=m&method=post", (e) => e.tag === "m" && e.method === "POST");
  await expectFilter("route=%2Fmode", (e) => e.route.toLowerCase().includes("/mode"));
  await expectFilter("route=PLUGINS", (e) => e.route.includes("plugins"));
  await expectFilter("status=401", (e) => e.status === 401);
  await expectFilter("status=4xx", (e) => e.status >= 400 && e.status < 500);
  await expectFilter("status=2XX&tag=c", (e) => e.status >= 200 && e.status < 300 && e.tag === "c");
  await expectFilter("q=FLUSH", (e) => e.summary.toLowerCase().includes("flush"));
  await expectFilter("actor=admin&via=basic", (e) => e.actor === "admin" && e.via === "basic");
  await expectFilter("actor=anonymous", (e) => e.actor === "anonymous");
  await expectFilter(`from_ms=${all[2].at_ms}&to_ms=${all[0].at_ms}`, (e) => e.at_ms >= all[2].at_ms && e.at_ms <= all[0].at_ms);
  expect((await auditPage(s, "actor=somebody")).entries).toEqual([]);
  expect((await auditPage(s, "via=token")).entries).toEqual([]);
  // Pages of 2 with a filter, then without: the same entries in the same order, each once.
  for (const filter of ["tag=c&", ""]) {
    const seen: number[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const page = await auditPage(s, `${filter}limit=2${cursor ? `&cursor=${cursor}` : ""}`);
      expect(page.entries.length).toBeLessThanOrEqual(2);
      seen.push(...ids(page.entries));
      cursor = page.next_cursor;
      pages++;
    } while (cursor !== null && pages < 100);
    const whole = await auditPage(s, `${filter}limit=500`);
    expect(seen).toEqual(ids(whole.entries));
    expect(pages).toBe(Math.max(1, Math.ceil(seen.length / 2)));
  }
  await post("/api/plugins/m/mode", { mode: "normal" });
});

test("the stream sends each new entry with its id; a refused stream request is itself audited", async () => {
  const stream = await openSse(`${s.apiUrl}/api/audit/stream`, AUTH);
  try {
    expect(stream.response.status).toBe(200);
    expect(stream.response.headers.get("content-type")).toContain("text/event-stream");
    expect(isHeartbeat((await stream.next()) ?? { event: null, id: null, data: null, comment: null })).toBe(true);
    await post("/api/plugins/c/flush");
    // (An entry of the test before may come first.)
    const frames = await stream.until((f) => f.event === "audit" && f.data?.includes('"path":"/api/plugins/c/flush"') === true);
    const sent = JSON.parse(frames[frames.length - 1].data ?? "{}") as { id: number; path: string; status: number };
    expect(sent).toMatchObject({ path: "/api/plugins/c/flush", status: 200 });
    expect((await auditPage(s, "tag=c&limit=1")).entries[0]).toEqual(sent);
    // Heartbeats keep coming (every 200 ms here).
    await stream.until(isHeartbeat);
    const refused = await openSse(`${s.apiUrl}/api/audit/stream`);
    expect(refused.response.status).toBe(401);
    await refused.close();
    const frames2 = await stream.until((f) => f.event === "audit" && f.data?.includes('"path":"/api/audit/stream"') === true);
    expect(JSON.parse(frames2[frames2.length - 1].data ?? "{}")).toMatchObject({ method: "GET", path: "/api/audit/stream", status: 401, code: "unauthorized" });
    const notSse = await s.api("/api/audit/stream", { headers: { ...AUTH, accept: "application/json" } });
    expect([notSse.status, ((await notSse.json()) as { code: string }).code]).toEqual([406, "not_acceptable"]);
  } finally {
    await stream.close();
  }
});

test("bad query strings are 400 invalid_query and name the parameter", async () => {
  const bad = ["limit=0", "limit=501", "limit=many", "cursor=abc", "cursor=-1", "via=magic", "status=45", "status=6xx", "status=4x", "from_ms=-1", "to_ms=soon", "from_ms=20&to_ms=10", "method=P0ST", "colour=blue", `q=${"x".repeat(300)}`, "actor="];
  for (const query of bad) {
    const res = await s.api(`/api/audit?${query}`, { headers: AUTH });
    const body = (await res.json()) as { ok: boolean; code: string; message: string };
    expect([res.status, body.ok, body.code], query).toEqual([400, false, "invalid_query"]);
    const name = query.split("=")[0] === "from_ms" && query.includes("to_ms") ? "from_ms" : query.split("=")[0];
    expect(body.message, query).toContain(name);
  }
});

test("the trail's actor is listed in /api/actors as `audit`, ready", async () => {
  const actors = ((await (await s.api("/api/actors", { headers: AUTH })).json()) as { actors: { id: string; parent: string | null; state: unknown; context: Record<string, unknown> }[] }).actors;
  const audit = actors.find((a) => a.id === "audit");
  expect(audit).toMatchObject({ parent: null, state: { ready: { write: expect.any(String) as unknown, prune: "waiting" } } });
  expect(audit?.context).toMatchObject({ enabled: true, failing: 0, last_error: null });
  expect(trailOf(s).actor.getSnapshot().matches("ready")).toBe(true);
});
