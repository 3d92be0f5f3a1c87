// DNS over HTTPS (http_server), over real sockets with certificates made here: dig +https and
// +https-get, kdig +https and +https-get (the stricter parser), Node's HTTP/2 and HTTP/1.1 clients
// over TLS, cleartext HTTP/1.1 and h2c on one port, every error status, two paths to two
// executors, the query's ID and cache-control in the answer, src_ip_header feeding client_ip (believed
// from trusted proxies only; the right-most entry that is not one), and an open HTTP/2 connection
// kept across a reload.
import { execFile, execFileSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { decodeMessage } from "../../src/dns/message.js";
import { answerIps, buildQuery, rcodeOf } from "../helpers/dns.js";
import { b64url, h1Request, h2Connect, h2Once, h2Request, type HttpReply } from "../helpers/doh-client.js";
import { metricValue } from "../helpers/proc.js";
import { makePki, type Pki } from "../helpers/pki.js";
import { startSluice, tempDir, type RunningSluice } from "../helpers/sluice.js";

const execFileAsync = promisify(execFile);

function requireTool(cmd: string, pkg: string): void {
  try {
    execFileSync(cmd, [cmd === "kdig" ? "-V" : "-v"], { stdio: "ignore" });
  } catch {
    throw new Error(`${cmd} is needed for the DoH interop checks: apt-get install ${pkg} (npm test installs it)`);
  }
}

const yaml = `
api: { http: "127.0.0.1:0" }
plugins:
  - tag: zone
    type: arbitrary
    args:
      rules:
        - "www.doh.test. 300 IN A 192.0.2.80"
        - "www.doh.test. 60 IN A 192.0.2.81"
      short_circuit: true
  - tag: main
    type: sequence
    args:
      - exec: $zone
      - { matches: "qname domain:doh.test", exec: reject NXDOMAIN }
      - exec: reject REFUSED
  - tag: other
    type: sequence
    args:
      - exec: black_hole 198.51.100.7
  - tag: by_client
    type: sequence
    args:
      - { matches: "client_ip 192.0.2.9 2001:db8::9", exec: black_hole 10.0.0.9 short_circuit }
      - { matches: "client_ip 127.0.0.1", exec: black_hole 10.0.0.127 short_circuit }
      - { matches: "client_ip 127.0.0.5", exec: black_hole 10.0.0.5 short_circuit }
      - exec: black_hole 10.0.0.1
  - tag: doh
    type: http_server
    args:
      listen: "127.0.0.1:0"
      cert: server.crt
      key: server.key
      entries:
        - { path: /dns-query, exec: main }
        - { path: /other, exec: other }
        - { path: /who, exec: by_client }
  - tag: plain
    type: http_server
    args:
      listen: "127.0.0.2:0"
      src_ip_header: X-Forwarded-For
      entries: [{ path: /dns-query, exec: by_client }]
  - tag: proxied
    type: http_server
    args:
      listen: "127.0.0.3:0"
      src_ip_header: X-Forwarded-For
      trusted_proxies: ["127.0.0.1", "10.0.0.0/8"]
      entries: [{ path: /dns-query, exec: by_client }]
`;

let pki: Pki;
let s: RunningSluice;
let tlsOrigin = "";
let plainOrigin = "";

beforeAll(async () => {
  requireTool("dig", "bind9-dnsutils");
  requireTool("kdig", "knot-dnsutils");
  pki = makePki(tempDir("sluice-pki-"));
  s = await startSluice(yaml, { "server.crt": pki.server.cert.toString(), "server.key": pki.server.key.toString() });
  tlsOrigin = `https://127.0.0.1:${s.port("doh")}`;
  plainOrigin = `http://127.0.0.2:${s.port("plain")}`;
});
afterAll(() => s.stop());

const post = (query: Buffer, path = "/dns-query") => ({ method: "POST", path, headers: { "content-type": "application/dns-message" }, body: query });
const get = (query: Buffer, path = "/dns-query") => ({ path: `${path}?dns=${b64url(query)}` });

function dnsOf(reply: HttpReply): ReturnType<typeof decodeMessage> {
  expect(reply.status).toBe(200);
  expect(reply.headers["content-type"]).toBe("application/dns-message");
  return decodeMessage(reply.body);
}

describe("clients", () => {
  test("dig +https, +https-get and kdig +https, +https-get verify the certificate and get the answer", async () => {
    const ca = join(pki.dir, "ca.crt");
    const port = String(s.port("doh"));
    for (const [cmd, args] of [
      ["dig", ["+https", `+tls-ca=${ca}`]],
      ["dig", ["+https-get", `+tls-ca=${ca}`]],
      ["kdig", ["+https", `+tls-ca=${ca}`]],
      ["kdig", ["+https-get", `+tls-ca=${ca}`]],
    ] as const) {
      const out = await execFileAsync(cmd, ["@127.0.0.1", "-p", port, ...args, "+time=2", "www.doh.test", "+short"], { timeout: 5000 });
      expect(out.stdout.trim().split("\n").sort(), `${cmd} ${args[0]}`).toEqual(["192.0.2.80", "192.0.2.81"]);
    }
    const nx = await execFileAsync("kdig", ["@127.0.0.1", "-p", port, "+https", "+time=2", "nothing.doh.test"], { timeout: 5000 });
    expect(nx.stdout).toMatch(/status: NXDOMAIN/);
  });

  test("HTTP/2 (ALPN h2) and HTTP/1.1 over TLS, GET and POST; the answer keeps the query's ID and carries max-age", async () => {
    const q = buildQuery("www.doh.test", "A", { id: 0x4242 });
    const viaH2 = await h2Once(tlsOrigin, get(q), pki.ca);
    expect(viaH2.alpn).toBe("h2");
    const m = dnsOf(viaH2);
    expect(m.id).toBe(0x4242);
    expect(answerIps(m).sort()).toEqual(["192.0.2.80", "192.0.2.81"]);
    // The smallest TTL of the answer.
    expect(viaH2.headers["cache-control"]).toBe("max-age=60");
    expect(dnsOf(await h2Once(tlsOrigin, post(q), pki.ca)).id).toBe(0x4242);
    const viaH1 = await h1Request(tlsOrigin, post(buildQuery("www.doh.test", "A", { id: 0 })), pki.ca);
    expect(viaH1.httpVersion).toBe("1.1");
    expect(dnsOf(viaH1).id).toBe(0);
    expect(dnsOf(await h1Request(tlsOrigin, get(q), pki.ca)).id).toBe(0x4242);
    // A negative answer is kept for its SOA's negative TTL (reject NXDOMAIN's SOA: 300 s)...
    const nx = await h2Once(tlsOrigin, get(buildQuery("none.doh.test", "A")), pki.ca);
    expect(rcodeOf(dnsOf(nx))).toBe(3);
    expect(nx.headers["cache-control"]).toBe("max-age=300");
    // ... and an answer without records is not to be cached.
    const refused = await h2Once(tlsOrigin, get(buildQuery("elsewhere.test", "A")), pki.ca);
    expect(rcodeOf(dnsOf(refused))).toBe(5);
    expect(refused.headers["cache-control"]).toBe("max-age=0");
  });

  test("one cleartext port serves HTTP/1.1 and h2c with prior knowledge", async () => {
    const q = buildQuery("x.example", "A", { id: 7 });
    const h1 = await h1Request(plainOrigin, get(q));
    expect(h1.httpVersion).toBe("1.1");
    expect(dnsOf(h1).id).toBe(7);
    const h2c = await h2Once(plainOrigin, post(q));
    expect(h2c.alpn).toBe("h2c");
    expect(dnsOf(h2c).id).toBe(7);
  });

  test("many queries share one HTTP/2 connection", async () => {
    const session = await h2Connect(tlsOrigin, pki.ca);
    const replies = await Promise.all(Array.from({ length: 50 }, (_, i) => h2Request(session, get(buildQuery(`n${i}.doh.test`, "A", { id: i })))));
    expect(replies.map((r) => decodeMessage(r.body).id)).toEqual(Array.from({ length: 50 }, (_, i) => i));
    session.close();
  });
});

describe("routing", () => {
  test("two paths go to two executors", async () => {
    const q = buildQuery("www.doh.test", "A");
    expect(answerIps(dnsOf(await h2Once(tlsOrigin, get(q, "/dns-query"), pki.ca))).sort()).toEqual(["192.0.2.80", "192.0.2.81"]);
    expect(answerIps(dnsOf(await h2Once(tlsOrigin, get(q, "/other"), pki.ca)))).toEqual(["198.51.100.7"]);
  });

  test("src_ip_header: from a trusted proxy (loopback by default), client_ip sees the right-most entry that is not a trusted proxy", async () => {
    const ask = async (forwarded?: string): Promise<string[]> => {
      const spec = { ...post(buildQuery("who.example", "A")), headers: { "content-type": "application/dns-message", ...(forwarded ? { "x-forwarded-for": forwarded } : {}) } };
      return answerIps(dnsOf(await h1Request(plainOrigin, spec)));
    };
    // The test connects from 127.0.0.1, a trusted proxy by default.
    expect(await ask()).toEqual(["10.0.0.127"]);
    expect(await ask("192.0.2.9")).toEqual(["10.0.0.9"]);
    expect(await ask("[2001:db8::9]:443")).toEqual(["10.0.0.9"]);
    // The proxy appends the peer it saw: what a client wrote to the left of it does not count.
    expect(await ask("10.1.1.1, 192.0.2.9")).toEqual(["10.0.0.9"]);
    expect(await ask("192.0.2.9:5353, 10.1.1.1")).toEqual(["10.0.0.1"]);
    // Trusted hops (loopback here) are skipped.
    expect(await ask("192.0.2.9:5353, 127.0.0.5")).toEqual(["10.0.0.9"]);
    // Not an address: the socket's address is used.
    expect(await ask("unknown")).toEqual(["10.0.0.127"]);
    expect(await ask("192.0.2.9, unknown")).toEqual(["10.0.0.127"]);
    // Over TLS without src_ip_header, the header is ignored and the socket's address counts.
    const overTls = await h2Once(tlsOrigin, { ...post(buildQuery("who.example", "A"), "/who"), headers: { "content-type": "application/dns-message", "x-forwarded-for": "192.0.2.9" } }, pki.ca);
    expect(answerIps(dnsOf(overTls))).toEqual(["10.0.0.127"]);
    // The same over h2c.
    const h2c = await h2Once(plainOrigin, { ...post(buildQuery("who.example", "A")), headers: { "content-type": "application/dns-message", "x-forwarded-for": "10.1.1.1, 192.0.2.9" } });
    expect(answerIps(dnsOf(h2c))).toEqual(["10.0.0.9"]);
  });

  test("src_ip_header from a peer not in trusted_proxies is ignored: client_ip sees the real peer", async () => {
    const origin = `http://127.0.0.3:${s.port("proxied")}`;
    const ask = async (from: string, forwarded: string): Promise<string[]> => {
      const spec = { ...post(buildQuery("who.example", "A")), localAddress: from, headers: { "content-type": "application/dns-message", "x-forwarded-for": forwarded } };
      return answerIps(dnsOf(await h1Request(origin, spec)));
    };
    // 127.0.0.5 is not in trusted_proxies: its header is its own word.
    expect(await ask("127.0.0.5", "192.0.2.9")).toEqual(["10.0.0.5"]);
    // 127.0.0.1 is: the right-most entry that is not a trusted proxy (10.0.0.0/8 is one) wins.
    expect(await ask("127.0.0.1", "192.0.2.9")).toEqual(["10.0.0.9"]);
    expect(await ask("127.0.0.1", "127.0.0.5, 192.0.2.9, 10.2.3.4")).toEqual(["10.0.0.9"]);
    // Loopback is not trusted here unless listed: 127.0.0.5 in the chain is the client.
    expect(await ask("127.0.0.1", "192.0.2.9, 127.0.0.5")).toEqual(["10.0.0.5"]);
  });

  test("trusted_proxies is checked: CIDRs only, and only with src_ip_header", async () => {
    const bad = (args: string): Promise<RunningSluice> =>
      startSluice(`
plugins:
  - { tag: main, type: sequence, args: [{ exec: reject 3 }] }
  - { tag: d, type: http_server, args: { listen: "127.0.0.1:0", ${args}, entries: [{ path: /dns-query, exec: main }] } }
`);
    await expect(bad(`src_ip_header: X-Forwarded-For, trusted_proxies: ["10.0.0.0/33"]`)).rejects.toThrow(/bad prefix length/);
    await expect(bad(`trusted_proxies: ["10.0.0.0/8"]`)).rejects.toThrow(/set src_ip_header too/);
  });
});

describe("errors", () => {
  const errorOf = (reply: HttpReply): { ok: boolean; code: string } => {
    expect(reply.headers["content-type"]).toBe("application/json");
    return JSON.parse(reply.body.toString()) as { ok: boolean; code: string };
  };
  const q = buildQuery("www.doh.test", "A");

  test("every bad request gets its status and the one error shape, over HTTP/2 and HTTP/1.1", async () => {
    const cases: [ReturnType<typeof get> & { method?: string; headers?: Record<string, string>; body?: Buffer }, number, string][] = [
      [{ path: "/nope" }, 404, "not_found"],
      [{ path: `/dns-query-x?dns=${b64url(q)}` }, 404, "not_found"],
      [{ path: "/dns-query" }, 400, "bad_dns_query"],
      [{ path: "/dns-query?x=1" }, 400, "bad_dns_query"],
      // Characters outside base64url: Buffer.from would skip them silently.
      [{ path: `/dns-query?dns=${b64url(q).slice(0, 8)}*${b64url(q).slice(8)}` }, 400, "bad_dns_query"],
      [{ path: `/dns-query?dns=${q.toString("base64").replace(/=+$/, "")}+/` }, 400, "bad_dns_query"],
      // A length no base64 text can have.
      [{ path: `/dns-query?dns=${b64url(q)}A` }, 400, "bad_dns_query"],
      [{ path: "/dns-query?dns=AAAA" }, 400, "bad_dns_query"],
      // A response (QR set) is not a query.
      [get(Buffer.from(buildQuery("r.example", "A")).fill(0x80, 2, 3)), 400, "bad_dns_query"],
      [{ method: "PUT", path: "/dns-query", headers: { "content-type": "application/dns-message" }, body: q }, 405, "method_not_allowed"],
      [{ method: "POST", path: "/dns-query", headers: { "content-type": "text/plain" }, body: q }, 415, "unsupported_media_type"],
      [{ method: "POST", path: "/dns-query", headers: { "content-type": "application/dns-message" }, body: Buffer.alloc(0) }, 400, "bad_dns_query"],
      [{ method: "POST", path: "/dns-query", headers: { "content-type": "application/dns-message" }, body: Buffer.alloc(70_000) }, 413, "body_too_large"],
    ];
    for (const [spec, status, code] of cases) {
      const viaH2 = await h2Once(tlsOrigin, spec, pki.ca);
      expect(viaH2.status, `h2 ${spec.method ?? "GET"} ${spec.path}`).toBe(status);
      expect(errorOf(viaH2)).toMatchObject({ ok: false, code });
      const viaH1 = await h1Request(tlsOrigin, spec, pki.ca);
      expect(viaH1.status, `h1 ${spec.method ?? "GET"} ${spec.path}`).toBe(status);
      expect(errorOf(viaH1)).toMatchObject({ ok: false, code });
    }
    // A lying content-length is refused before the body arrives; a chunked body is counted as it comes.
    const declared = await h2Once(tlsOrigin, { method: "POST", path: "/dns-query", headers: { "content-type": "application/dns-message", "content-length": "65536" }, body: Buffer.alloc(65_536) }, pki.ca);
    expect(declared.status).toBe(413);
    const chunked = await h1Request(tlsOrigin, { method: "POST", path: "/dns-query", headers: { "content-type": "application/dns-message", "transfer-encoding": "chunked" }, body: Buffer.alloc(65_536) }, pki.ca);
    expect(chunked.status).toBe(413);
    // A body of exactly 65 535 bytes is read (and is a malformed query: FORMERR, not an HTTP error).
    const largest = await h2Once(tlsOrigin, { method: "POST", path: "/dns-query", headers: { "content-type": "application/dns-message" }, body: Buffer.concat([q.subarray(0, 12), Buffer.alloc(65_523)]) }, pki.ca);
    expect(rcodeOf(dnsOf(largest))).toBe(1);
    // Still serving.
    expect(dnsOf(await h2Once(tlsOrigin, get(q), pki.ca)).answers.length).toBe(2);
  });
});

describe("reload", () => {
  test("an HTTP/2 connection opened before a reload stays open and is answered by the new configuration", async () => {
    const session = await h2Connect(tlsOrigin, pki.ca);
    const q = buildQuery("www.doh.test", "A");
    expect(answerIps(dnsOf(await h2Request(session, get(q, "/other"))))).toEqual(["198.51.100.7"]);
    writeFileSync(join(s.dir, "sluice.yaml"), yaml.replace("black_hole 198.51.100.7", "black_hole 198.51.100.8"));
    const before = (await (await s.api("/api/reload/status")).json()) as { last_completed_ms: number | null };
    expect((await s.api("/api/reload", { method: "POST" })).status).toBe(202);
    for (;;) {
      const status = (await (await s.api("/api/reload/status")).json()) as { status: string; last_completed_ms: number | null };
      if (status.status === "ok" && status.last_completed_ms !== before.last_completed_ms) break;
      if (status.status === "failed") throw new Error(JSON.stringify(status));
      await new Promise((r) => setTimeout(r, 10));
    }
    expect(session.closed || session.destroyed).toBe(false);
    expect(answerIps(dnsOf(await h2Request(session, get(q, "/other"))))).toEqual(["198.51.100.8"]);
    session.close();
  });
});

test("metrics carry the doh protocol label and the connection gauge", async () => {
  const text = await (await s.api("/api/metrics")).text();
  expect(metricValue(text, "server_request_total", 'plugin_tag="doh",protocol="doh"')).toBeGreaterThan(10);
  expect(metricValue(text, "server_http_connections", 'plugin_tag="doh"')).toBeGreaterThanOrEqual(0);
});
