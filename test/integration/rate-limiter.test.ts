// `rate_limiter` seen from clients: a burst is allowed, then refusals, then recovery at the configured rate.
import dgram from "node:dgram";
import { afterEach, expect, test } from "vitest";
import { ConfigError } from "../../src/config/diagnostics.js";
import { decodeMessage } from "../../src/dns/message.js";
import { buildQuery, rcodeOf } from "../helpers/dns.js";
import { answerWith, startResponder } from "../helpers/responder.js";
import { serversYaml, startSluice, type RunningSluice } from "../helpers/sluice.js";

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** One UDP query sent from `source` (any 127/8 address is loopback); resolves with the rcode. */
function queryFrom(port: number, source: string, name: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const sock = dgram.createSocket("udp4");
    const timer = setTimeout(() => {
      sock.close();
      reject(new Error(`no answer for ${name}`));
    }, 2000);
    sock.on("message", (msg) => {
      clearTimeout(timer);
      sock.close();
      resolve(rcodeOf(decodeMessage(msg)));
    });
    sock.bind(0, source, () => sock.send(buildQuery(name), port, "127.0.0.1"));
  });
}

async function sluice(limiter: string): Promise<RunningSluice> {
  const up = await startResponder((q) => answerWith(q, ["192.0.2.1"]));
  cleanups.push(() => up.close());
  const s = await startSluice(`plugins:
  - tag: rl
    type: rate_limiter
    args: ${limiter}
  - tag: main
    type: sequence
    args:
      - { matches: "!$rl", exec: reject 5 }
      - exec: forward 127.0.0.1:${up.port}
${serversYaml()}`);
  cleanups.push(() => s.stop());
  return s;
}

const metric = async (s: RunningSluice, name: string): Promise<number> => {
  const text = await s.app.services.metrics.text();
  return Number(new RegExp(`^${name}\\{plugin_tag="rl"\\} (\\d+)`, "m").exec(text)?.[1] ?? NaN);
};

test("a client gets its burst, is refused after it, and recovers one query per 1/qps", async () => {
  const s = await sluice("{ qps: 2, burst: 3 }");
  const burst: number[] = [];
  for (let i = 0; i < 4; i++) burst.push(await queryFrom(s.udpPort, "127.0.0.1", `b${i}.example`));
  expect(burst).toEqual([0, 0, 0, 5]);
  // One token comes back every 1/qps = 500 ms.
  await new Promise((r) => setTimeout(r, 550));
  expect(await queryFrom(s.udpPort, "127.0.0.1", "after.example")).toBe(0);
  expect(await queryFrom(s.udpPort, "127.0.0.1", "again.example")).toBe(5);
  expect(await metric(s, "ratelimit_allowed_total")).toBe(4);
  expect(await metric(s, "ratelimit_rejected_total")).toBe(2);
});

test("clients in different prefixes have separate buckets; mask4 groups addresses into one", async () => {
  const separate = await sluice("{ qps: 1, burst: 1 }");
  expect(await queryFrom(separate.udpPort, "127.0.0.1", "a.example")).toBe(0);
  expect(await queryFrom(separate.udpPort, "127.0.0.1", "b.example")).toBe(5);
  expect(await queryFrom(separate.udpPort, "127.0.0.2", "c.example")).toBe(0);
  const grouped = await sluice('"1 1 24"');
  expect(await queryFrom(grouped.udpPort, "127.0.0.1", "a.example")).toBe(0);
  expect(await queryFrom(grouped.udpPort, "127.0.0.2", "b.example")).toBe(5);
});

test("quick setup takes <qps> [burst] [mask4] [mask6] positionally", async () => {
  const up = await startResponder((q) => answerWith(q, ["192.0.2.1"]));
  cleanups.push(() => up.close());
  const s = await startSluice(`plugins:
  - tag: main
    type: sequence
    args:
      - { matches: "!rate_limiter 0.5 2", exec: reject 5 }
      - exec: forward 127.0.0.1:${up.port}
${serversYaml()}`);
  cleanups.push(() => s.stop());
  const got: number[] = [];
  for (let i = 0; i < 3; i++) got.push(await queryFrom(s.udpPort, "127.0.0.1", `q${i}.example`));
  expect(got).toEqual([0, 0, 5]);
});

test("bad limits are refused with the field named", async () => {
  const attempt = async (args: string): Promise<string> => {
    const err = await startSluice(`plugins:
  - tag: rl
    type: rate_limiter
    args: ${args}
  - tag: main
    type: sequence
    args: [{ matches: $rl, exec: accept }]
${serversYaml()}`).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConfigError);
    return (err as Error).message;
  };
  expect(await attempt("{ qps: 0 }")).toContain("qps");
  expect(await attempt("{ burst: 0 }")).toContain("burst");
  expect(await attempt("{ mask4: 33 }")).toContain("mask4");
  expect(await attempt('"fast"')).toContain("qps 'fast' is not a number");
});
