// docs/plugins.md, "Example: name a seen client and pause its group", run as printed: its configuration
// starts the real program (dist/), and each `$` command prints exactly what the document shows.
import { afterAll, beforeAll, expect, test } from "vitest";
import { startDocExample, type RunningExample } from "../helpers/doc-example.js";
import { requireTool } from "../helpers/tools.js";

let ex: RunningExample;
beforeAll(async () => {
  for (const tool of ["dig", "curl", "jq"]) requireTool(tool);
  ex = await startDocExample("name a seen client and pause its group");
});
afterAll(async () => {
  await ex.stop();
});

test("every command of the example prints what the document shows", async () => {
  const results = await ex.runAll();
  expect(results.length).toBe(10);
  for (const r of results) expect(r.output, r.command).toBe(r.printed);
});
