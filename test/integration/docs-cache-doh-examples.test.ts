// The worked examples of docs/plugins.md for cache prefetch / min_positive_ttl and for the DoH JSON API, run
// as printed against the real program (test/helpers/doc-example.ts).

import { createServer } from "node:net";
import { afterEach, expect, test } from "vitest";
import { startDocExample, type RunningExample } from "../helpers/doc-example.js";
import { requireTool } from "../helpers/tools.js";

let ex: RunningExample | null = null;
afterEach(async () => {
  await ex?.stop();
  ex = null;
});

/** A TCP port on 127.0.0.1 free a moment ago (bound on port 0, read back, released). */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const a = srv.address();
      const port = typeof a === "object" && a !== null ? a.port : 0;
      srv.close(() => resolve(port));
    });
  });
}

test("Example: prefetch and min_positive_ttl", async () => {
  for (const tool of ["dig", "curl", "jq"]) requireTool(tool);
  ex = await startDocExample("prefetch and min_positive_ttl");
  for (const r of await ex.runAll()) expect(r.output, r.command).toBe(r.printed);
});

test("Example: the DoH JSON API", async () => {
  for (const tool of ["curl", "jq"]) requireTool(tool);
  const port = await freePort();
  ex = await startDocExample("the DoH JSON API", { replace: [["127.0.0.1:8053", `127.0.0.1:${port}`]] });
  for (const r of await ex.runAll()) expect(r.output, r.command).toBe(r.printed);
});
