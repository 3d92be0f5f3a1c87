// The writer's totals in shared memory (progress.ts): what a writer thread stores, the DNS thread
// reads, with no message between them; a waiting caller (the bench) is woken by the next commit.
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { Worker } from "node:worker_threads";
import { expect, test } from "vitest";
import { COMMIT_BUCKETS, WriterProgress } from "../../src/plugins/executors/query-recorder/progress.js";

test("totals stored by the writer are read as they were stored: counts add up, the store's size stays until measured again", () => {
  const dns = new WriterProgress();
  expect(dns.read()).toMatchObject({ answered: 0, lost: 0, records: 0, dbBytes: null, commits: 0, commitSeconds: 0 });
  const writer = new WriterProgress(dns.buffer);
  writer.stored(7, 4096);
  writer.committed(256, 0, 0.002, 263, null);
  writer.committed(100, 100, 3, 263, 8192);
  const p = dns.read();
  expect(p).toMatchObject({ answered: 356, lost: 100, records: 263, dbBytes: 8192, commits: 2, commitSeconds: 3.002 });
  expect(dns.answered()).toBe(356);
  // 2 ms in the 2.5 ms bucket, 3 s above every bound.
  const want = new Array<number>(COMMIT_BUCKETS.length + 1).fill(0);
  want[COMMIT_BUCKETS.indexOf(0.0025)] = 1;
  want[COMMIT_BUCKETS.length] = 1;
  expect([...p.commitCounts]).toEqual(want);
  writer.stored(0, null);
  expect(dns.read()).toMatchObject({ records: 0, dbBytes: 8192, answered: 356 });
});

test("across threads: a caller waiting on changed() wakes at the writer's commit, and sees it", async () => {
  const progress = new WriterProgress();
  const since = progress.version();
  // The writer's side as the writer thread runs it: the compiled module, in a thread of its own.
  const compiled = pathToFileURL(join(import.meta.dirname, "..", "..", "dist", "src", "plugins", "executors", "query-recorder", "progress.js")).href;
  const thread = new Worker(
    `const { workerData } = require("node:worker_threads");
     import(workerData.compiled).then(({ WriterProgress }) => {
       const p = new WriterProgress(workerData.buffer);
       setTimeout(() => p.committed(5, 0, 0.001, 5, null), 50);
     });`,
    { eval: true, workerData: { buffer: progress.buffer, compiled } },
  );
  try {
    await progress.changed(since, 5000);
    expect(progress.version()).toBe(since + 1);
    expect(progress.answered()).toBe(5);
  } finally {
    await thread.terminate();
  }
});
