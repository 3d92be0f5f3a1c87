// The hook executors' bounded queue: workers and waiting places, refusal when full, and close(): what
// finishes within the grace period runs, then running jobs are aborted and waiting ones dropped.
import { describe, expect, test } from "vitest";
import { WorkQueue, type Job } from "../../src/plugins/executors/hooks/work-queue.js";

/** A job that runs until released or aborted; records that it started. */
function held(log: string[], name: string): { job: Job; release: () => void } {
  let release: () => void = () => undefined;
  const job: Job = (signal) =>
    new Promise<void>((resolve, reject) => {
      log.push(`start ${name}`);
      release = () => resolve();
      signal.addEventListener("abort", () => reject(new Error(`${name} aborted`)));
    });
  return { job, release: () => release() };
}

const turn = (): Promise<void> => new Promise((r) => setImmediate(r));

describe("WorkQueue", () => {
  test("workers run, capacity waits, the rest is refused; jobs start on a later turn", async () => {
    const log: string[] = [];
    const depth = { value: 0 };
    const q = new WorkQueue(2, 1, () => log.push("dropped"), depth);
    const jobs = ["a", "b", "c", "d"].map((n) => held(log, n));
    // One for the free worker, two waiting places; the fourth finds no room.
    expect(jobs.map((j) => q.offer(j.job))).toEqual([true, true, true, false]);
    expect(log).toEqual([]);
    await turn();
    expect(log).toEqual(["start a"]);
    expect(depth.value).toBe(2);
    expect(q.full).toBe(true);
    jobs[0].release();
    await turn();
    expect(log).toEqual(["start a", "start b"]);
    expect(depth.value).toBe(1);
    expect(q.full).toBe(false);
  });

  test("capacity 0: only as many as there are free workers", async () => {
    const log: string[] = [];
    const q = new WorkQueue(0, 2, () => undefined);
    expect([1, 2, 3].map((i) => q.offer(held(log, String(i)).job))).toEqual([true, true, false]);
    await turn();
    expect(log).toEqual(["start 1", "start 2"]);
    expect(q.offer(held(log, "4").job)).toBe(false);
  });

  test("submit runs at once when a worker is free, else waits its turn, and settles with the job", async () => {
    const log: string[] = [];
    const q = new WorkQueue(1, 1, () => undefined);
    const a = held(log, "a");
    const b = held(log, "b");
    const first = q.submit(a.job);
    expect(log).toEqual(["start a"]);
    const second = q.submit(b.job);
    expect(q.submit(held(log, "c").job)).toBeNull();
    a.release();
    await first;
    await turn();
    expect(log).toEqual(["start a", "start b"]);
    b.release();
    await expect(second).resolves.toBeUndefined();
  });

  test("close: jobs that finish within the grace period all run; nothing is dropped", async () => {
    const done: string[] = [];
    const q = new WorkQueue(5, 1, () => done.push("dropped"));
    for (const n of ["a", "b", "c"]) q.offer(() => new Promise<void>((r) => setImmediate(() => (done.push(n), r()))));
    await q.close(5000);
    expect(done).toEqual(["a", "b", "c"]);
    expect(q.offer(() => Promise.resolve())).toBe(false);
  });

  test("close: past the grace period running jobs are aborted and waiting ones dropped", async () => {
    const log: string[] = [];
    const q = new WorkQueue(5, 1, () => log.push("dropped"));
    for (const n of ["a", "b", "c"]) q.offer(held(log, n).job);
    await turn();
    const began = performance.now();
    await q.close(50);
    expect(performance.now() - began).toBeGreaterThanOrEqual(45);
    expect(log).toEqual(["start a", "dropped", "dropped"]);
    expect(q.signal.aborted).toBe(true);
  });
});
