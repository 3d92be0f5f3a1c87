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

/** A writer thread with an injected starvation watch: whether DNS ran all the time, or not at all. */
function watchedWriter(dir: string, logs: string[], dnsBusy: boolean): WriterLink {
  // Every look finds the thread waited runnable for all of the window since the last.
  return new WriterLink(
    {
      role: "query-recorder-writer",
      sqlite: { path: join(dir, "records.db"), instance: "test", memoryTail: 16, maxRecords: 0, retentionMs: 86_400_000, cacheMb: 1 },
      postgres: null,
      memoryTail: 16,
    },
    { records: () => undefined, replay: () => undefined, frames: () => undefined, log: (m) => logs.push(m.msg), exit: () => undefined },
    { windowMs: 20, runnableWaitMs: () => performance.now(), dnsRunMs: () => (dnsBusy ? performance.now() : 0) },
  );
}

test("a writer that waits runnable under SCHED_IDLE for its whole window while DNS is idle returns to the normal policy at nice 10, and says so", async () => {
  const dir = tempDir("sluice-writer-");
  const logs: string[] = [];
  const link = watchedWriter(dir, logs, false);
  try {
    await link.ready;
    for (let i = 0; i < 200 && logs.length === 0; i++) await new Promise((r) => setTimeout(r, 10));
    // This suite runs with CAP_SYS_NICE; unprivileged it takes RLIMIT_NICE 10 (the Debian unit's LimitNICE=+10).
    expect(logs).toEqual(["query recorder writer got no CPU under SCHED_IDLE; it runs at nice 10 from now on"]);
    expect(threadPriorities(process.pid).filter((t) => t.nice === WRITER_NICE)).toEqual([{ nice: WRITER_NICE, policy: 0 }]);
  } finally {
    await link.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test("a writer starved while DNS keeps the core busy (a flood) stays under SCHED_IDLE", async () => {
  const dir = tempDir("sluice-writer-");
  const logs: string[] = [];
  const link = watchedWriter(dir, logs, true);
  try {
    await link.ready;
    // Ten windows.
    await new Promise((r) => setTimeout(r, 200));
    expect(logs).toEqual([]);
    expect(threadPriorities(process.pid).filter((t) => t.nice === WRITER_NICE)).toEqual([{ nice: WRITER_NICE, policy: SCHED_IDLE }]);
  } finally {
    await link.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
