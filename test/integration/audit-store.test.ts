// The audit trail's SQLite store over time: retention and max_entries pruning (entries dated in the
// past or the process clock moved on with services.clockShift, and the actor's prune timer sent by
// the test: no real time is waited), a restart on the same file, a full queue that drops and counts,
// the trail switched off and on by reloads, a store that cannot be opened (503 audit_unavailable),
// and the settings `sluice check` refuses with line/column.
import { existsSync, mkdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, test } from "vitest";
import { AUDIT_QUEUE_LIMIT } from "../../src/api/audit/audit.js";
import { fileVersion } from "../../src/config/load.js";
import { checkErrors } from "../helpers/check.js";
import { startSluice, tempDir, type RunningSluice } from "../helpers/sluice.js";
import { auditPage, drained, entriesAtLeast, entry, metric, sendTimer, trailOf, until } from "./audit-helpers.js";

const PRUNE_TIMER = "xstate.after.pruneInterval.audit.ready.prune.waiting" as const;
const DAY = 86_400_000;

const yaml = (audit: string | null): string => `api:
  http:
    listen: 127.0.0.1:0
${audit === null ? "" : `    audit: ${audit}\n`}plugins:
  - { tag: c, type: cache, args: { size: 100 } }
  - { tag: main, type: sequence, args: [{ exec: $c }, { exec: reject 3 }] }
`;

const running: RunningSluice[] = [];
const start = async (text: string, dir?: string, clockShift?: { ms: number }): Promise<RunningSluice> => {
  const s = await startSluice(text, {}, { ...(dir === undefined ? {} : { dir }), ...(clockShift ? { clockShift } : {}) });
  running.push(s);
  return s;
};
afterEach(async () => {
  for (const s of running.splice(0)) await s.stop().catch(() => undefined);
});

const flush = (s: RunningSluice): Promise<Response> => s.api("/api/plugins/c/flush", { method: "POST" });

/** Writes `text` as the configuration and reloads it through the API. */
async function reload(s: RunningSluice, text: string): Promise<void> {
  writeFileSync(join(s.dir, "sluice.yaml"), text);
  expect((await s.api("/api/reload", { method: "POST" })).status).toBe(202);
  await until("the reload", async () => {
    const r = (await (await s.api("/api/reload/status")).json()) as { status: string; running_version: string; last_error: string | null };
    if (r.status === "failed") throw new Error(`reload failed: ${r.last_error}`);
    return r.status === "ok" && r.running_version === fileVersion(text);
  });
}

/** Sends the actor's prune timer and waits for that prune to end; returns what it deleted. */
async function prune(s: RunningSluice): Promise<number | null> {
  const actor = trailOf(s).actor;
  await until("the prune timer's state", () => actor.getSnapshot().matches({ ready: { prune: "waiting" } }));
  const before = actor.getSnapshot().context.prunes;
  sendTimer(s, PRUNE_TIMER);
  const after = await until("the prune", () => (actor.getSnapshot().context.prunes > before ? actor.getSnapshot().context : undefined));
  expect(after.last_prune_error).toBeNull();
  return after.last_prune_deleted;
}

describe("pruning", () => {
  test("entries older than the retention go at the next prune, then the oldest beyond max_entries", async () => {
    const s = await start(yaml("{ retention: 30d, max_entries: 5 }"));
    const now = Date.now();
    const sink = trailOf(s).sink;
    // Dated in the past: what pruning measures against the clock.
    for (const days of [200, 100, 31]) sink.append(entry({ at_ms: now - days * DAY, summary: `old ${days}` }));
    for (const days of [29, 10, 1]) sink.append(entry({ at_ms: now - days * DAY, summary: `recent ${days}` }));
    await entriesAtLeast(s, 6);
    expect(await prune(s)).toBe(3);
    expect((await auditPage(s)).entries.map((e) => e.summary)).toEqual(["recent 1", "recent 10", "recent 29"]);
    for (let i = 0; i < 4; i++) expect((await flush(s)).status).toBe(200);
    const all = await entriesAtLeast(s, 7);
    expect(await prune(s)).toBe(2);
    // The newest five are kept.
    expect((await auditPage(s)).entries).toEqual(all.slice(0, 5));
    // Nothing more to do.
    expect(await prune(s)).toBe(0);
  });

  test("retention counts on the process's clock: moved on 31 days, the requests made before are pruned", async () => {
    const clockShift = { ms: 0 };
    const s = await start(yaml("{ retention: 30d }"), undefined, clockShift);
    await flush(s);
    await flush(s);
    await entriesAtLeast(s, 2);
    clockShift.ms = 31 * DAY;
    await flush(s);
    const all = await entriesAtLeast(s, 3);
    expect(all[0].at_ms - all[1].at_ms).toBeGreaterThanOrEqual(31 * DAY);
    expect(await prune(s)).toBe(2);
    expect((await auditPage(s)).entries).toEqual([all[0]]);
  });

  test("a reload that lowers max_entries applies at the next prune without reopening the store", async () => {
    const s = await start(yaml(null));
    for (let i = 0; i < 6; i++) await flush(s);
    await entriesAtLeast(s, 6);
    const opens = trailOf(s).actor.getSnapshot().context.opens;
    await reload(s, yaml("{ max_entries: 2 }"));
    // The reload's POST is in the trail too.
    await drained(s);
    const before = (await auditPage(s)).entries;
    expect(before.length).toBe(7);
    expect(await prune(s)).toBe(5);
    expect((await auditPage(s)).entries).toEqual(before.slice(0, 2));
    expect(trailOf(s).actor.getSnapshot().context.opens).toBe(opens);
  });
});

