// A worker's log lines in its primary's ring (src/app/workers/log-forward.ts): batched every 250 ms,
// those already in the worker's ring first, at most MAX_BATCH a batch, the rest counted and reported.
import { Writable } from "node:stream";
import { afterEach, expect, test, vi } from "vitest";
import { FORWARD_INTERVAL_MS, forwardLogs, MAX_BATCH, takeLogs } from "../../src/app/workers/log-forward.js";
import { Bus } from "../../src/bus.js";
import { LogRing } from "../../src/observability/log-ring.js";
import { createLogger } from "../../src/observability/logger.js";
import type { ChannelMessage } from "../../src/registry/process-role.js";

afterEach(() => {
  vi.useRealTimers();
});

const line = (msg: string, level = 30): string => `${JSON.stringify({ level, time: 1000, worker: 2, msg })}\n`;

test("batches reach the primary's ring every interval, each line with its level and time; the last one at stop", () => {
  vi.useFakeTimers();
  const bus = new Bus();
  const ring = new LogRing(100, bus);
  ring.push(line("before"), "info", 1000);
  const sent: ChannelMessage[] = [];
  const stop = forwardLogs(ring, bus, (m) => sent.push(m) > 0);
  ring.push(line("after", 40), "warn", 2000);
  expect(sent).toEqual([]);
  vi.advanceTimersByTime(FORWARD_INTERVAL_MS);
  expect(sent).toHaveLength(1);
  // Nothing new: nothing sent.
  vi.advanceTimersByTime(FORWARD_INTERVAL_MS * 4);
  expect(sent).toHaveLength(1);
  ring.push(line("last"), "info", 3000);
  stop();
  expect(sent).toHaveLength(2);

  const primary = new LogRing(100, new Bus());
  for (const m of sent) takeLogs(m, 2, primary, createLogger({ level: "off" }));
  expect(primary.tail(10).map((e) => [e.message, e.level, e.time_ms, e.fields.worker])).toEqual([
    ["before", "info", 1000, 2],
    ["after", "warn", 2000, 2],
    ["last", "info", 3000, 2],
  ]);
});

test("a batch holds at most MAX_BATCH lines; the primary says how many were left out; what is not a line is skipped", () => {
  vi.useFakeTimers();
  const bus = new Bus();
  const ring = new LogRing(10, bus);
  const sent: ChannelMessage[] = [];
  const stop = forwardLogs(ring, bus, (m) => sent.push(m) > 0);
  for (let i = 0; i < MAX_BATCH + 5; i++) ring.push(line(`q${i}`, 20), "debug", 1000 + i);
  vi.advanceTimersByTime(FORWARD_INTERVAL_MS);
  stop();
  expect(sent).toHaveLength(1);
  expect([(sent[0].lines as unknown[]).length, sent[0].dropped]).toEqual([MAX_BATCH, 5]);

  const primary = new LogRing(10, new Bus());
  const warned: string[] = [];
  const stdout = new Writable({
    write(chunk: Buffer, _encoding, done) {
      warned.push(chunk.toString());
      done();
    },
  });
  const log = createLogger({ level: "warn", stdout });
  takeLogs({ t: "logs", key: "", lines: [["x", "info"], 3, [line("ok"), "info", 5]], dropped: 5 }, 2, primary, log);
  expect(primary.tail(10).map((e) => e.message)).toEqual(["ok"]);
  expect(warned.join("")).toMatch(/"dropped":5/);
});
