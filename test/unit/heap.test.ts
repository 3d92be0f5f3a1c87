import { expect, test } from "vitest";
import { tuneHeapGrowth } from "../../src/app/heap.js";

test("the heap growth cap applies unless node was given its own", () => {
  expect(tuneHeapGrowth(["--heap-growing-percent=300"])).toBe(false);
  expect(tuneHeapGrowth(["--heap_growing_percent", "300"])).toBe(false);
  expect(tuneHeapGrowth(["--max-old-space-size=512"])).toBe(true);
});
