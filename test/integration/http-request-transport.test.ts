// How `http_request` reaches its receiver, over real sockets: the lean plain-http pool against a raw
// TCP server that answers exactly as scripted (Content-Length, chunked, until close, HTTP/1.0, 1xx,
// oversized bodies, a server closing idle connections), https with and without certificate checks,
// a SOCKS5 proxy (keep-alive through it), and egress profiles (network.outbound): a profile's proxy,
// and a profile's resolver and source address for the lean pool.
import { mkdirSync } from "node:fs";
import net from "node:net";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { HttpPool, type Cancel } from "../../src/net/http-pool.js";
import { query, rcodeOf } from "../helpers/dns.js";
import { makePki, type Pki } from "../helpers/pki.js";
import { startSluice, tempDir, type RunningSluice } from "../helpers/sluice.js";
import { startSocks5 } from "../helpers/socks5.js";
import { answerWith, startResponder } from "../helpers/responder.js";
import { startWebhookSink } from "../helpers/webhook-sink.js";

/** A TCP server answering each request (a head and Content-Length body) with the next scripted bytes. */
async function scripted(answers: (string | ((socket: net.Socket) => void))[]): Promise<{ port: number; connections: () => number; requests: string[]; close(): Promise<void> }> {
  let connections = 0;
  const requests: string[] = [];
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    connections++;
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
    socket.on("error", () => undefined); // the client closing a connection it will not reuse
    let buf = "";
    socket.on("data", (d: Buffer) => {
      buf += d.toString("latin1");
      for (;;) {
        const end = buf.indexOf("\r\n\r\n");
        if (end < 0) return;
        const len = Number(/content-length: (\d+)/i.exec(buf.slice(0, end))?.[1] ?? 0);
        if (buf.length < end + 4 + len) return;
        requests.push(buf.slice(0, end + 4 + len));
        buf = buf.slice(end + 4 + len);
        const next = answers.shift();
        if (typeof next === "function") next(socket);
        else if (next !== undefined) socket.write(next);
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    connections: () => connections,
    requests,
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

const cancel = (): Cancel => ({ cancel: null });
const post = (path: string, body = "x"): Buffer => Buffer.from(`POST ${path} HTTP/1.1\r\nHost: t\r\nContent-Length: ${body.length}\r\n\r\n${body}`);

describe("the lean plain-http pool", () => {
  test("framing: Content-Length, chunked with trailers, 204, an interim 100, HTTP/1.0 and until-close bodies; reuse only when the framing allows", async () => {
    const big = "y".repeat(70 * 1024);
    const srv = await scripted([
      "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
      "HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n3;ext=1\r\nabc\r\n2\r\nde\r\n0\r\nX-Trailer: 1\r\n\r\n",
      "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n",
      // Split across writes: the parser waits for the rest.
      (s) => {
        s.write("HTTP/1.1 202 Acc");
        setImmediate(() => s.write("epted\r\nContent-Length: 3\r\n\r\nab"));
        setTimeout(() => s.write("c"), 20);
      },
      "HTTP/1.1 500 Broken\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
      "HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok",
      (s) => s.end("HTTP/1.1 200 OK\r\n\r\nbody until close"),
      `HTTP/1.1 200 OK\r\nContent-Length: ${big.length}\r\n\r\n${big}`,
      "HTTP/1.1 302 Found\r\nLocation: /elsewhere\r\nContent-Length: 0\r\n\r\n",
    ]);
    const pool = new HttpPool("127.0.0.1", srv.port, 1);
    const statuses: [number, string][] = [];
    for (let i = 0; i < 9; i++) {
      const a = await pool.request(post(`/r${i}`), false, cancel());
      statuses.push([a.status, a.statusText]);
      if (i === 8) expect(a.location).toBe("/elsewhere");
    }
    expect(statuses).toEqual([
      [200, "OK"],
      [201, "Created"],
      [204, "No Content"],
      [202, "Accepted"],
      [500, "Broken"],
      [200, "OK"],
      [200, "OK"],
      [200, "OK"],
      [302, "Found"],
    ]);
    // New connections after: Connection: close (r4), HTTP/1.0 (r5), until close (r6), a body over the cap (r7).
    expect(srv.connections()).toBe(5);
    expect(srv.requests.map((r) => r.split(" ")[1])).toEqual(["/r0", "/r1", "/r2", "/r3", "/r4", "/r5", "/r6", "/r7", "/r8"]);
    pool.close();
    await srv.close();
  });

  test("garbage, a connection closed mid-answer and a cancelled request fail; the pool goes on", async () => {
    const srv = await scripted([
      "SMTP ready\r\n\r\n",
      (s) => s.end("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort"),
      () => undefined, // never answers
      "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
    ]);
    const pool = new HttpPool("127.0.0.1", srv.port, 1);
    await expect(pool.request(post("/a"), false, cancel())).rejects.toThrow(/not an HTTP\/1\.x answer/);
    await expect(pool.request(post("/b"), false, cancel())).rejects.toThrow(/closed before the answer was complete/);
    const c = cancel();
    const hanging = pool.request(post("/c"), false, c);
    await new Promise((r) => setTimeout(r, 20));
    c.cancel?.(new Error("deadline"));
    await expect(hanging).rejects.toThrow("deadline");
    expect((await pool.request(post("/d"), false, cancel())).status).toBe(200);
    pool.close();
    await srv.close();
  });

  test("with every connection busy, a request waits for one (max sockets)", async () => {
    const srv = await scripted(["HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"]);
    const pool = new HttpPool("127.0.0.1", srv.port, 1);
    const all = await Promise.all([1, 2, 3].map((i) => pool.request(post(`/p${i}`), false, cancel())));
    expect(all.map((a) => a.status)).toEqual([200, 200, 200]);
    expect(srv.connections()).toBe(1);
    pool.close();
    await srv.close();
  });
});

describe("https and SOCKS5 through Sluice", () => {
  let pki: Pki;
  let s: RunningSluice | null = null;
  beforeAll(() => {
    const dir = join(tempDir(), "pki");
    mkdirSync(dir);
    pki = makePki(dir);
  });
  afterAll(async () => {
    await s?.stop();
  });

  const yaml = (hooks: string): string => `api:
  http: 127.0.0.1:0
plugins:
${hooks}
  - tag: main
    type: sequence
    args:
      - { matches: "qname full:verify.example", exec: $verify }
      - { matches: "qname full:skip.example", exec: $skip }
      - { matches: "qname full:proxied.example", exec: $proxied }
      - exec: reject 3
  - { tag: udp, type: udp_server, args: { entry: main, listen: "127.0.0.1:0" } }
`;

  test("https: an untrusted certificate fails unless insecure_skip_verify; SOCKS5 (OxiDNS's host:port form) carries the request, kept alive", async () => {
    const secure = await startWebhookSink({ tls: pki.server });
    const plain = await startWebhookSink();
    const proxy = await startSocks5();
    s = await startSluice(
      yaml(`  - { tag: verify, type: http_request, args: { method: POST, url: "${secure.url}/v", body: "\${qname}", async: false, error_mode: fail, phase: before } }
  - { tag: skip, type: http_request, args: { method: POST, url: "${secure.url}/s", body: "\${qname}", async: false, error_mode: fail, insecure_skip_verify: true, phase: before } }
  - { tag: proxied, type: http_request, args: { method: POST, url: "${plain.url}/p", body: "\${qname}", async: false, error_mode: fail, socks5: "127.0.0.1:${proxy.port}", phase: before } }`),
    );
    expect(rcodeOf(await query(s.udpPort, "verify.example", "A"))).toBe(2);
    const text = await (await s.api("/api/metrics")).text();
    expect(text).toMatch(/^http_request_error_total\{plugin_tag="verify",reason="network"\} 1$/m);
    for (let i = 0; i < 2; i++) expect(rcodeOf(await query(s.udpPort, "skip.example", "A"))).toBe(3);
    expect(secure.requests.map((r) => [r.url, r.body])).toEqual([
      ["/s", "skip.example"],
      ["/s", "skip.example"],
    ]);
    expect(secure.requests[1].remotePort).toBe(secure.requests[0].remotePort);
    for (let i = 0; i < 2; i++) expect(rcodeOf(await query(s.udpPort, "proxied.example", "A"))).toBe(3);
    expect(plain.requests.map((r) => [r.url, r.body])).toEqual([
      ["/p", "proxied.example"],
      ["/p", "proxied.example"],
    ]);
    expect(proxy.targets).toEqual([`127.0.0.1:${plain.port}`]);
    await s.stop();
    s = null;
    await Promise.all([secure.close(), plain.close(), proxy.close()]);
  });

  test("outbound: a profile's proxy carries the requests; a profile's resolver and bind serve the lean pool", async () => {
    const sink = await startWebhookSink();
    const proxy = await startSocks5();
    // The profile's resolver: answers hooks.test with 127.0.0.1, nothing else.
    const resolver = await startResponder((q) => answerWith(q, q.questions[0]?.name.toLowerCase() === "hooks.test" && q.questions[0].type === 1 ? ["127.0.0.1"] : []));
    s = await startSluice(`api:
  http: 127.0.0.1:0
network:
  outbound:
    via_proxy: { socks5: "127.0.0.1:${proxy.port}" }
    own_dns: { resolver: "127.0.0.1:${resolver.port}", bind: 127.0.0.1 }
plugins:
  - { tag: through_proxy, type: http_request, args: { method: POST, url: "${sink.url}/proxied", body: "\${qname}", async: false, error_mode: fail, phase: before, outbound: via_proxy } }
  - { tag: by_name, type: http_request, args: { method: POST, url: "http://hooks.test:${sink.port}/named", body: "\${qname}", async: false, error_mode: fail, phase: before, outbound: own_dns } }
  - tag: main
    type: sequence
    args:
      - { matches: "qname full:proxied.example", exec: $through_proxy }
      - { matches: "qname full:named.example", exec: $by_name }
      - exec: reject 3
  - { tag: udp, type: udp_server, args: { entry: main, listen: "127.0.0.1:0" } }
`);
    expect(rcodeOf(await query(s.udpPort, "proxied.example", "A"))).toBe(3);
    expect(proxy.targets).toEqual([`127.0.0.1:${sink.port}`]);
    expect(rcodeOf(await query(s.udpPort, "named.example", "A"))).toBe(3);
    expect(sink.requests.map((r) => [r.url, r.body, r.headers.host])).toEqual([
      ["/proxied", "proxied.example", `127.0.0.1:${sink.port}`],
      ["/named", "named.example", `hooks.test:${sink.port}`],
    ]);
    expect(resolver.seen.some((x) => x.query.questions[0]?.name.toLowerCase() === "hooks.test")).toBe(true);
    await s.stop();
    s = null;
    await Promise.all([sink.close(), proxy.close(), resolver.close()]);
  });
});
