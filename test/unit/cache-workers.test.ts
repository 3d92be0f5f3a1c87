// The primary's side of a cache with data-plane workers (src/plugins/executors/cache/workers.ts): how
// the workers' answers become a page, and how their refusals become the API's answers (the guard
// table). The workers are answers made here; test/integration/workers.test.ts runs real ones.
import { expect, test } from "vitest";
import { ApiError } from "../../src/api/errors.js";
import { refusalError } from "../../src/api/guards.js";
import { createLogger } from "../../src/observability/logger.js";
import type { CacheEntriesPage, CacheEntryRow } from "../../src/plugins/executors/cache/api.js";
import { entryId } from "../../src/plugins/executors/cache/key.js";
import { WorkerCaches } from "../../src/plugins/executors/cache/workers.js";
import type { ChannelMessage, ProcessRole, WorkerAnswer } from "../../src/registry/process-role.js";

const row = (domain: string): CacheEntryRow => ({ id: domain, domain } as unknown as CacheEntryRow);

/** A primary whose workers answer `answers(question)` (by worker number). */
function caches(answers: (question: Record<string, unknown>) => Record<number, Record<string, unknown>>): { caches: WorkerCaches; asked: Record<string, unknown>[] } {
  const asked: Record<string, unknown>[] = [];
  const role: Extract<ProcessRole, { kind: "primary" }> = {
    kind: "primary",
    workers: 2,
    channel: { send: () => true, listen: () => () => undefined },
    serverAddress: () => null,
    askWorkers: (message: ChannelMessage): Promise<WorkerAnswer[]> => {
      const question = message.question as Record<string, unknown>;
      asked.push(question);
      return Promise.resolve(Object.entries(answers(question)).map(([worker, payload]) => ({ worker: Number(worker), answer: { t: "answer", key: "", ...payload } })));
    },
  };
  return { caches: new WorkerCaches("c", role, 100, () => performance.now(), () => Date.now(), createLogger({ level: "off" })), asked };
}

const page = (domains: string[], next: string | null, total: number): { page: CacheEntriesPage } => ({ page: { entries: domains.map(row), next_cursor: next, total_entries: total } });

test("entries walk worker 1's pages, then worker 2's; each row says its worker; the total counts both", async () => {
  const { caches: c, asked } = caches((q) => (q.cursorOf === 1 && q.cursor === "b1.x" ? { 1: page(["a3"], null, 3), 2: page(["b1", "b2"], null, 2) } : { 1: page(["a1", "a2"], "b1.x", 3), 2: page(["b1", "b2"], null, 2) }));
  const first = await c.entries({ limit: 2, cursor: null });
  expect(first).toEqual({ entries: [{ ...row("a1"), worker: 1 }, { ...row("a2"), worker: 1 }], next_cursor: "w1.b1.x", total_entries: 5 });
  const second = await c.entries({ limit: 2, cursor: first.next_cursor });
  // Worker 1's last row: the next page is worker 2's first.
  expect(second).toEqual({ entries: [{ ...row("a3"), worker: 1 }], next_cursor: "w2", total_entries: 5 });
  const third = await c.entries({ limit: 2, cursor: second.next_cursor });
  expect(third).toEqual({ entries: [{ ...row("b1"), worker: 2 }, { ...row("b2"), worker: 2 }], next_cursor: null, total_entries: 5 });
  // Each worker is told whose cursor it is.
  expect(asked.map((q) => [q.cursorOf, q.cursor])).toEqual([
    [0, null],
    [1, "b1.x"],
    [2, null],
  ]);
  await expect(c.entries({ cursor: "b1.x" })).rejects.toThrow(/cursor is not one this cache handed out/);
});

test("a worker's refusal is the guard table's answer; no worker answering is plugin_unavailable", async () => {
  const busy = caches(() => ({ 1: { bytes: new Uint8Array() }, 2: { failure: { refused: { actor: "cache:c", guard: "cacheIdle", event: "CACHE.DUMP" } } } })).caches;
  const refused = refusalError(await busy.dump().catch((err: unknown) => err));
  expect(refused).toBeInstanceOf(ApiError);
  expect((refused as ApiError).code).toBe("cache_busy");
  const none = caches(() => ({})).caches;
  const gone = refusalError(await none.entries({}).catch((err: unknown) => err)) as ApiError;
  expect([gone.code, gone.message]).toEqual(["plugin_unavailable", "no data-plane worker is serving (they are starting or restarting); ask again"]);
});

test("a delete is found when one worker held the entry; not found only when none did; a bad id is refused here", async () => {
  const id = entryId("1|1|0||a.example");
  const notFound = { failure: { error: { code: "cache_entry_not_found", message: "no such entry" } } };
  expect(await caches(() => ({ 1: notFound, 2: { deleted: true } })).caches.deleteEntry(id)).toBe(true);
  expect(await caches(() => ({ 1: notFound, 2: notFound })).caches.deleteEntry(id)).toBe(false);
  const { caches: c, asked } = caches(() => ({}));
  await expect(c.deleteEntry("not an id")).rejects.toThrow(/not a cache entry id/);
  expect(asked).toEqual([]);
});
