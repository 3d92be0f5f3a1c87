// PROXY protocol v2 on udp_server, tcp_server (plain and DoT) and http_server, over real sockets
// from different loopback addresses: 127.0.0.2 is the trusted balancer, 127.0.0.1 is not. The
// pipeline answers by client address (client_ip), so every answer says whom the server took for
// the client: the header's source from the trusted peer, the peer itself without a header, and
// nothing at all (dropped / closed, counted) for a header from anyone else.
import dgram from "node:dgram";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import net from "node:net";
import tls from "node:tls";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { decodeMessage } from "../../src/dns/message.js";
import { checkErrors } from "../helpers/check.js";
import { buildQuery, rcodeOf } from "../helpers/dns.js";
import { b64url } from "../helpers/doh-client.js";
import { makePki, type Pki } from "../helpers/pki.js";
import { metricValue } from "../helpers/proc.js";
import { proxyHeader, tlv } from "../helpers/proxy-header.js";
import { startSluice, tempDir, type RunningSluice } from "../helpers/sluice.js";
import { framed } from "../helpers/tcp-client.js";

const BALANCER = "127.0.0.2";
const STRANGER = "127.0.0.1";

let s: RunningSluice;
let pki: Pki;
beforeAll(async () => {
  pki = makePki(tempDir("sluice-pki-"));
  const proxy = `proxy_protocol: { trusted: ["${BALANCER}/32", "2001:db8::/32"] }`;
  s = await startSluice(
    `
api: { http: "127.0.0.1:0" }
plugins:
  - tag: main
    type: sequence
    args:
      - { matches: "client_ip 192.0.2.7", exec: reject 3 }
      - { matches: "client_ip 2001:db8:1::9", exec: reject 4 }
      - { matches: "client_ip ${BALANCER}", exec: reject 2 }
      - { matches: "client_ip ${STRANGER}", exec: reject 5 }
      - exec: reject 9
  - { tag: udp, type: udp_server, args: { entry: main, listen: "0.0.0.0:0", ${proxy} } }
  - { tag: tcp, type: tcp_server, args: { entry: main, listen: "0.0.0.0:0", frame_timeout: 500ms, ${proxy} } }
  - { tag: dot, type: tcp_server, args: { entry: main, listen: "127.0.0.1:0", cert: server.crt, key: server.key, ${proxy} } }
  - { tag: doh, type: http_server, args: { entries: [{ path: /dns-query, exec: main }], listen: "0.0.0.0:0", ${proxy} } }
  - { tag: plain, type: udp_server, args: { entry: main, listen: "127.0.0.1:0" } }
`,
    { "server.crt": pki.server.cert.toString(), "server.key": pki.server.key.toString() },
  );
});
afterAll(() => s.stop());

/** Sends one datagram from `source`; the rcode of the answer, or null when none came within `ms`. */
function udpFrom(source: string, port: number, data: Buffer, ms = 700): Promise<number | null> {
  return new Promise((resolve) => {
    const sock = dgram.createSocket("udp4");
    const timer = setTimeout(() => {
      sock.close();
      resolve(null);
    }, ms);
    sock.on("message", (msg) => {
      clearTimeout(timer);
      sock.close();
      resolve(rcodeOf(decodeMessage(msg)));
    });
    sock.bind(0, source, () => sock.send(data, port, "127.0.0.1"));
  });
}

