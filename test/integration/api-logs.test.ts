// GET /api/logs and GET /api/logs/stream over a real HTTP listener: limits and level filters,
// query errors, SSE replay/live/heartbeat/Last-Event-ID, listener cleanup, a slow client that
// stays bounded, and credentials that never reach the log.
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { logStreamStats } from "../../src/api/routes/logs.js";
import type { LogEntry } from "../../src/observability/log-ring.js";
import { openSse, isHeartbeat, type SseFrame } from "../helpers/sse.js";
import { apiYaml, startSluice, type RunningSluice } from "../helpers/sluice.js";

const CONFIG = apiYaml("reject REFUSED");

interface LogsBody {
  ok: boolean;
  total: number;
  entries: LogEntry[];
}

const entryOf = (f: SseFrame): LogEntry => JSON.parse(f.data as string) as LogEntry;
const isLog = (f: SseFrame): boolean => f.event === "log";
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Resolves when the bus has `count` log listeners (stream handlers subscribe asynchronously). */
async function listenersReach(s: RunningSluice, count: number, timeoutMs = 3000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (s.app.bus.listenerCount("log") !== count) {
    if (Date.now() > deadline) throw new Error(`log listeners: ${s.app.bus.listenerCount("log")}, expected ${count}`);
    await sleep(10);
  }
}

/** Resolves when `count` log streams are open. */
async function streamsReach(s: RunningSluice, count: number, timeoutMs = 3000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (logStreamStats(s.app).length !== count) {
    if (Date.now() > deadline) throw new Error(`log streams: ${logStreamStats(s.app).length}, expected ${count}`);
    await sleep(10);
  }
}

