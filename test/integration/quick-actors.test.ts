// Quick-setup instances (`exec: forward 127.0.0.1:<port>`, `matches: qname domain:x`) as actors:
// GET /api/actors lists each one under its parent plugin's actor with its type and state, the
// stream shows them destroying while a reload takes their parent down, and a reload to a
// configuration without them leaves none.
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, expect, test } from "vitest";
import { answerIps, query, rcodeOf } from "../helpers/dns.js";
import { answerWith, startResponder, type Responder } from "../helpers/responder.js";
import { openSse } from "../helpers/sse.js";
import { startSluice, type RunningSluice } from "../helpers/sluice.js";

interface ActorRow {
  id: string;
  parent: string | null;
  status: string;
  state: unknown;
  context: Record<string, unknown>;
}

let upstream: Responder;
let s: RunningSluice;

const servers = `  - { tag: udp, type: udp_server, args: { entry: main, listen: "127.0.0.1:0" } }\n`;
const withQuick = (port: number): string => `api:
  http: 127.0.0.1:0
plugins:
  - tag: main
    type: sequence
    args:
      - matches: qname domain:blocked.test
        exec: reject 3
      - exec: forward 127.0.0.1:${port}
${servers}`;
const withoutQuick = (port: number): string => `api:
  http: 127.0.0.1:0
plugins:
  - { tag: fw, type: forward, args: { upstreams: [{ addr: "127.0.0.1:${port}" }] } }
  - { tag: main, type: sequence, args: [{ exec: $fw }] }
${servers}`;

beforeAll(async () => {
  upstream = await startResponder((q) => answerWith(q, ["192.0.2.7"]));
  s = await startSluice(withQuick(upstream.port));
});
afterAll(async () => {
  await s.stop();
  await upstream.close();
});

const actors = async (): Promise<ActorRow[]> => ((await (await s.api("/api/actors")).json()) as { actors: ActorRow[] }).actors;

test("each quick-setup instance is an actor under its parent plugin's actor, and a reload that removes them leaves none", async () => {
  // The instances the actors stand for answer queries.
  expect(answerIps(await query(s.udpPort, "x.test"))).toEqual(["192.0.2.7"]);
  expect(rcodeOf(await query(s.udpPort, "a.blocked.test"))).toBe(3);

  const g = s.app.generation;
  const main = `runtime:${g}/plugin:main`;
  const quick = (await actors()).filter((a) => a.id.includes("/quick:"));
  // `reject 3` is one of the sequence's built-in steps, not an instance.
  expect(quick.map((a) => a.id).sort()).toEqual([`${main}/quick:qs.exec.main.1.forward`, `${main}/quick:qs.match.main.0.0.qname`]);
  expect(quick.find((a) => a.id.endsWith("forward"))).toMatchObject({ parent: main, status: "active", state: "ready", context: { tag: "qs.exec.main.1.forward", type: "forward", kind: "executor" } });
  expect(quick.find((a) => a.id.endsWith("qname"))).toMatchObject({ parent: main, state: "ready", context: { type: "qname", kind: "matcher" } });
  expect((await actors()).find((a) => a.id === main)).toMatchObject({ state: "ready", context: { quick: ["qs.match.main.0.0.qname", "qs.exec.main.1.forward"] } });

  // A reload to a configuration without quick setups: the old ones go destroying with their parent, then away.
  const stream = await openSse(`${s.apiUrl}/api/actors/stream`);
  try {
    writeFileSync(join(s.dir, "sluice.yaml"), withoutQuick(upstream.port));
    expect((await s.api("/api/reload", { method: "POST" })).status).toBe(202);
    await stream.until((f) => {
      const a = f.event === "actor" ? (JSON.parse(f.data as string) as ActorRow) : null;
      return a?.id === `${main}/quick:qs.exec.main.1.forward` && a.state === "destroying";
    }, 10_000);
  } finally {
    await stream.close();
  }
  const deadline = Date.now() + 10_000;
  let after = await actors();
  while (after.some((a) => a.id.startsWith(`runtime:${g}`)) || !after.some((a) => a.id === `runtime:${g + 1}` && a.state === "active")) {
    if (Date.now() > deadline) throw new Error(`generation ${g} never went: ${after.map((a) => a.id).join(", ")}`);
    await new Promise((r) => setTimeout(r, 20));
    after = await actors();
  }
  expect(after.filter((a) => a.id.includes("/quick:"))).toEqual([]);
  expect(after.find((a) => a.id === `runtime:${g + 1}/plugin:main`)).toMatchObject({ state: "ready", context: { quick: [] } });
  expect(answerIps(await query(s.udpPort, "x.test"))).toEqual(["192.0.2.7"]);
});
