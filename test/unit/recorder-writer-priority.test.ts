// The recorder's writer thread runs below DNS: nice 10 and, on Linux, SCHED_IDLE, so that the DNS
// thread takes the core from it as soon as a packet wakes it (docs/operations.md, "Priorities").
import { rmSync } from "node:fs";
import { join } from "node:path";
import { expect, test } from "vitest";
import { WRITER_NICE } from "../../src/plugins/executors/query-recorder/protocol.js";
import { WriterLink } from "../../src/plugins/executors/query-recorder/writer-link.js";
import { SCHED_IDLE, threadPriorities } from "../helpers/proc.js";
import { tempDir } from "../helpers/sluice.js";

test("the writer thread is at nice 10 under SCHED_IDLE once its store is open, and this thread is untouched", async () => {
  const dir = tempDir("sluice-writer-");
  const before = threadPriorities(process.pid);
  const link = new WriterLink(
    {
      role: "query-recorder-writer",
      sqlite: { path: join(dir, "records.db"), instance: "test", memoryTail: 16, maxRecords: 0, retentionMs: 86_400_000, cacheMb: 1 },
      postgres: null,
      memoryTail: 16,
    },
    { records: () => undefined, replay: () => undefined, frames: () => undefined, log: () => undefined, exit: () => undefined },
  );
  try {
    await link.ready;
    const writers = threadPriorities(process.pid).filter((t) => t.nice === WRITER_NICE);
    expect(writers).toEqual([{ nice: WRITER_NICE, policy: SCHED_IDLE }]);
    // The threads that were there before (this test's, V8's helpers) keep their policy.
    expect(before.every((t) => t.policy !== SCHED_IDLE)).toBe(true);
    expect(threadPriorities(process.pid).filter((t) => t.policy === SCHED_IDLE)).toHaveLength(1);
  } finally {
    await link.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
