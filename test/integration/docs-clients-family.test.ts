// docs/plugins.md, "Example: a family set-up", run as printed: its configuration starts the real program
// (dist/), and each `$` command prints exactly what the document shows.
import { afterAll, beforeAll, expect, test } from "vitest";
import { startDocExample, type RunningExample } from "../helpers/doc-example.js";
import { requireTool } from "../helpers/tools.js";

let ex: RunningExample;
beforeAll(async () => {
  for (const tool of ["dig", "curl", "jq"]) requireTool(tool);
  ex = await startDocExample("a family set-up");
});
afterAll(async () => {
  await ex.stop();
});

test("every command of the example prints what the document shows", async () => {
  const results = await ex.runAll();
  expect(results.length).toBeGreaterThanOrEqual(16);
  for (const r of results) expect(r.output, r.command).toBe(r.printed);
});
