// http_server connection limits, over real sockets: a TLS handshake or HTTP/2 preface that never
// completes, slow HTTP/1.1 headers and bodies and a slow HTTP/2 body are cut off by
// request_timeout; max_conns evicts a connection holding an unfinished body first, then the one idle
// longest, and refuses only when every connection is busy; idle_timeout closes idle connections; a
// client that does not read its answers loses its connection after idle_timeout; unfinished HTTP/2
// bodies hold a bounded number of bytes per connection. DNS keeps being answered throughout.
import http2 from "node:http2";
import net from "node:net";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { decodeMessage } from "../../src/dns/message.js";
import { buildQuery } from "../helpers/dns.js";
import { b64url, h1Request, h2Connect, h2Request } from "../helpers/doh-client.js";
import { metricValue } from "../helpers/proc.js";
import { makePki, type Pki } from "../helpers/pki.js";
import { startSluice, tempDir, type RunningSluice } from "../helpers/sluice.js";
import { RawTcp } from "../helpers/tcp-client.js";

const yaml = `
api: { http: "127.0.0.1:0" }
plugins:
  - tag: main
    type: sequence
    args:
      - { matches: "qtype TXT", exec: "sleep 1500" }
      - exec: black_hole 192.0.2.1 short_circuit
  - tag: tls
    type: http_server
    args: { listen: "127.0.0.1:0", cert: server.crt, key: server.key, request_timeout: 400ms, idle_timeout: 20s, max_conns: 3, entries: [{ path: /dns-query, exec: main }] }
  - tag: plain
    type: http_server
    args: { listen: "127.0.0.2:0", request_timeout: 400ms, idle_timeout: 20s, entries: [{ path: /dns-query, exec: main }] }
  - tag: idle
    type: http_server
    args: { listen: "127.0.0.3:0", idle_timeout: 600ms, entries: [{ path: /dns-query, exec: main }] }
`;

let pki: Pki;
let s: RunningSluice;
let tlsOrigin = "";
let plainPort = 0;
let idleOrigin = "";
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const get = (name: string, type = "A") => ({ path: `/dns-query?dns=${b64url(buildQuery(name, type, { id: 0 }))}` });

beforeAll(async () => {
  pki = makePki(tempDir("sluice-pki-"));
  s = await startSluice(yaml, { "server.crt": pki.server.cert.toString(), "server.key": pki.server.key.toString() });
  tlsOrigin = `https://127.0.0.1:${s.port("tls")}`;
  plainPort = s.port("plain");
  idleOrigin = `http://127.0.0.3:${s.port("idle")}`;
});
afterAll(() => s.stop());

async function metrics(): Promise<string> {
  return (await s.api("/api/metrics")).text();
}

/** The DoH answer still comes within a second, whatever the test is doing to the listener. */
async function stillAnswers(): Promise<void> {
  const started = Date.now();
  const reply = await h1Request(`http://127.0.0.2:${plainPort}`, get("ok.example"));
  expect(reply.status).toBe(200);
  expect(Date.now() - started).toBeLessThan(1000);
}