/** Opens a TCP connection from `source`, writes `chunks` (a pause between them), reads one framed answer. */
function tcpFrom(source: string, port: number, chunks: Buffer[], useTls = false): Promise<number | "closed"> {
  return new Promise((resolve, reject) => {
    const raw = net.connect({ port, host: "127.0.0.1", localAddress: source });
    let pending = Buffer.alloc(0);
    const timer = setTimeout(() => reject(new Error("no answer and no close within 3 s")), 3000);
    const done = (v: number | "closed"): void => {
      clearTimeout(timer);
      raw.destroy();
      resolve(v);
    };
    raw.on("error", () => done("closed"));
    raw.on("close", () => done("closed"));
    raw.on("connect", () => {
      void (async () => {
        for (const [i, c] of chunks.entries()) {
          if (i > 0) await new Promise((r) => setTimeout(r, 30));
          if (useTls && i === chunks.length - 1) {
            // The header went in clear; the query goes over TLS on the same connection.
            const t = tls.connect({ socket: raw, ca: pki.ca, servername: "127.0.0.1", ALPNProtocols: ["dot"] }, () => t.write(c));
            t.on("error", () => done("closed"));
            t.on("data", (d: Buffer) => {
              pending = Buffer.concat([pending, d]);
              if (pending.length >= 2 && pending.length >= pending.readUInt16BE(0) + 2) done(rcodeOf(decodeMessage(pending.subarray(2))));
            });
          } else raw.write(c);
        }
      })();
    });
    if (!useTls) {
      raw.on("data", (d: Buffer) => {
        pending = Buffer.concat([pending, d]);
        if (pending.length >= 2 && pending.length >= pending.readUInt16BE(0) + 2) done(rcodeOf(decodeMessage(pending.subarray(2))));
      });
    }
  });
}

/** A DoH GET over HTTP/1.1 from `source`, optionally after a PROXY header; the answer's rcode or "closed". */
function dohFrom(source: string, port: number, header: Buffer | null): Promise<number | "closed"> {
  return new Promise((resolve, reject) => {
    const sock = net.connect({ port, host: "127.0.0.1", localAddress: source });
    let got = Buffer.alloc(0);
    const timer = setTimeout(() => reject(new Error("no DoH answer within 3 s")), 3000);
    const done = (v: number | "closed"): void => {
      clearTimeout(timer);
      sock.destroy();
      resolve(v);
    };
    sock.on("error", () => done("closed"));
    sock.on("close", () => done("closed"));
    sock.on("connect", () => {
      const q = buildQuery("who.test", "A", { id: 0 });
      const req = Buffer.from(`GET /dns-query?dns=${b64url(q)} HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: application/dns-message\r\n\r\n`);
      sock.write(header ? Buffer.concat([header, req]) : req);
    });
    sock.on("data", (d: Buffer) => {
      got = Buffer.concat([got, d]);
      const end = got.indexOf("\r\n\r\n");
      if (end < 0) return;
      const length = Number(/content-length: (\d+)/i.exec(got.subarray(0, end).toString())?.[1] ?? -1);
      if (length >= 0 && got.length >= end + 4 + length) done(rcodeOf(decodeMessage(got.subarray(end + 4, end + 4 + length))));
    });
  });
}

const query = (): Buffer => buildQuery("who.test", "A");
const metrics = async (): Promise<string> => (await s.api("/api/metrics")).text();

describe("udp_server", () => {
  test("a trusted balancer's header names the client (IPv4 and IPv6 sources, TLVs skipped)", async () => {
    const port = s.port("udp");
    expect(await udpFrom(BALANCER, port, Buffer.concat([proxyHeader({ source: "192.0.2.7", transport: "dgram" }), query()]))).toBe(3);
    expect(await udpFrom(BALANCER, port, Buffer.concat([proxyHeader({ source: "2001:db8:1::9", transport: "dgram", tlvs: tlv(0xe1, Buffer.from("x")) }), query()]))).toBe(4);
  });

  test("no header: the peer is the client, trusted or not; LOCAL: the peer", async () => {
    const port = s.port("udp");
    expect(await udpFrom(BALANCER, port, query())).toBe(2);
    expect(await udpFrom(STRANGER, port, query())).toBe(5);
    expect(await udpFrom(BALANCER, port, Buffer.concat([proxyHeader({ command: "local" }), query()]))).toBe(2);
  });

  test("a header from an untrusted peer is dropped and counted, and the server answers on", async () => {
    const port = s.port("udp");
    const before = metricValue(await metrics(), "server_proxy_header_total", 'plugin_tag="udp",protocol="udp",result="untrusted"') || 0;
    expect(await udpFrom(STRANGER, port, Buffer.concat([proxyHeader({ source: "192.0.2.7" }), query()]))).toBeNull();
    expect(await udpFrom(BALANCER, port, Buffer.concat([proxyHeader().subarray(0, 20)]))).toBeNull();
    const text = await metrics();
    expect(metricValue(text, "server_proxy_header_total", 'plugin_tag="udp",protocol="udp",result="untrusted"')).toBe(before + 1);
    expect(metricValue(text, "server_proxy_header_total", 'plugin_tag="udp",protocol="udp",result="invalid"')).toBeGreaterThanOrEqual(1);
    expect(await udpFrom(STRANGER, port, query())).toBe(5);
  });

  test("without proxy_protocol a header is never trusted: the datagram is not DNS", async () => {
    const answer = await udpFrom(BALANCER, s.port("plain"), Buffer.concat([proxyHeader({ source: "192.0.2.7" }), query()]));
    expect(answer).not.toBe(3);
  });
});

