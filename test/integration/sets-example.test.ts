// docs/plugins.md's worked example of ipset and nftset ("answers into kernel sets"), run as printed:
// the real program and every command inside a network namespace of the test's own, so the sets the
// example makes and fills are the test's alone.
import { afterAll, beforeAll, expect, test } from "vitest";
import { startDocExample, type RunningExample } from "../helpers/doc-example.js";
import { makeNetns, type Netns } from "../helpers/netns.js";
import { requireTool } from "../helpers/tools.js";

let ns: Netns;
let ex: RunningExample | undefined;

beforeAll(async () => {
  for (const tool of ["dig", "curl", "jq"]) requireTool(tool);
  ns = await makeNetns();
});
afterAll(async () => {
  await ex?.stop();
  await ns?.remove();
});

test("Example: answers into kernel sets — every command prints what the document shows", async () => {
  ex = await startDocExample("answers into kernel sets", { netns: ns.prefix });
  for (const r of await ex.runAll()) expect(r.output, r.command).toBe(r.printed);
});
