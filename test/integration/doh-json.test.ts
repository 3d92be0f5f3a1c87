// The DoH JSON API (`entries[].json_api: true`): GET ?name=&type= (and do, cd, ct) answered in the JSON shape of
// Google's and Cloudflare's DoH JSON APIs, over real HTTPS with HTTP/2 (curl) and cleartext HTTP/1.1 and h2c;
// record data per type, the Authority section of a negative answer, DO and CD reaching the upstream, the
// content types, every bad parameter as a 400 in the one error shape, and paths without json_api unchanged.

import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { EDNS_DO, FLAG, RCODE } from "../../src/dns/constants.js";
import { decodeMessage } from "../../src/dns/message.js";
import { answerIps, buildQuery } from "../helpers/dns.js";
import { b64url, h1Request, h2Once } from "../helpers/doh-client.js";
import { makePki, type Pki } from "../helpers/pki.js";
import { answerWith, startResponder, type Responder } from "../helpers/responder.js";
import { startSluice, tempDir, type RunningSluice } from "../helpers/sluice.js";
import { requireTool } from "../helpers/tools.js";
import { negative } from "./cache-helpers.js";

const run = promisify(execFile);

let pki: Pki;
let up: Responder;
let s: RunningSluice;
let tls = "";
let plain = "";

const yaml = (upstreamPort: number): string => `
plugins:
  - tag: zone
    type: arbitrary
    args:
      short_circuit: true
      rules:
        - "www.json.test. 300 IN A 192.0.2.80"
        - "www.json.test. 300 IN AAAA 2001:db8::80"
        - "alias.json.test. 120 IN CNAME www.json.test."
        - "json.test. 3600 IN MX 10 mx.json.test."
        - 'json.test. 60 IN TXT "hello world" "two"'
        - "xn--bcher-kva.json.test. 30 IN A 192.0.2.81"
  - tag: main
    type: sequence
    args:
      - exec: $zone
      - exec: forward 127.0.0.1:${upstreamPort}
  - tag: doh
    type: http_server
    args:
      listen: "127.0.0.1:0"
      cert: server.crt
      key: server.key
      entries:
        - { path: /resolve, exec: main, json_api: true }
        - { path: /dns-query, exec: main }
  - tag: plain
    type: http_server
    args:
      listen: "127.0.0.2:0"
      entries: [{ path: /resolve, exec: main, json_api: true }]
`;

beforeAll(async () => {
  requireTool("curl");
  pki = makePki(tempDir("sluice-pki-"));
  up = await startResponder((q) => {
    const name = q.questions[0].name.toLowerCase();
    if (name === "up.json.test") return answerWith(q, ["192.0.2.90"], 45);
    return negative(q, RCODE.NXDOMAIN, 900, 300);
  });
  s = await startSluice(yaml(up.port), { "server.crt": pki.server.cert.toString(), "server.key": pki.server.key.toString() });
  tls = `https://127.0.0.1:${s.port("doh")}`;
  plain = `http://127.0.0.2:${s.port("plain")}`;
});
afterAll(async () => {
  await s.stop();
  await up.close();
});

interface CurlReply {
  status: number;
  contentType: string;
  httpVersion: string;
  body: string;
}

/** One request with curl over HTTP/2 and TLS, verifying the test CA. */
async function curl(path: string, headers: string[] = []): Promise<CurlReply> {
  const args = ["-s", "--http2", "--cacert", join(pki.dir, "ca.crt"), "-w", "\n%{http_code} %{content_type} %{http_version}", ...headers.flatMap((h) => ["-H", h]), `${tls}${path}`];
  const { stdout } = await run("curl", args, { timeout: 10_000 });
  const cut = stdout.lastIndexOf("\n");
  const [status, contentType, httpVersion] = stdout.slice(cut + 1).split(" ");
  return { status: Number(status), contentType, httpVersion, body: stdout.slice(0, cut) };
}

async function json(path: string): Promise<Record<string, unknown>> {
  const r = await curl(path);
  expect(r.status, r.body).toBe(200);
  expect(r.contentType).toBe("application/dns-json");
  expect(r.httpVersion).toBe("2");
  return JSON.parse(r.body) as Record<string, unknown>;
}

