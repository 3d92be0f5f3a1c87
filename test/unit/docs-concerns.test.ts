// docs/development.md has one table of every concern: each machine file has its row, and each guard
// of the API's refusal table is named there with its code.
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { expect, test } from "vitest";
import { GUARD_REFUSALS } from "../../src/api/guards.js";

const root = join(import.meta.dirname, "..", "..");

test("the concerns table in docs/development.md lists every machine and every refusing guard with its code", () => {
  const doc = readFileSync(join(root, "docs", "development.md"), "utf8");
  const rows = doc.split("\n").filter((l) => l.startsWith("| ") && l.includes("machines/"));
  const machines = readdirSync(join(root, "machines")).filter((f) => f.endsWith(".machine.ts"));
  expect(machines.filter((m) => !rows.some((r) => r.includes(`machines/${m}`)))).toEqual([]);
  const guards = Object.entries(GUARD_REFUSALS).filter(([g, r]) => !rows.some((row) => row.includes(`${g} → ${r.code}`)));
  expect(guards.map(([g]) => g)).toEqual([]);
});
