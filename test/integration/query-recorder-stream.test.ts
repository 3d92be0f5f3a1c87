// GET /api/plugins/<tag>/stream: replay of the in-memory tail, then live records within a second of
// their flush, resume with Last-Event-ID, the Accept check, and a client that does not read skips
// records (told with `event: dropped`) instead of holding them all.
import net from "node:net";
import { afterAll, beforeAll, expect, test } from "vitest";
import { buildQuery, udpBurst, udpExchange } from "../helpers/dns.js";
import { isHeartbeat, openSse, type SseFrame } from "../helpers/sse.js";
import { startSluice, type RunningSluice } from "../helpers/sluice.js";
import { allRecords, apiJson, committed } from "./recorder-helpers.js";

let s: RunningSluice;
const R = "/api/plugins/rec";

beforeAll(async () => {
  s = await startSluice(`api:
  http: 127.0.0.1:0
plugins:
  - { tag: local, type: hosts, args: { entries: ["known.stream.test 192.0.2.7"] } }
  - { tag: big, type: arbitrary, args: { rules: ["$GENERATE 1-40 big.stream.test. 60 IN A 198.51.100.$"] } }
  - { tag: rec, type: query_recorder, args: { path: rec.db, flush_interval_ms: 50, memory_tail: 8, queue_size: 65536 } }
  - tag: main
    type: sequence
    args:
      - exec: $rec
      - exec: $local
      - exec: $big
  - { tag: udp, type: udp_server, args: { entry: main, listen: "127.0.0.1:0" } }
`);
  for (let i = 0; i < 10; i++) await udpExchange(s.port("udp"), buildQuery(`r${i}.stream.test`, "A"));
  await committed(s, "rec", 10);
});

afterAll(async () => {
  await s?.stop();
});

const records = (frames: SseFrame[]): { id: number; name: string; data: { record: Record<string, unknown>; steps: unknown[] } }[] =>
  frames
    .filter((f) => f.event === "record")
    .map((f) => {
      const data = JSON.parse(f.data ?? "") as { record: { id: number; questions_json: { name: string }[] }; steps: unknown[] };
      expect(f.id).toBe(String(data.record.id));
      return { id: data.record.id, name: data.record.questions_json[0].name, data };
    });

test("replays the newest `tail` records oldest first, then delivers a new record within a second of its flush", async () => {
  const stream = await openSse(`${s.apiUrl}${R}/stream?tail=3`);
  try {
    expect(stream.response.status).toBe(200);
    expect(stream.response.headers.get("content-type")).toMatch(/^text\/event-stream/);
    const replay = records(await stream.until((f) => f.event === "record" && (f.data ?? "").includes("r9.stream.test")));
    expect(replay.map((r) => r.name)).toEqual(["r7.stream.test.", "r8.stream.test.", "r9.stream.test."]);
    // The frame is the detail route's `record` object.
    const detail = await apiJson<{ record: unknown }>(s, `${R}/records/${replay[2].id}`);
    expect(replay[2].data).toEqual(detail.record);

    const sent = Date.now();
    await udpExchange(s.port("udp"), buildQuery("known.stream.test", "A"));
    const live = records(await stream.until((f) => f.event === "record", 5000));
    expect(Date.now() - sent).toBeLessThan(1000);
    expect(live).toHaveLength(1);
    expect(live[0].name).toBe("known.stream.test.");
    expect(live[0].data.record).toMatchObject({ rcode: "NOERROR", answer_count: 1 });
    expect(live[0].data.steps).toEqual([
      { event_index: 0, sequence_tag: "main", node_index: 1, kind: "executor", tag: "local", outcome: "entered" },
      { event_index: 1, sequence_tag: "main", node_index: 1, kind: "executor", tag: "local", outcome: "next" },
      { event_index: 2, sequence_tag: "main", node_index: 2, kind: "executor", tag: "big", outcome: "entered" },
      { event_index: 3, sequence_tag: "main", node_index: 2, kind: "executor", tag: "big", outcome: "next" },
    ]);
  } finally {
    await stream.close();
  }
});

