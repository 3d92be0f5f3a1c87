// docs/plugins.md, forward's worked example "a majority of three upstreams", run as printed: three
// responders on 127.0.0.1 stand for the upstreams at 127.0.0.1:5301–5303 (the fastest one lies).
import { afterAll, beforeAll, expect, test } from "vitest";
import { startDocExample, type RunningExample } from "../helpers/doc-example.js";
import { answerWith, startResponder, type Responder } from "../helpers/responder.js";
import { requireTool } from "../helpers/tools.js";

const answers: Record<string, string[][]> = {
  "bank.example": [["203.0.113.66"], ["192.0.2.10"], ["192.0.2.10"]],
  "split.example": [["192.0.2.1"], ["192.0.2.2"], ["192.0.2.3"]],
};

let upstreams: Responder[] = [];
let ex: RunningExample;
beforeAll(async () => {
  requireTool("dig");
  upstreams = await Promise.all(
    [0, 1, 2].map((i) =>
      startResponder(async (q) => {
        // The liar answers at once, the honest ones a little later.
        await new Promise((r) => setTimeout(r, i * 20));
        return answerWith(q, answers[q.questions[0].name.toLowerCase()]?.[i] ?? []);
      }),
    ),
  );
  ex = await startDocExample("a majority of three upstreams", { replace: upstreams.map((u, i) => [`127.0.0.1:530${i + 1}`, `127.0.0.1:${u.port}`]) });
});
afterAll(async () => {
  await ex?.stop();
  await Promise.all(upstreams.map((u) => u.close()));
});

test("the example's commands print what the document shows", async () => {
  for (const r of await ex.runAll()) expect(r.output, r.command).toBe(r.printed);
});
