// Issue 22, defect 10: a TCP or DoT client that sends its queries and then shuts down its sending
// side (shutdown(SHUT_WR)) lost every answer not ready at once, such as a cache miss forwarded to a
// slow upstream. Over real sockets against a forwarder whose upstream answers after 300 ms: the
// answers arrive after the half-close, then the server ends the connection (well before
// idle_timeout). A half-close after a partial frame drops only that frame; with nothing in flight
// the connection ends at once.
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { decodeMessage } from "../../src/dns/message.js";
import { answerIps, buildQuery } from "../helpers/dns.js";
import { makePki, type Pki } from "../helpers/pki.js";
import { answerWith, startResponder, type Responder } from "../helpers/responder.js";
import { startSluice, tempDir, type RunningSluice } from "../helpers/sluice.js";
import { RawTcp } from "../helpers/tcp-client.js";

const UPSTREAM_DELAY_MS = 300;
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

let pki: Pki;
let upstream: Responder;
let s: RunningSluice;
beforeAll(async () => {
  pki = makePki(tempDir("sluice-pki-"));
  upstream = await startResponder(async (q) => {
    await sleep(UPSTREAM_DELAY_MS);
    return answerWith(q, ["192.0.2.77"]);
  });
  s = await startSluice(
    `
api: { http: "127.0.0.1:0" }
plugins:
  - tag: main
    type: sequence
    args:
      - exec: forward 127.0.0.1:${upstream.port}
  - { tag: tcp, type: tcp_server, args: { entry: main, listen: "127.0.0.2:0", idle_timeout: 2s } }
  - { tag: dot, type: tcp_server, args: { entry: main, listen: "127.0.0.1:0", cert: server.crt, key: server.key, idle_timeout: 2s } }
`,
    { "server.crt": pki.server.cert.toString(), "server.key": pki.server.key.toString() },
  );
});
afterAll(async () => {
  await s.stop();
  await upstream.close();
});

const clientFor = (tag: "tcp" | "dot"): RawTcp => (tag === "dot" ? new RawTcp(s.port("dot"), "127.0.0.1", { ca: pki.ca, ALPNProtocols: ["dot"] }) : new RawTcp(s.port("tcp"), "127.0.0.2"));

describe.each(["tcp", "dot"] as const)("%s", (tag) => {
  test("queries then shutdown(SHUT_WR): every answer from the slow upstream arrives, then the connection ends", async () => {
    const client = clientFor(tag);
    await client.connected;
    const names = [0, 1, 2].map((i) => `miss${i}.${tag}.half.test`);
    client.send(...names.map((n, i) => buildQuery(n, "A", { id: 100 + i })));
    const started = Date.now();
    client.halfClose();
    const answers = await client.waitAnswers(3, 5000);
    const answeredAfter = Date.now() - started;
    const closedAfter = (await Promise.race([client.closed, sleep(3000).then(() => 0)])) - started;
    console.log(`${tag} half-close: ${answers.length}/3 answers after the client's FIN (last after ${answeredAfter} ms, upstream delay ${UPSTREAM_DELAY_MS} ms); connection ended ${closedAfter} ms after the FIN`);
    const got = answers.map((a) => decodeMessage(a));
    expect(got.map((m) => m.id).sort()).toEqual([100, 101, 102]);
    for (const m of got) expect(answerIps(m)).toEqual(["192.0.2.77"]);
    expect(answeredAfter).toBeGreaterThanOrEqual(UPSTREAM_DELAY_MS - 50);
    // Ended by the server once its answers were out, well before idle_timeout (2 s).
    expect(closedAfter).toBeGreaterThan(0);
    expect(closedAfter).toBeLessThan(1500);
  });

  test("a partial frame before the half-close is dropped; the complete query before it is answered", async () => {
    const client = clientFor(tag);
    await client.connected;
    const query = buildQuery(`partial.${tag}.half.test`, "A", { id: 7 });
    const half = Buffer.from([0x00, 0x40, 0x12, 0x34]);
    const frame = Buffer.alloc(query.length + 2);
    frame.writeUInt16BE(query.length, 0);
    query.copy(frame, 2);
    client.sock.write(Buffer.concat([frame, half]));
    client.halfClose();
    const [answer] = await client.waitAnswers(1, 5000);
    expect(decodeMessage(answer).id).toBe(7);
    expect(await client.closesWithin(1500)).toBe(true);
    expect(client.answers).toHaveLength(1);
  });
});

test("a half-close with nothing in flight ends the connection at once", async () => {
  const client = new RawTcp(s.port("tcp"), "127.0.0.2");
  await client.connected;
  const started = Date.now();
  client.halfClose();
  expect(await client.closesWithin(1000)).toBe(true);
  expect(client.closedAt - started).toBeLessThan(500);
});
