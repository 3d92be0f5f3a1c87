// GET /api/actors/stream (issue 24, item 6): the current snapshot of every actor first, then each
// change, while a cron job runs, a download batch runs, a cache dump is taken and a reload happens
// (the new cache loads its dump_file, the old one writes it as it goes).
import { afterAll, beforeAll, expect, test } from "vitest";
import { startFileServer, type FileServer } from "../helpers/file-server.js";
import { isHeartbeat, openSse, type SseFrame, type SseStream } from "../helpers/sse.js";
import { startSluice, type RunningSluice } from "../helpers/sluice.js";

interface ActorFrame {
  id: string;
  status: string;
  state: unknown;
  context: Record<string, unknown>;
}

let files: FileServer;
let s: RunningSluice;
beforeAll(async () => {
  files = await startFileServer();
  s = await startSluice(`api:
  http:
    listen: 127.0.0.1:0
    sse_heartbeat: 500ms
plugins:
  - { tag: c, type: cache, args: { size: 100, dump_file: cache.dump } }
  - { tag: jobs, type: cron, args: { jobs: [{ name: tick, interval: 1h, executors: ["sleep 50"] }] } }
  - tag: dl
    type: download
    args:
      startup_if_missing: false
      downloads:
        - { url: "${files.url}/files/a.txt", dir: lists }
  - { tag: main, type: sequence, args: [{ exec: $c }, { exec: reject 3 }] }
  - { tag: udp, type: udp_server, args: { entry: main, listen: "127.0.0.1:0" } }
`);
});
afterAll(async () => {
  await s.stop();
  await files.close();
});

const actorsOf = (frames: SseFrame[]): ActorFrame[] => frames.filter((f) => f.event === "actor").map((f) => JSON.parse(f.data as string) as ActorFrame);
const stateText = (state: unknown): string => (typeof state === "string" ? state : JSON.stringify(state));

/** Frames until one (after seen[from]) for an actor whose id ends with `suffix` shows `state` (a substring of its state value). */
async function untilActor(stream: SseStream, suffix: string, state: string, seen: ActorFrame[], from: number): Promise<void> {
  const match = (a: ActorFrame): boolean => a.id.endsWith(suffix) && stateText(a.state).includes(state);
  if (seen.slice(from).some(match)) return;
  const frames = await stream.until((f) => f.event === "actor" && match(JSON.parse(f.data as string) as ActorFrame), 10_000).catch((err: unknown) => {
    throw new Error(`${suffix} never showed ${state}; seen: ${seen.map((a) => `${a.id}=${stateText(a.state)}`).join(", ")}`, { cause: err });
  });
  seen.push(...actorsOf(frames));
}

test("every actor first, then its changes while a cron job, a download, a cache dump and a reload run", async () => {
  const stream = await openSse(`${s.apiUrl}/api/actors/stream`);
  try {
    // A heartbeat, then the snapshot of every actor /api/actors lists.
    const listed = ((await (await s.api("/api/actors")).json()) as { actors: ActorFrame[] }).actors.map((a) => a.id);
    let n = 0;
    const opening = await stream.until((f) => f.event === "actor" && ++n === listed.length);
    expect(opening.some(isHeartbeat)).toBe(true);
    const first = actorsOf(opening);
    expect(first.map((a) => a.id).sort()).toEqual([...listed].sort());
    expect(first.find((a) => a.id === "app")).toMatchObject({ status: "active", state: { running: "serving" } });
    const seen: ActorFrame[] = [...first];
    const changes = (suffix: string): string[] => seen.filter((a) => a.id.endsWith(suffix)).map((a) => stateText(a.state));

    // A cron job's manual run: its actor goes running and back.
    let mark = seen.length;
    expect((await s.api("/api/plugins/jobs/jobs/tick/run", { method: "POST" })).status).toBeLessThan(300);
    await untilActor(stream, "tick", "running", seen, mark);
    await untilActor(stream, "tick", "idle", seen, mark);

    // A download batch.
    mark = seen.length;
    const dl = await s.api("/api/plugins/dl/download", { method: "POST", headers: { "content-type": "application/json" }, body: "{}" });
    expect(dl.status).toBe(200);
    await untilActor(stream, "download:dl", "downloading", seen, mark);
    await untilActor(stream, "download:dl", "idle", seen, mark);

    // A cache dump: the cache actor works, then is idle again.
    mark = seen.length;
    expect((await s.api("/api/plugins/c/dump")).status).toBe(200);
    await untilActor(stream, "cache:c", "working", seen, mark);
    await untilActor(stream, "cache:c", "idle", seen, mark);

    // A reload: the app goes reloading and serving again, and a second generation appears.
    mark = seen.length;
    expect((await s.api("/api/reload", { method: "POST" })).status).toBe(202);
    await untilActor(stream, "app", "reloading", seen, mark);
    // The new cache loads dump_file before its plugin is ready; the old one writes it a last time as it goes.
    await untilActor(stream, "runtime:2/plugin:c/cache:c", "loading", seen, mark);
    await untilActor(stream, "runtime:2", "active", seen, mark);
    await untilActor(stream, "runtime:1/plugin:c/cache:c", "stopping", seen, mark);
    await untilActor(stream, "app", "serving", seen, mark);
    console.log(`actor stream: ${seen.length} frames; cron job ${changes("tick").join(" → ")}; download ${changes("download:dl").join(" → ")}; cache ${changes("cache:c").join(" → ")}`);
  } finally {
    await stream.close();
  }
});

test("a client that does not accept text/event-stream gets 406", async () => {
  const res = await s.api("/api/actors/stream", { headers: { accept: "application/json" } });
  expect(res.status).toBe(406);
  expect(await res.json()).toMatchObject({ ok: false, code: "not_acceptable" });
});
