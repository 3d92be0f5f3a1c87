// Every plugin type in the catalog has its section in docs/plugins.md.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { expect, test } from "vitest";
import { createCatalog } from "../../src/plugins/catalog.js";

test("docs/plugins.md documents every plugin type", () => {
  const doc = readFileSync(join(import.meta.dirname, "..", "..", "docs", "plugins.md"), "utf8");
  const headings = [...doc.matchAll(/^#{2,3} (.+)$/gm)].flatMap((m) => m[1].split(",").map((s) => s.trim()));
  const missing = createCatalog("full").definitions().map((d) => d.type).filter((t) => !headings.includes(t));
  expect(missing).toEqual([]);
});