describe("logs API", () => {
  let s: RunningSluice;
  let baseListeners = 0;
  beforeAll(async () => {
    s = await startSluice(CONFIG);
    baseListeners = s.app.bus.listenerCount("log");
  });
  afterAll(() => s.stop());

  async function logs(query = ""): Promise<LogsBody> {
    const res = await s.api(`/api/logs${query}`);
    expect(res.status).toBe(200);
    return (await res.json()) as LogsBody;
  }

  test("defaults: newest 200 entries oldest first, documented fields, increasing ids, total = entries.length", async () => {
    for (let i = 0; i < 250; i++) s.app.log.info({ target: "test", n: i }, `filler ${i}`);
    const body = await logs();
    expect(body.ok).toBe(true);
    expect(body.entries).toHaveLength(200);
    expect(body.total).toBe(body.entries.length);
    const last = body.entries[199];
    expect(last.message).toBe("filler 249");
    expect(Object.keys(last).sort()).toEqual(["fields", "id", "level", "message", "target", "time_ms"]);
    expect(last).toMatchObject({ level: "info", target: "test", fields: { n: 249 } });
    expect(Math.abs(last.time_ms - Date.now())).toBeLessThan(10_000);
    for (let i = 1; i < body.entries.length; i++) expect((body.entries[i]).id).toBe((body.entries[i - 1]).id + 1);
  });

  test("limit and minimum level, with the warning alias and any letter case", async () => {
    const mark = `mark-${Date.now()}`;
    s.app.log.debug({ target: "test" }, `${mark} debug`);
    s.app.log.info({ target: "test" }, `${mark} info`);
    s.app.log.warn({ target: "test" }, `${mark} warn`);
    s.app.log.error({ target: "test" }, `${mark} error`);
    const marked = (b: LogsBody): string[] => b.entries.filter((e) => e.message.startsWith(mark)).map((e) => e.level);

    expect(marked(await logs("?limit=1000"))).toEqual(["debug", "info", "warn", "error"]);
    expect(marked(await logs("?limit=1000&level=info"))).toEqual(["info", "warn", "error"]);
    for (const level of ["warn", "warning", "WARNING", "Warn"]) {
      const body = await logs(`?limit=1000&level=${level}`);
      expect(marked(body)).toEqual(["warn", "error"]);
      expect(body.entries.every((e) => e.level === "warn" || e.level === "error" || e.level === "fatal")).toBe(true);
    }
    expect(marked(await logs("?level=error&limit=1000"))).toEqual(["error"]);

    const three = await logs("?limit=3");
    expect(three.total).toBe(3);
    expect(three.entries.map((e) => e.message)).toEqual([`${mark} info`, `${mark} warn`, `${mark} error`]);
    const one = await logs("?limit=1&level=warn");
    expect(one.entries.map((e) => e.message)).toEqual([`${mark} error`]);
    for (let i = 0; i < 1000; i++) s.app.log.debug({ target: "test" }, "more filler");
    const most = await logs("?limit=1000");
    expect(most.total).toBe(1000);
    expect(most.entries).toHaveLength(1000);
  });

  test("bad limit/level values are 400 invalid_query naming the parameter and the rule", async () => {
    const cases: [string, string, RegExp][] = [
      ["limit=0", "limit", />= 1/],
      ["limit=1001", "limit", /<= 1000/],
      ["limit=abc", "limit", /integer/],
      ["limit=2.5", "limit", /integer/],
      ["level=loud", "level", /one of trace, debug, info, warn, warning, error/],
      ["limit=5&level=fatal", "level", /one of/],
    ];
    for (const [query, param, why] of cases) {
      const res = await s.api(`/api/logs?${query}`);
      expect(res.status, query).toBe(400);
      const body = (await res.json()) as Record<string, unknown>;
      expect(Object.keys(body).sort(), query).toEqual(["code", "message", "ok"]);
      expect(body.ok).toBe(false);
      expect(body.code).toBe("invalid_query");
      expect(body.message, query).toContain(`querystring.${param}`);
      expect(body.message, query).toMatch(why);
    }
  });

  test("stream: SSE headers, tail replay through the level filter, heartbeat, then live entries (a reload)", async () => {
    const mark = `tail-${Date.now()}`;
    for (let i = 0; i < 6; i++) s.app.log[i % 2 === 0 ? "info" : "warn"]({ target: "test" }, `${mark} ${i}`);
    const stream = await openSse(`${s.apiUrl}/api/logs/stream?tail=3&level=warn`);
    try {
      expect(stream.response.status).toBe(200);
      expect(stream.response.headers.get("content-type")).toBe("text/event-stream");
      expect(stream.response.headers.get("cache-control")).toBe("no-cache");
      const replay = await stream.until(isHeartbeat);
      const logFrames = replay.filter(isLog);
      // the last 3 warn-or-above entries are the warn lines 1, 3, 5
      expect(logFrames.map((f) => entryOf(f).message)).toEqual([`${mark} 1`, `${mark} 3`, `${mark} 5`]);
      expect(replay).toHaveLength(4);
      for (const f of logFrames) expect(f.id).toBe(String(entryOf(f).id));

      // info lines are filtered out of the live part too; warn lines come through
      s.app.log.info({ target: "test" }, `${mark} live-info`);
      s.app.log.warn({ target: "test" }, `${mark} live-warn`);
      const live = await stream.until((f) => isLog(f) && entryOf(f).message === `${mark} live-warn`);
      expect(live.filter(isLog).map((f) => entryOf(f).message)).toEqual([`${mark} live-warn`]);
    } finally {
      await stream.close();
    }

    const all = await openSse(`${s.apiUrl}/api/logs/stream`);
    try {
      // default tail 0: nothing replayed, just the heartbeat
      expect((await all.until(isHeartbeat)).length).toBe(1);
      const res = await s.api("/api/reload", { method: "POST" });
      expect(res.status).toBe(202);
      const frames = await all.until((f) => isLog(f) && entryOf(f).message === "reload started", 10_000);
      const started = entryOf(frames[frames.length - 1]);
      expect(started).toMatchObject({ level: "info", target: "app" });
      expect(typeof started.fields.version).toBe("string");
      await all.until((f) => isLog(f) && /^reload (succeeded|failed)/.test(entryOf(f).message), 10_000);
    } finally {
      await all.close();
    }
  });

  test("Last-Event-ID: a reconnecting client gets exactly the entries it missed (level filter applies)", async () => {
    const mark = `resume-${Date.now()}`;
    const first = await openSse(`${s.apiUrl}/api/logs/stream?level=info`);
    await first.until(isHeartbeat);
    s.app.log.info({ target: "test" }, `${mark} seen`);
    const seen = await first.until((f) => isLog(f) && entryOf(f).message === `${mark} seen`);
    const lastId = (seen[seen.length - 1]).id as string;
    await first.close();

    s.app.log.info({ target: "test" }, `${mark} missed 1`);
    s.app.log.debug({ target: "test" }, `${mark} missed debug`);
    s.app.log.warn({ target: "test" }, `${mark} missed 2`);

    // tail is ignored when Last-Event-ID is usable
    const again = await openSse(`${s.apiUrl}/api/logs/stream?level=info&tail=50`, { "last-event-id": lastId });
    try {
      const replay = (await again.until(isHeartbeat)).filter(isLog).map(entryOf);
      expect(replay.map((e) => e.message)).toEqual([`${mark} missed 1`, `${mark} missed 2`]);
      expect(replay.every((e) => e.id > Number(lastId))).toBe(true);
    } finally {
      await again.close();
    }

    // a malformed id falls back to tail
    const fallback = await openSse(`${s.apiUrl}/api/logs/stream?tail=2&level=info`, { "last-event-id": "not-a-number" });
    try {
      const replay = (await fallback.until(isHeartbeat)).filter(isLog).map(entryOf);
      expect(replay.map((e) => e.message)).toEqual([`${mark} missed 1`, `${mark} missed 2`]);
    } finally {
      await fallback.close();
    }
  });

  test("a client that disconnects is released; the bus listener goes with the last client", async () => {
    await listenersReach(s, baseListeners);
    const a = await openSse(`${s.apiUrl}/api/logs/stream`);
    const b = await openSse(`${s.apiUrl}/api/logs/stream`);
    await a.until(isHeartbeat);
    await b.until(isHeartbeat);
    // One shared listener serialises each entry once for every client.
    expect(s.app.bus.listenerCount("log")).toBe(baseListeners + 1);
    expect(logStreamStats(s.app)).toHaveLength(2);
    await a.close();
    await streamsReach(s, 1);
    expect(s.app.bus.listenerCount("log")).toBe(baseListeners + 1);
    await b.close();
    await listenersReach(s, baseListeners);
    expect(logStreamStats(s.app)).toHaveLength(0);
  });

  test("stream query errors are 400 JSON before any streaming; a client refusing SSE gets 406", async () => {
    for (const [query, param] of [["tail=501", "tail"], ["tail=-1", "tail"], ["tail=x", "tail"], ["level=verbose", "level"]] as const) {
      const res = await s.api(`/api/logs/stream?${query}`, { headers: { accept: "text/event-stream" } });
      expect(res.status, query).toBe(400);
      expect(res.headers.get("content-type")).toMatch(/^application\/json/);
      const body = (await res.json()) as Record<string, unknown>;
      expect(body).toMatchObject({ ok: false, code: "invalid_query" });
      expect(body.message).toContain(`querystring.${param}`);
    }
    const json = await s.api("/api/logs/stream", { headers: { accept: "application/json" } });
    expect(json.status).toBe(406);
    expect(await json.json()).toMatchObject({ ok: false, code: "not_acceptable" });
    expect(s.app.bus.listenerCount("log")).toBe(baseListeners);
  });

  test("a slow client: its queue stays capped while >= 5000 lines are logged, then a dropped event arrives", async () => {
    const stream = await openSse(`${s.apiUrl}/api/logs/stream?level=info`);
    try {
      await stream.until(isHeartbeat);
      // Stop reading. 10 000 lines of ~2 KB (20 MB) is far more than socket buffers can hold.
      const padding = "x".repeat(2000);
      const total = 10_000;
      let maxQueued = 0;
      let maxBuffered = 0;
      for (let batch = 0; batch < 10; batch++) {
        for (let i = 0; i < total / 10; i++) s.app.log.info({ target: "burst", padding, n: batch * 1000 + i }, "burst line");
        const [stats] = logStreamStats(s.app);
        maxQueued = Math.max(maxQueued, stats?.queued ?? 0);
        maxBuffered = Math.max(maxBuffered, stats?.buffered ?? 0);
        await new Promise((r) => setImmediate(r));
      }
      const [stats] = logStreamStats(s.app);
      expect(stats?.maxQueued).toBe(1000);
      expect(maxQueued).toBeLessThanOrEqual(1000);
      expect(stats?.dropped).toBeGreaterThan(0);
      // user-space socket buffer: a high-water mark plus one frame, not megabytes
      expect(maxBuffered).toBeLessThan(64 * 1024);

      // Read again: a dropped frame comes before the queued entries, and nothing is lost silently.
      let received = 0;
      let dropped = 0;
      let lastN = -1;
      let lastId = 0;
      const frames = await stream.until((f) => {
        if (f.event === "dropped") dropped += (JSON.parse(f.data as string) as { dropped: number }).dropped;
        if (isLog(f)) {
          const e = entryOf(f);
          expect(e.id).toBeGreaterThan(lastId);
          lastId = e.id;
          if (e.target === "burst") {
            received++;
            lastN = e.fields.n as number;
          }
        }
        return lastN === total - 1;
      }, 20_000);
      expect(frames.some((f) => f.event === "dropped")).toBe(true);
      expect(dropped).toBeGreaterThan(0);
      expect(received + dropped).toBe(total);
      expect(logStreamStats(s.app)[0]?.queued).toBe(0);
    } finally {
      await stream.close();
    }
  });

  test("with the default interval (15 s) no second heartbeat comes within 1.5 s", async () => {
    const stream = await openSse(`${s.apiUrl}/api/logs/stream?level=error`);
    try {
      await stream.until(isHeartbeat);
      await expect(stream.until(isHeartbeat, 1500)).rejects.toThrow();
    } finally {
      await stream.close();
    }
  });
});

