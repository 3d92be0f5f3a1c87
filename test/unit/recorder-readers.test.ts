// The recorder's reader pool as the actor's admission sees it: closing it is what the guard
// recorderReadersOpen reads (no read is admitted after), and a read admitted just before it closed
// fails with a failure code, not a refusal.
import { expect, test } from "vitest";
import { ReaderPool } from "../../src/plugins/executors/query-recorder/readers.js";
import { RouteError } from "../../src/registry/control.js";

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
