// The recorder's reader pool as the actor's admission sees it: closing it is what the guard
// recorderReadersOpen reads (no read is admitted after), and a read admitted just before it closed
// fails with a failure code, not a refusal. A read runs in a reader process entirely at nice 19 under
// SCHED_IDLE, and a read whose process gets no CPU that way runs again in one at nice 19.
import { readdirSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import Database from "better-sqlite3";
import { expect, test } from "vitest";
import { READER_NICE } from "../../src/plugins/executors/query-recorder/protocol.js";
import { ReaderPool } from "../../src/plugins/executors/query-recorder/readers.js";
import { RouteError } from "../../src/registry/control.js";
import { SCHED_IDLE, threadPriorities } from "../helpers/proc.js";
import { tempDir } from "../helpers/sluice.js";

test("a closed pool shows itself closed to the admission guard, and a read that reaches it fails as query_recorder_read_failed", async () => {
  const pool = new ReaderPool({ role: "query-recorder-reader", path: "/nonexistent/never-opened.db", postgres: null, cacheMb: 1 });
  expect(pool.load).toEqual({ open: true, waiting: 0, limit: 32 });
  await pool.close();
  expect(pool.load.open).toBe(false);
  const err = await pool.read({ op: "record", id: 1 }).catch((e: unknown) => e);
  expect(err).toBeInstanceOf(RouteError);
  expect((err as RouteError).code).toBe("query_recorder_read_failed");
  expect((err as RouteError).message).toBe("the recorder stopped before the read ran");
});

/** The processes this one started (any thread's children), from /proc. */
function children(): number[] {
  return readdirSync("/proc/self/task").flatMap((t) => {
    try {
      return readFileSync(`/proc/self/task/${t}/children`, "utf8").split(" ").filter(Boolean).map(Number);
    } catch {
      return [];
    }
  });
}

test("a read runs in a reader process whose every thread (V8's collector and compiler helpers too) is at nice 19 under SCHED_IDLE, and closing the pool ends it", async () => {
  const dir = tempDir("sluice-readers-");
  const path = join(dir, "empty.db");
  new Database(path).close();
  const before = new Set(children());
  const pool = new ReaderPool({ role: "query-recorder-reader", path, postgres: null, cacheMb: 1 });
  try {
    // A file without the recorder's tables: the reader answers, with the code for it.
    const err = await pool.read({ op: "record", id: 1 }).catch((e: unknown) => e);
    expect((err as RouteError).code).toBe("query_recorder_read_failed");
    expect((err as RouteError).message).toBe("the recorder's database has no records table yet");
    const readers = children().filter((pid) => !before.has(pid) && readFileSync(`/proc/${pid}/cmdline`, "utf8").includes("reader-worker.js"));
    expect(readers).toHaveLength(1);
    const threads = threadPriorities(readers[0]);
    // The main thread, V8's platform threads and libuv's: a reader thread inside Sluice would share
    // Sluice's helpers, which stay at nice 0.
    expect(threads.length).toBeGreaterThan(3);
    expect(new Set(threads.map((t) => t.nice))).toEqual(new Set([READER_NICE]));
    // DNS, woken on the reader's core, takes it at once (docs/operations.md, "Priorities").
    expect(new Set(threads.map((t) => t.policy))).toEqual(new Set([SCHED_IDLE]));
    await pool.close();
    expect(children()).not.toContain(readers[0]);
  } finally {
    await pool.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test("a read whose SCHED_IDLE process waits runnable for its whole window runs again in a process at nice 19, and is answered", async () => {
  const dir = tempDir("sluice-readers-");
  const path = join(dir, "empty.db");
  new Database(path).close();
  const before = new Set(children());
  // Every look finds the process waited runnable for all of the window since the last: starved. (The
  // first read waits at least the process's start-up, several windows.)
  const pool = new ReaderPool({ role: "query-recorder-reader", path, postgres: null, cacheMb: 1 }, { windowMs: 20, runnableWaitMs: () => performance.now(), dnsRunMs: () => 0 });
  try {
    expect(pool.idlePolicy).toBe(true);
    const err = await pool.read({ op: "record", id: 1 }).catch((e: unknown) => e);
    // Answered by the reader that replaced the starved one.
    expect((err as RouteError).message).toBe("the recorder's database has no records table yet");
    expect(pool.idlePolicy).toBe(false);
    const readers = () => children().filter((pid) => !before.has(pid) && readFileSync(`/proc/${pid}/cmdline`, "utf8").includes("reader-worker.js"));
    await until(() => readers().length === 1);
    const threads = threadPriorities(readers()[0]);
    expect(new Set(threads.map((t) => t.nice))).toEqual(new Set([READER_NICE]));
    expect(threads.some((t) => t.policy === SCHED_IDLE)).toBe(false);
  } finally {
    await pool.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

async function until(ok: () => boolean): Promise<void> {
  for (let i = 0; i < 200 && !ok(); i++) await new Promise((r) => setTimeout(r, 10));
  expect(ok()).toBe(true);
}