test("the trail survives a restart on the same file; ids go on increasing", async () => {
  const dir = tempDir();
  const first = await startSluice(yaml("{ path: trail/audit.db }"), {}, { dir });
  for (let i = 0; i < 3; i++) await flush(first);
  const before = await entriesAtLeast(first, 3);
  // Stopping writes what is still queued.
  await flush(first);
  await first.app.stop();
  expect(statSync(join(dir, "trail", "audit.db")).mode & 0o777).toBe(0o600);
  expect(statSync(join(dir, "trail")).mode & 0o777).toBe(0o700);
  const second = await start(yaml("{ path: trail/audit.db }"), dir);
  const kept = (await auditPage(second)).entries;
  expect(kept.length).toBe(4);
  expect(kept.slice(1)).toEqual(before);
  await flush(second);
  const now = await entriesAtLeast(second, 5);
  expect(now[0].id).toBeGreaterThan(kept[0].id);
  expect(now.slice(1)).toEqual(kept);
});

test("a full queue drops what does not fit and counts it; the rest is written", async () => {
  const s = await start(yaml(null));
  const written = await metric(s, "audit_entries_total");
  expect(await metric(s, "audit_dropped_total")).toBe(0);
  const sink = trailOf(s).sink;
  // In one turn of the event loop: nothing is written meanwhile.
  for (let i = 0; i < AUDIT_QUEUE_LIMIT + 7; i++) sink.append(entry({ summary: `bulk ${i}` }));
  expect(trailOf(s).queued()).toBe(AUDIT_QUEUE_LIMIT);
  expect(await metric(s, "audit_dropped_total")).toBe(7);
  await until("the queue written", async () => (await metric(s, "audit_entries_total")) >= written + AUDIT_QUEUE_LIMIT, 20_000);
  expect((await auditPage(s, "limit=1")).entries[0].summary).toBe(`bulk ${AUDIT_QUEUE_LIMIT - 1}`);
  expect((await auditPage(s, "q=bulk%2010007")).entries).toEqual([]);
  expect(trailOf(s).actor.getSnapshot().context.flushes).toBeGreaterThanOrEqual(AUDIT_QUEUE_LIMIT / 1000);
});

test("off: no file, reads are 503 audit_unavailable; a reload turns it on with another path, and off again", async () => {
  const s = await start(yaml("false"));
  await flush(s);
  const off = await s.api("/api/audit");
  expect([off.status, ((await off.json()) as { code: string }).code]).toEqual([503, "audit_unavailable"]);
  expect((await s.api("/api/audit/stream")).status).toBe(503);
  expect(existsSync(join(s.dir, "data", "audit.db"))).toBe(false);
  await reload(s, yaml("{ path: elsewhere.db }"));
  await until("the store open", () => trailOf(s).actor.getSnapshot().matches("ready"));
  await flush(s);
  expect((await entriesAtLeast(s, 1))[0]).toMatchObject({ path: "/api/plugins/c/flush" });
  expect(statSync(join(s.dir, "elsewhere.db")).mode & 0o777).toBe(0o600);
  await reload(s, yaml("false"));
  expect((await s.api("/api/audit")).status).toBe(503);
});

test("a store that cannot be opened: reads are 503 audit_unavailable, entries wait in memory until it opens", async () => {
  // The path is a directory: the store fails to open, and is tried again later.
  const dir = tempDir();
  mkdirSync(join(dir, "blocked", "audit.db"), { recursive: true });
  const s = await start(yaml("{ path: blocked/audit.db }"), dir);
  const trail = trailOf(s);
  expect(trail.actor.getSnapshot().value).toBe("failed");
  const res = await s.api("/api/audit");
  const body = (await res.json()) as { code: string; message: string };
  expect([res.status, body.code]).toEqual([503, "audit_unavailable"]);
  expect(body.message).toContain("not open");
  await flush(s);
  expect(trail.queued()).toBe(1);
  // The path freed, the retry (1 s after a first failure) is sent now instead of waited for.
  rmSync(join(dir, "blocked", "audit.db"), { recursive: true });
  sendTimer(s, "xstate.after.retryDelay.audit.failed");
  expect((await entriesAtLeast(s, 1)).map((e) => e.path)).toEqual(["/api/plugins/c/flush"]);
  expect(trail.actor.getSnapshot().context).toMatchObject({ failing: 0, last_error: null });
});

describe("sluice check", () => {
  const dir = tempDir();
  const check = (audit: string): string => {
    const file = join(dir, "audit.yaml");
    writeFileSync(file, yaml(audit));
    return checkErrors(file).replaceAll(`${file}:`, "");
  };

  test("schema errors: a bad max_entries, an unknown key, a postgres URL of another scheme", () => {
    expect(check("{ max_entries: 0 }")).toMatch(/^4:\d+: error: .*max_entries.*>= 1/);
    expect(check("{ keep: 3 }")).toMatch(/^4:\d+: error: .*unknown field 'keep'/);
    expect(check('{ postgres: { url: "mysql://x/y" } }')).toMatch(/^4:\d+: error: .*url/);
    expect(check('{ postgres: { url: "postgres://x/y", schema: "Bad-Name" } }')).toMatch(/^4:\d+: error: .*schema/);
  });

  test("a retention that is not a duration, or too short; path and postgres both set", () => {
    expect(check('{ retention: "soon" }')).toMatch(/^4:\d+: error: api\.http\.audit\.retention: 'soon' is not a duration/);
    expect(check("{ retention: 10s }")).toMatch(/^4:\d+: error: api\.http\.audit\.retention must be between 1m and/);
    expect(check('{ path: a.db, postgres: { url: "postgres://x/y" } }')).toMatch(/^4:\d+: error: api\.http\.audit: path and postgres are both set/);
  });
});