describe("logs API with api.http.sse_heartbeat: 600ms", () => {
  let s: RunningSluice;
  beforeAll(async () => {
    s = await startSluice(CONFIG.replace("http: 127.0.0.1:0", "http:\n    listen: 127.0.0.1:0\n    sse_heartbeat: 600ms"));
  });
  afterAll(() => s.stop());

  test("a heartbeat comes every 600 ms after the first one", async () => {
    const stream = await openSse(`${s.apiUrl}/api/logs/stream?level=error`);
    try {
      await stream.until(isHeartbeat);
      for (let i = 0; i < 3; i++) {
        const started = Date.now();
        await stream.until(isHeartbeat, 5000);
        const waited = Date.now() - started;
        expect(waited).toBeGreaterThan(450);
        expect(waited).toBeLessThan(2000);
      }
    } finally {
      await stream.close();
    }
  });

  test("an interval out of bounds is refused with its key", async () => {
    const text = CONFIG.replace("http: 127.0.0.1:0", "http:\n    listen: 127.0.0.1:0\n    sse_heartbeat: 10ms");
    const res = await s.api("/api/config/validate", { method: "POST", headers: { "content-type": "application/yaml" }, body: text });
    expect(res.status).toBe(400);
    expect(await res.text()).toContain("api.http.sse_heartbeat must be between 100ms and 10m");
  });
});