describe("tcp_server", () => {
  test("the header opens the connection; the queries after it are the header's client's", async () => {
    const port = s.port("tcp");
    expect(await tcpFrom(BALANCER, port, [Buffer.concat([proxyHeader({ source: "192.0.2.7" }), framed(query())])])).toBe(3);
    // Trickled: part of the signature, the rest of the header, then the query.
    const h = proxyHeader({ source: "2001:db8:1::9" });
    expect(await tcpFrom(BALANCER, port, [h.subarray(0, 5), h.subarray(5, 30), Buffer.concat([h.subarray(30), framed(query())])])).toBe(4);
  });

  test("no header: the peer is the client", async () => {
    expect(await tcpFrom(BALANCER, s.port("tcp"), [framed(query())])).toBe(2);
    expect(await tcpFrom(STRANGER, s.port("tcp"), [framed(query())])).toBe(5);
  });

  test("a header from an untrusted peer, a broken header, or one never finished closes the connection (counted)", async () => {
    const port = s.port("tcp");
    expect(await tcpFrom(STRANGER, port, [Buffer.concat([proxyHeader({ source: "192.0.2.7" }), framed(query())])])).toBe("closed");
    expect(await tcpFrom(BALANCER, port, [Buffer.concat([proxyHeader({ version: 3 }), framed(query())])])).toBe("closed");
    // Half a header, then silence: closed after frame_timeout (500 ms).
    const started = Date.now();
    expect(await tcpFrom(BALANCER, port, [proxyHeader().subarray(0, 20)])).toBe("closed");
    expect(Date.now() - started).toBeGreaterThanOrEqual(400);
    const text = await metrics();
    expect(metricValue(text, "server_proxy_header_total", 'plugin_tag="tcp",protocol="tcp",result="untrusted"')).toBe(1);
    expect(metricValue(text, "server_proxy_header_total", 'plugin_tag="tcp",protocol="tcp",result="invalid"')).toBe(2);
    expect(await tcpFrom(STRANGER, port, [framed(query())])).toBe(5);
  });

  test("DoT: the header comes before the TLS handshake", async () => {
    expect(await tcpFrom(BALANCER, s.port("dot"), [proxyHeader({ source: "192.0.2.7" }), framed(query())], true)).toBe(3);
    expect(await tcpFrom(STRANGER, s.port("dot"), [proxyHeader({ source: "192.0.2.7" }), framed(query())], true)).toBe("closed");
  });
});

describe("http_server", () => {
  test("DoH: the header names the client for a trusted peer; refused from others", async () => {
    const port = s.port("doh");
    expect(await dohFrom(BALANCER, port, proxyHeader({ source: "192.0.2.7" }))).toBe(3);
    expect(await dohFrom(BALANCER, port, null)).toBe(2);
    expect(await dohFrom(STRANGER, port, null)).toBe(5);
    expect(await dohFrom(STRANGER, port, proxyHeader({ source: "192.0.2.7" }))).toBe("closed");
    expect(metricValue(await metrics(), "server_proxy_header_total", 'plugin_tag="doh",protocol="doh",result="untrusted"')).toBe(1);
  });
});

test("a bad trusted entry is a configuration error at its line", () => {
  const file = join(s.dir, "bad.yaml");
  writeFileSync(file, `plugins:
  - { tag: main, type: sequence, args: [{ exec: reject 2 }] }
  - tag: udp
    type: udp_server
    args:
      entry: main
      listen: "127.0.0.1:0"
      proxy_protocol: { trusted: ["10.0.0.0/33"] }
`);
  expect(checkErrors(file)).toMatch(/bad\.yaml:8:\d+: error: .*10\.0\.0\.0\/33/);
});
