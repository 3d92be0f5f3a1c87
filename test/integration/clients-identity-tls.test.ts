// Client ids over real TLS with certificates made here: the DoH path id (dig +https=/dns-query/<id>),
// a bad one refused with 400 invalid_client_id, the DoT server name (kdig +tls-hostname=<id>.<name>),
// and the precedence: an id never overrides a client its address names unless trust_client_ids. Two
// configurations run side by side: the default (ids trusted less than addresses, tls_server_names
// listed) and the other (trust_client_ids, no tls_server_names: a declared id's first label counts).
import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { b64url, h1Request } from "../helpers/doh-client.js";
import { buildQuery } from "../helpers/dns.js";
import { makeCa, makeLeaf, requireOpenssl } from "../helpers/pki.js";
import { startSluice, tempDir, type RunningSluice } from "../helpers/sluice.js";
import { requireTool } from "../helpers/tools.js";

const run = promisify(execFile);

const yaml = (clients: string): string => `
plugins:
  - tag: clients
    type: clients
    args:
      clients:
        - { name: anna, addresses: [127.0.1.2], ids: [anna] }
        - { name: ben, ids: [Ben] }
      groups: [{ name: kids }]
${clients}
  - tag: main
    type: sequence
    args:
      - { matches: "client anna", exec: reject 2 }
      - { matches: "client ben", exec: reject 3 }
      - exec: reject 9
  - { tag: doh, type: http_server, args: { listen: "127.0.0.1:0", cert: named.crt, key: named.key, entries: [{ path: /dns-query, exec: main }] } }
  - { tag: dot, type: tcp_server, args: { entry: main, listen: "127.0.0.1:0", cert: named.crt, key: named.key } }
`;

const WHO: Record<string, string> = { SERVFAIL: "anna", NXDOMAIN: "ben", NOTAUTH: "nobody" };

let ca = "";
let caPem: Buffer;
let strict: RunningSluice;
let trusting: RunningSluice;

beforeAll(async () => {
  requireTool("dig");
  requireTool("kdig");
  requireOpenssl();
  // A CA and one certificate for every name the clients below ask for (not makePki's five certificates: three openssl runs instead of ten).
  const dir = tempDir("sluice-pki-");
  makeCa(dir, "ca");
  makeLeaf(dir, "ca", "named", "subjectAltName=DNS:dns.example.net,DNS:*.dns.example.net,DNS:*.other.example,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n");
  ca = join(dir, "ca.crt");
  caPem = readFileSync(ca);
  const files = { "named.crt": readFileSync(join(dir, "named.crt")), "named.key": readFileSync(join(dir, "named.key")) };
  strict = await startSluice(yaml("      tls_server_names: [dns.example.net]"), files);
  trusting = await startSluice(yaml("      trust_client_ids: true\n      tls_server_names: []"), files);
});
afterAll(async () => {
  await strict.stop();
  await trusting.stop();
});

const statusOf = (stdout: string): string => {
  const status = /status: ([A-Z]+)/.exec(stdout)?.[1] ?? `no status in ${stdout}`;
  return WHO[status] ?? status;
};

/** Who a dig +https query from `source` to `path` was taken for. */
async function viaDoh(s: RunningSluice, source: string, path: string): Promise<string> {
  const { stdout } = await run("dig", ["@127.0.0.1", "-p", String(s.port("doh")), "-b", source, `+https=${path}`, `+tls-ca=${ca}`, "+time=2", "+tries=1", "who.test", "A"], { timeout: 5000 });
  return statusOf(stdout);
}

/** Who a kdig DoT query from `source` asking for server name `name` was taken for (the certificate checked against it). */
async function viaDot(s: RunningSluice, source: string, name: string): Promise<string> {
  const { stdout } = await run("kdig", ["@127.0.0.1", "-p", String(s.port("dot")), "-b", source, `+tls-ca=${ca}`, `+tls-hostname=${name}`, "+time=2", "+retry=0", "who.test", "A"], { timeout: 5000 });
  return statusOf(stdout);
}