describe("answers", () => {
  test("an A question over HTTP/2 comes back in the public APIs' JSON shape", async () => {
    const r = await curl("/resolve?name=www.json.test&type=A");
    expect(JSON.parse(r.body)).toEqual({
      Status: 0,
      TC: false,
      RD: true,
      RA: true,
      AD: false,
      CD: false,
      Question: [{ name: "www.json.test.", type: 1 }],
      Answer: [{ name: "www.json.test.", type: 1, TTL: 300, data: "192.0.2.80" }],
    });
    // The type defaults to A; a trailing dot and a numeric type are accepted.
    expect((await json("/resolve?name=www.json.test.")).Answer).toEqual([{ name: "www.json.test.", type: 1, TTL: 300, data: "192.0.2.80" }]);
    expect((await json("/resolve?name=www.json.test&type=28")).Answer).toEqual([{ name: "www.json.test.", type: 28, TTL: 300, data: "2001:db8::80" }]);
  });

  test("record data is written per type: AAAA, CNAME, MX, TXT quoted", async () => {
    expect((await json("/resolve?name=www.json.test&type=aaaa")).Answer).toEqual([{ name: "www.json.test.", type: 28, TTL: 300, data: "2001:db8::80" }]);
    expect((await json("/resolve?name=alias.json.test&type=CNAME")).Answer).toEqual([{ name: "alias.json.test.", type: 5, TTL: 120, data: "www.json.test." }]);
    expect((await json("/resolve?name=json.test&type=MX")).Answer).toEqual([{ name: "json.test.", type: 15, TTL: 3600, data: "10 mx.json.test." }]);
    expect((await json("/resolve?name=json.test&type=TXT")).Answer).toEqual([{ name: "json.test.", type: 16, TTL: 60, data: '"hello world" "two"' }]);
  });

  test("a negative answer has a Status and an Authority section, and no Answer; max-age follows the SOA", async () => {
    const r = await curl("/resolve?name=missing.json.test&type=A");
    expect(r.status).toBe(200);
    const body = JSON.parse(r.body) as Record<string, unknown>;
    expect(body.Status).toBe(3);
    expect(body.Answer).toBeUndefined();
    expect(body.Authority).toEqual([{ name: "example.", type: 6, TTL: 900, data: "ns.example. admin.example. 1 3600 600 86400 300" }]);
    const h2 = await h2Once(tls, { path: "/resolve?name=missing.json.test" }, pki.ca);
    expect(h2.headers["cache-control"]).toBe("max-age=300");
  });

  test("do and cd reach the pipeline as the DO and CD bits; CD is reported back", async () => {
    const before = up.seen.length;
    const body = await json("/resolve?name=up.json.test&type=A&do=1&cd=true");
    expect(body.CD).toBe(true);
    expect(body.Answer).toEqual([{ name: "up.json.test.", type: 1, TTL: 45, data: "192.0.2.90" }]);
    const asked = up.seen.slice(before).map((x) => x.query);
    expect(asked).toHaveLength(1);
    expect(asked[0].flags & FLAG.CD).toBe(FLAG.CD);
    expect(asked[0].flags & FLAG.RD).toBe(FLAG.RD);
    expect((asked[0].edns?.flags ?? 0) & EDNS_DO).toBe(EDNS_DO);
    await json("/resolve?name=up.json.test&do=0&cd=false");
    const plainAsk = up.seen[up.seen.length - 1].query;
    expect(plainAsk.flags & FLAG.CD).toBe(0);
    expect((plainAsk.edns?.flags ?? 0) & EDNS_DO).toBe(0);
  });

  test("an internationalised name is asked in its punycode form", async () => {
    const body = await json(`/resolve?name=${encodeURIComponent("bücher.json.test")}`);
    expect(body.Question).toEqual([{ name: "xn--bcher-kva.json.test.", type: 1 }]);
    expect(body.Answer).toEqual([{ name: "xn--bcher-kva.json.test.", type: 1, TTL: 30, data: "192.0.2.81" }]);
  });

  test("content types: application/json when asked by Accept or ct, the wire answer for ct=application/dns-message", async () => {
    expect((await curl("/resolve?name=www.json.test", ["Accept: application/json"])).contentType).toBe("application/json");
    expect((await curl("/resolve?name=www.json.test", ["Accept: application/dns-json, application/json"])).contentType).toBe("application/dns-json");
    expect((await curl("/resolve?name=www.json.test&ct=application/json")).contentType).toBe("application/json");
    const wire = await h2Once(tls, { path: "/resolve?name=www.json.test&ct=application/dns-message" }, pki.ca);
    expect(wire.headers["content-type"]).toBe("application/dns-message");
    expect(answerIps(decodeMessage(wire.body))).toEqual(["192.0.2.80"]);
  });

  test("the same path still answers RFC 8484 GET and POST; cleartext HTTP/1.1 and h2c speak the JSON API too", async () => {
    const q = buildQuery("www.json.test", "A", { id: 9 });
    const viaGet = await h2Once(tls, { path: `/resolve?dns=${b64url(q)}` }, pki.ca);
    expect(decodeMessage(viaGet.body).id).toBe(9);
    const viaPost = await h2Once(tls, { method: "POST", path: "/resolve", headers: { "content-type": "application/dns-message" }, body: q }, pki.ca);
    expect(answerIps(decodeMessage(viaPost.body))).toEqual(["192.0.2.80"]);
    const h1 = await h1Request(plain, { path: "/resolve?name=www.json.test" });
    expect(h1.headers["content-type"]).toBe("application/dns-json");
    expect((JSON.parse(h1.body.toString()) as { Answer: unknown[] }).Answer).toHaveLength(1);
    const h2c = await h2Once(plain, { path: "/resolve?name=www.json.test&type=AAAA" });
    expect(h2c.alpn).toBe("h2c");
    expect((JSON.parse(h2c.body.toString()) as { Answer: { data: string }[] }).Answer[0].data).toBe("2001:db8::80");
  });
});