describe("request_timeout", () => {
  test("a TLS handshake never started, and a cleartext HTTP/2 preface never finished, are closed", async () => {
    const before = metricValue(await metrics(), "server_http_conn_closed_total", 'plugin_tag="tls",reason="request"');
    const silent = new RawTcp(s.port("tls"));
    const partial = new RawTcp(plainPort, "127.0.0.2");
    await Promise.all([silent.connected, partial.connected]);
    partial.sock.write("PRI * HTTP/2.0\r\n");
    const started = Date.now();
    expect(await silent.closesWithin(3000)).toBe(true);
    expect(await partial.closesWithin(3000)).toBe(true);
    expect(Date.now() - started).toBeLessThan(2000);
    expect(metricValue(await metrics(), "server_http_conn_closed_total", 'plugin_tag="tls",reason="request"') - before).toBe(1);
    await stillAnswers();
  });

  test("HTTP/1.1 headers or a body sent a byte at a time are cut off", async () => {
    const slowHeaders = net.connect(plainPort, "127.0.0.2");
    const slowBody = net.connect(plainPort, "127.0.0.2");
    for (const sock of [slowHeaders, slowBody]) sock.on("error", () => undefined);
    let bodyReply = "";
    slowBody.on("data", (d: Buffer) => (bodyReply += d.toString()));
    const closed = (sock: net.Socket): Promise<number> => new Promise((resolve) => sock.once("close", () => resolve(Date.now())));
    const headersClosed = closed(slowHeaders);
    const bodyClosed = closed(slowBody);
    slowHeaders.write("GET /dns-query HTTP/1.1\r\nHost: x\r\n");
    slowBody.write("POST /dns-query HTTP/1.1\r\nHost: x\r\nContent-Type: application/dns-message\r\nContent-Length: 100\r\n\r\nab");
    const started = Date.now();
    const drip = setInterval(() => {
      if (!slowHeaders.destroyed) slowHeaders.write("X");
      if (!slowBody.destroyed) slowBody.write("c");
    }, 100);
    try {
      const ends = await Promise.race([Promise.all([headersClosed, bodyClosed]), sleep(4000).then(() => null)]);
      expect(ends).not.toBeNull();
      for (const t of ends ?? []) expect(t - started).toBeLessThan(2500);
      expect(bodyReply).toMatch(/^HTTP\/1\.1 408/);
    } finally {
      clearInterval(drip);
      slowHeaders.destroy();
      slowBody.destroy();
    }
    await stillAnswers();
  });

  test("an HTTP/2 request body that does not arrive in time resets its stream; the connection answers on", async () => {
    const session = await h2Connect(tlsOrigin, pki.ca);
    const stream = session.request({ ":method": "POST", ":path": "/dns-query", "content-type": "application/dns-message" });
    stream.write(buildQuery("slow.example", "A").subarray(0, 6));
    const started = Date.now();
    const reset = await new Promise<number>((resolve) => {
      stream.on("error", () => undefined);
      stream.once("close", () => resolve(stream.rstCode ?? -1));
    });
    expect(reset).toBe(http2.constants.NGHTTP2_CANCEL);
    expect(Date.now() - started).toBeLessThan(2000);
    const reply = await h2Request(session, get("after.example"));
    expect(reply.status).toBe(200);
    session.close();
  });
});

describe("unfinished bodies", () => {
  test("HTTP/2 bodies left unfinished hold at most 256 KiB per connection: the stream passing it is reset", async () => {
    const session = await h2Connect(`http://127.0.0.2:${plainPort}`);
    const codes = await Promise.all(
      Array.from({ length: 8 }, () => {
        const stream = session.request({ ":method": "POST", ":path": "/dns-query", "content-type": "application/dns-message" });
        stream.on("error", () => undefined);
        stream.write(Buffer.alloc(60_000, 1));
        return new Promise<number>((resolve) => stream.once("close", () => resolve(stream.rstCode ?? -1)));
      }),
    );
    const calm = codes.filter((c) => c === http2.constants.NGHTTP2_ENHANCE_YOUR_CALM).length;
    // Four bodies of 60 000 bytes fit; the others are reset as they pass the bound, the rest at request_timeout.
    expect(calm, codes.join(",")).toBeGreaterThanOrEqual(3);
    expect(codes.filter((c) => c === http2.constants.NGHTTP2_CANCEL).length + calm).toBe(8);
    const reply = await h2Request(session, get("after-bodies.example"));
    expect(reply.status).toBe(200);
    session.close();
  });
});

/** `n` connections to the TLS listener, opened 20 ms apart, each answered once and then left idle. */
async function answeredSessions(n: number, prefix: string): Promise<http2.ClientHttp2Session[]> {
  const sessions: http2.ClientHttp2Session[] = [];
  for (let i = 0; i < n; i++) {
    const session = await h2Connect(tlsOrigin, pki.ca);
    expect((await h2Request(session, get(`${prefix}${i}.example`))).status).toBe(200);
    sessions.push(session);
    await sleep(20);
  }
  return sessions;
}