test("tail is capped at memory_tail; without tail only new records come; a heartbeat comes at once", async () => {
  const all = await openSse(`${s.apiUrl}${R}/stream?tail=500`);
  try {
    const first = await all.next();
    expect(first && isHeartbeat(first)).toBe(true);
    const replay = records(await all.until((f) => f.event === "record" && (f.data ?? "").includes("known.stream.test")));
    expect(replay).toHaveLength(8);
  } finally {
    await all.close();
  }
  const none = await openSse(`${s.apiUrl}${R}/stream`);
  try {
    await udpExchange(s.port("udp"), buildQuery("after.stream.test", "A"));
    const got = records(await none.until((f) => f.event === "record"));
    expect(got.map((r) => r.name)).toEqual(["after.stream.test."]);
  } finally {
    await none.close();
  }
});

test("Last-Event-ID resumes after that record (the records still held in memory)", async () => {
  const held = (await allRecords(s, "rec")).slice(0, 4).reverse();
  const stream = await openSse(`${s.apiUrl}${R}/stream?tail=1`, { "last-event-id": String(held[0].id) });
  try {
    const got = records(await stream.until((f) => f.event === "record" && f.id === String(held[3].id)));
    expect(got.map((r) => r.id)).toEqual(held.slice(1).map((r) => r.id));
  } finally {
    await stream.close();
  }
});

test("406 when the client refuses text/event-stream; 400 for a bad tail", async () => {
  const res = await s.api(`${R}/stream`, { headers: { accept: "application/json" } });
  expect(res.status).toBe(406);
  expect(await res.json()).toMatchObject({ ok: false, code: "not_acceptable" });
  expect((await apiJson<{ code: string }>(s, `${R}/stream?tail=-1`, { headers: { accept: "text/event-stream" } }, 400)).code).toBe("invalid_query");
});

/** A raw HTTP/1.0 SSE request whose socket is paused: the kernel buffers fill and the server must hold or skip. */
async function pausedStream(path: string): Promise<{ drain(idleMs: number): Promise<string>; close(): void }> {
  const sock = net.connect(Number(new URL(s.apiUrl).port), "127.0.0.1");
  await new Promise<void>((r) => sock.once("connect", () => r()));
  sock.write(`GET ${path} HTTP/1.0\r\nHost: ${new URL(s.apiUrl).host}\r\nAccept: text/event-stream\r\n\r\n`);
  sock.pause();
  return {
    drain: (idleMs) =>
      new Promise((resolve) => {
        const parts: Buffer[] = [];
        let timer = setTimeout(() => resolve(Buffer.concat(parts).toString("utf8")), idleMs);
        sock.on("data", (d: Buffer) => {
          parts.push(d);
          clearTimeout(timer);
          timer = setTimeout(() => resolve(Buffer.concat(parts).toString("utf8")), idleMs);
        });
        sock.resume();
      }),
    close: () => sock.destroy(),
  };
}

test("a client that does not read skips records (event: dropped) while DNS and other clients go on", async () => {
  const slow = await pausedStream(`${R}/stream`);
  const fast = await openSse(`${s.apiUrl}${R}/stream`);
  try {
    const before = (await apiJson<{ sample_size: number }>(s, `${R}/stats/rcode`)).sample_size;
    const n = 12_000;
    const fastSeen = new Set<number>();
    const reading = (async () => {
      while (fastSeen.size < n) {
        const f = await fast.next(10_000).catch(() => null);
        if (f === null) return;
        for (const r of records([f])) fastSeen.add(r.id);
      }
    })();
    // 40 answers per record make frames of several KiB, more than the socket buffers hold.
    const packets = Array.from({ length: n }, (_, i) => buildQuery("big.stream.test", "A", { id: i }));
    const answers = await udpBurst(s.port("udp"), packets, { timeoutMs: 30_000, perTick: 20 });
    expect(answers.size).toBe(n);
    await committed(s, "rec", before + n, 30_000);
    await reading;
    expect(fastSeen.size).toBe(n);
    const text = await slow.drain(1500);
    const recordFrames = text.split("\nevent: record\n").length - 1;
    const dropped = [...text.matchAll(/event: dropped\ndata: \{"dropped":(\d+)\}/g)].reduce((a, m) => a + Number(m[1]), 0);
    expect(dropped).toBeGreaterThan(0);
    expect(recordFrames + dropped).toBe(n);
  } finally {
    slow.close();
    await fast.close();
  }
}, 90_000);
