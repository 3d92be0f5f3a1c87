// docs/operations.md "Users, roles and tokens": the worked example runs as printed — sluice passwd,
// an operator's switch and a refused reload, a dashboard session with curl's cookie jar, a metrics
// token that scrapes metrics and is refused the configuration, its revocation, and the audit trail
// of all of it in order.
import { afterAll, beforeAll, expect, test } from "vitest";
import { CLI } from "../helpers/cli.js";
import { startDocExample, type RunningExample } from "../helpers/doc-example.js";

let ex: RunningExample;
beforeAll(async () => {
  ex = await startDocExample("an operator, a metrics token and the audit trail", { replace: [["sluice passwd", `node ${CLI} passwd`]] }, "operations.md");
});
afterAll(() => ex.stop());

test("every command prints what the document prints", async () => {
  for (const r of await ex.runAll()) expect(r.output, r.command).toBe(r.printed);
}, 60_000);
