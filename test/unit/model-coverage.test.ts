// Every machine has a model test: each machines/*.machine.ts is imported (as a value, not only for
// its types) by a test in test/model/, which walks or drives it against the real implementation.
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { expect, test } from "vitest";

const root = join(import.meta.dirname, "..", "..");

test("every machine in machines/ has a model test in test/model/", () => {
  const machines = readdirSync(join(root, "machines")).filter((f) => f.endsWith(".machine.ts"));
  const modelTests = readdirSync(join(root, "test", "model")).filter((f) => f.endsWith(".model.test.ts"));
  const tested = new Set<string>();
  for (const file of modelTests) {
    const text = readFileSync(join(root, "test", "model", file), "utf8");
    for (const m of text.matchAll(/^import (?!type )[^;]*?from "\.\.\/\.\.\/machines\/([a-z-]+\.machine)\.js";/gm)) tested.add(`${m[1]}.ts`);
  }
  expect(machines.length).toBeGreaterThan(10);
  expect(machines.filter((m) => !tested.has(m))).toEqual([]);
});