describe("max_conns", () => {
  test("a new connection evicts the one idle longest; with every connection busy it is refused", async () => {
    const before = await metrics();
    const sessions = await answeredSessions(3, "idle");
    const closedEarly = new Promise<void>((resolve) => sessions[0].once("close", () => resolve()));
    const fourth = await h2Connect(tlsOrigin, pki.ca);
    expect((await h2Request(fourth, get("fourth.example"))).status).toBe(200);
    // The one idle longest made room.
    await closedEarly;
    for (const x of [...sessions, fourth]) x.destroy();
    await sleep(100);

    // Three connections each waiting for a slow answer: a fourth is closed at once.
    const busy = await Promise.all([0, 1, 2].map(() => h2Connect(tlsOrigin, pki.ca)));
    const slow = busy.map((b) => h2Request(b, get("slow.example", "TXT")));
    await sleep(200);
    const refused = await h2Connect(tlsOrigin, pki.ca).then(
      (x) => new Promise<boolean>((resolve) => x.once("close", () => resolve(true))),
      () => true,
    );
    expect(refused).toBe(true);
    for (const r of await Promise.all(slow)) expect(r.status).toBe(200);
    for (const b of busy) b.destroy();
    const after = await metrics();
    expect(metricValue(after, "server_http_conn_evicted_total", 'plugin_tag="tls"') - metricValue(before, "server_http_conn_evicted_total", 'plugin_tag="tls"')).toBe(1);
    expect(metricValue(after, "server_http_conn_refused_total", 'plugin_tag="tls"') - metricValue(before, "server_http_conn_refused_total", 'plugin_tag="tls"')).toBe(1);
  });

  test("a connection holding an unfinished body is evicted before older idle ones, whatever its age", async () => {
    const before = await metrics();
    // Two idle connections first (the older ones), then the newest, holding a POST whose body stops.
    const idle = await answeredSessions(2, "kept");
    const holder = await h2Connect(tlsOrigin, pki.ca);
    const held = holder.request({ ":method": "POST", ":path": "/dns-query", "content-type": "application/dns-message" });
    held.on("error", () => undefined);
    held.write(buildQuery("held.example", "A").subarray(0, 6));
    const holderClosed = new Promise<void>((resolve) => holder.once("close", () => resolve()));
    await sleep(50);
    const fresh = await h2Connect(tlsOrigin, pki.ca);
    expect((await h2Request(fresh, get("fresh.example"))).status).toBe(200);
    await holderClosed;
    // The idle ones were kept: they still answer.
    for (const [i, session] of idle.entries()) {
      expect(session.closed || session.destroyed, `idle connection ${i}`).toBe(false);
      expect((await h2Request(session, get(`again${i}.example`))).status).toBe(200);
    }
    for (const x of [...idle, holder, fresh]) x.destroy();
    await sleep(100);
    const after = await metrics();
    expect(metricValue(after, "server_http_conn_evicted_total", 'plugin_tag="tls"') - metricValue(before, "server_http_conn_evicted_total", 'plugin_tag="tls"')).toBe(1);
  });
});

describe("idle_timeout", () => {
  test("an idle connection is closed; one that keeps asking is not", async () => {
    const idle = await h2Connect(idleOrigin);
    const busy = await h2Connect(idleOrigin);
    expect((await h2Request(idle, get("a.example"))).status).toBe(200);
    const idleClosed = new Promise<number>((resolve) => idle.once("close", () => resolve(Date.now())));
    let goaway = false;
    idle.once("goaway", () => (goaway = true));
    const started = Date.now();
    for (let i = 0; i < 8; i++) {
      expect((await h2Request(busy, get(`b${i}.example`))).status).toBe(200);
      await sleep(150);
    }
    expect((await idleClosed) - started).toBeLessThan(1500);
    // Closed politely: GOAWAY first, so a client knows no request of its was lost.
    expect(goaway).toBe(true);
    expect(busy.closed || busy.destroyed).toBe(false);
    busy.close();
  });

  test("a client that does not read its answers loses the connection after idle_timeout", async () => {
    const before = metricValue(await metrics(), "server_http_conn_closed_total", 'plugin_tag="idle",reason="stalled"');
    // A receive window of 1 byte, never opened: no answer can finish.
    const session = http2.connect(idleOrigin, { settings: { initialWindowSize: 1 } });
    const stream = session.request({ ":method": "GET", ":path": get("stuck.example").path });
    stream.pause();
    stream.on("error", () => undefined);
    const started = Date.now();
    await new Promise<void>((resolve) => session.once("close", () => resolve()));
    expect(Date.now() - started).toBeLessThan(2500);
    expect(metricValue(await metrics(), "server_http_conn_closed_total", 'plugin_tag="idle",reason="stalled"') - before).toBe(1);
    await stillAnswers();
  });
});

test("a query over DoH is answered normally next to all that", async () => {
  const session = await h2Connect(tlsOrigin, pki.ca);
  const reply = await h2Request(session, get("end.example"));
  expect(decodeMessage(reply.body).answers).toHaveLength(1);
  session.close();
});