describe("errors", () => {
  test("every bad parameter is a 400 in the one error shape, naming what is wrong", async () => {
    const cases: [string, RegExp][] = [
      ["/resolve", /needs a name parameter/],
      ["/resolve?type=A", /needs a name parameter/],
      ["/resolve?name=", /needs a name parameter/],
      [`/resolve?name=${"a".repeat(64)}.json.test`, /not a domain name: label longer than 63 bytes/],
      ["/resolve?name=a..json.test", /not a domain name: empty label/],
      [`/resolve?name=${"abcdefghi.".repeat(26)}test`, /name longer than 255 bytes/],
      ["/resolve?name=www.json.test&type=BOGUS", /type 'BOGUS' is not a record type/],
      ["/resolve?name=www.json.test&type=0", /type '0' is not a record type/],
      ["/resolve?name=www.json.test&type=70000", /type '70000' is not a record type/],
      ["/resolve?name=www.json.test&type=OPT", /type 'OPT' is not a record type/],
      ["/resolve?name=www.json.test&do=maybe", /do must be 0, 1, true or false, not 'maybe'/],
      ["/resolve?name=www.json.test&cd=2", /cd must be 0, 1, true or false/],
      ["/resolve?name=www.json.test&ct=text/html", /ct must be one of application\/dns-json/],
    ];
    for (const [path, message] of cases) {
      const r = await curl(path);
      expect(r.status, path).toBe(400);
      expect(r.contentType, path).toBe("application/json");
      const body = JSON.parse(r.body) as { ok: boolean; code: string; message: string };
      expect(body.ok, path).toBe(false);
      expect(body.code, path).toBe("invalid_query");
      expect(body.message, path).toMatch(message);
    }
  });

  test("a path without json_api keeps RFC 8484's answer to a GET without dns", async () => {
    const r = await curl("/dns-query?name=www.json.test&type=A");
    expect(r.status).toBe(400);
    expect(JSON.parse(r.body)).toEqual({ ok: false, code: "bad_dns_query", message: "GET needs a dns parameter (RFC 8484: ?dns=<base64url DNS message>)" });
  });

  test("json_api must be a boolean", async () => {
    const err = await startSluice(`plugins:\n  - { tag: main, type: sequence, args: [{ exec: reject 5 }] }\n  - { tag: d, type: http_server, args: { listen: "127.0.0.1:0", entries: [{ path: /q, exec: main, json_api: "yes" }] } }\n`).then(
      async (x) => {
        await x.stop();
        return "started";
      },
      (e: unknown) => (e as Error).message,
    );
    expect(err).toMatch(/json_api/);
  });
});