describe("DoH path id", () => {
  test("/dns-query/<id> names the client declaring the id (any case); without an id, or an id no one declares, no one", async () => {
    expect(await viaDoh(strict, "127.0.3.1", "/dns-query/ben")).toBe("ben");
    expect(await viaDoh(strict, "127.0.3.1", "/dns-query/BEN")).toBe("ben");
    expect(await viaDoh(strict, "127.0.3.1", "/dns-query/anna")).toBe("anna");
    expect(await viaDoh(strict, "127.0.3.1", "/dns-query")).toBe("nobody");
    expect(await viaDoh(strict, "127.0.3.1", "/dns-query/carl")).toBe("nobody");
  });

  test("an id that is not a DNS label is refused with 400 invalid_client_id; an id under a path that is no entry is 404", async () => {
    const origin = `https://127.0.0.1:${strict.port("doh")}`;
    const dns = b64url(buildQuery("who.test", "A", { id: 0 }));
    for (const id of ["not_a_label", "-ben", "ben-", "a".repeat(64)]) {
      const reply = await h1Request(origin, { path: `/dns-query/${id}?dns=${dns}` }, caPem);
      expect(reply.status, id).toBe(400);
      expect(JSON.parse(reply.body.toString()), id).toMatchObject({ ok: false, code: "invalid_client_id" });
    }
    const elsewhere = await h1Request(origin, { path: `/other/ben?dns=${dns}` }, caPem);
    expect(elsewhere.status).toBe(404);
    expect(JSON.parse(elsewhere.body.toString())).toMatchObject({ ok: false, code: "not_found" });
    const ok = await h1Request(origin, { path: `/dns-query/${"a".repeat(63)}?dns=${dns}` }, caPem);
    expect(ok.status).toBe(200);
  });
});

describe("DoT server name", () => {
  test("<id>.<a tls_server_names entry> names the client declaring the id; the bare name or another domain does not", async () => {
    expect(await viaDot(strict, "127.0.3.1", "ben.dns.example.net")).toBe("ben");
    expect(await viaDot(strict, "127.0.3.1", "anna.dns.example.net")).toBe("anna");
    expect(await viaDot(strict, "127.0.3.1", "dns.example.net")).toBe("nobody");
    expect(await viaDot(strict, "127.0.3.1", "ben.other.example")).toBe("nobody");
    expect(await viaDot(strict, "127.0.3.1", "carl.dns.example.net")).toBe("nobody");
  });

  test("with an empty tls_server_names, the first label counts only when a client declares it as an id", async () => {
    expect(await viaDot(trusting, "127.0.3.1", "ben.other.example")).toBe("ben");
    expect(await viaDot(trusting, "127.0.3.1", "ben.dns.example.net")).toBe("ben");
    expect(await viaDot(trusting, "127.0.3.1", "carl.dns.example.net")).toBe("nobody");
    expect(await viaDot(trusting, "127.0.3.1", "dns.example.net")).toBe("nobody");
  });
});

describe("precedence", () => {
  test("an id never overrides the client an address names, unless trust_client_ids", async () => {
    expect(await viaDoh(strict, "127.0.1.2", "/dns-query/ben")).toBe("anna");
    expect(await viaDot(strict, "127.0.1.2", "ben.dns.example.net")).toBe("anna");
    expect(await viaDoh(trusting, "127.0.1.2", "/dns-query/ben")).toBe("ben");
    expect(await viaDot(trusting, "127.0.1.2", "ben.other.example")).toBe("ben");
    // Without an id the address still decides.
    expect(await viaDoh(trusting, "127.0.1.2", "/dns-query")).toBe("anna");
    expect(await viaDot(trusting, "127.0.1.2", "carl.other.example")).toBe("anna");
  });
});