describe("logs API with Basic Auth", () => {
  const PASSWORD = "Pa55-w0rd-never-logged";
  let s: RunningSluice;
  beforeAll(async () => {
    s = await startSluice(CONFIG.replace("http: 127.0.0.1:0", `http:\n    listen: 127.0.0.1:0\n    auth: { type: basic, username: admin, password: ${PASSWORD} }`));
  });
  afterAll(() => s.stop());

  test("credentials never appear in the log, whatever requests arrive", async () => {
    const good = `Basic ${Buffer.from(`admin:${PASSWORD}`).toString("base64")}`;
    const bad = `Basic ${Buffer.from(`admin:${PASSWORD}-wrong`).toString("base64")}`;
    expect((await s.api("/api/logs", { headers: { authorization: bad } })).status).toBe(401);
    expect((await s.api("/api/nope", { headers: { authorization: good } })).status).toBe(404);
    expect((await s.api("/api/logs?limit=0", { headers: { authorization: good } })).status).toBe(400);
    const post = await s.api("/api/reload", { method: "POST", headers: { authorization: good, "content-type": "application/json" }, body: `{"password": "${PASSWORD}"` });
    expect(post.status).toBe(400);
    // a caller passing secrets to the logger gets them redacted
    s.app.log.info({ target: "test", password: PASSWORD, request: { authorization: good } }, "redaction check");

    const res = await s.api("/api/logs?limit=1000", { headers: { authorization: good } });
    expect(res.status).toBe(200);
    const text = await res.text();
    const body = JSON.parse(text) as LogsBody;
    expect(body.entries.find((e) => e.message === "redaction check")?.fields).toEqual({ password: "[redacted]", request: { authorization: "[redacted]" } });
    for (const secret of [PASSWORD, good.slice(6), bad.slice(6)]) {
      expect(text).not.toContain(secret);
      expect(JSON.stringify(s.logs)).not.toContain(secret);
    }
  });

  test("the stream needs credentials too, and closing the server unsubscribes open streams", async () => {
    const good = `Basic ${Buffer.from(`admin:${PASSWORD}`).toString("base64")}`;
    const denied = await openSse(`${s.apiUrl}/api/logs/stream`);
    expect(denied.response.status).toBe(401);
    await denied.close();
    const base = s.app.bus.listenerCount("log");
    const stream = await openSse(`${s.apiUrl}/api/logs/stream`, { authorization: good });
    await stream.until(isHeartbeat);
    expect(s.app.bus.listenerCount("log")).toBe(base + 1);
    const stopped = s.app.stop();
    // the server ends the stream; the client sees the end (or a reset), not a hang
    await stream.until(() => false, 5000).catch((err: Error) => expect(err.message).toMatch(/ended|terminated|abort|socket/i));
    await stopped;
    expect(s.app.bus.listenerCount("log")).toBe(base);
    expect(logStreamStats(s.app)).toHaveLength(0);
    await stream.close();
  });
});
