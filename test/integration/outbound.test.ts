// network.outbound, the egress profiles: `sluice check` locates every bad profile and every
// reference to a profile that is not there (forward, download, upgrade); a download goes out
// through a profile (its proxy and bind address, or its resolver for the URL's host name); and the
// service plugins get from ctx.outbound(name) (lookup, connect, agent) works over real sockets,
// HTTP and HTTPS, directly and through a SOCKS5 proxy.
import { readFileSync, writeFileSync } from "node:fs";
import http from "node:http";
import https from "node:https";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { openOutbound } from "../../src/engine/upstream/outbound.js";
import type { Outbound } from "../../src/net/outbound.js";
import { checkErrors } from "../helpers/check.js";
import { makePki, type Pki } from "../helpers/pki.js";
import { answerWith, startResponder, type Responder } from "../helpers/responder.js";
import { startSluice, tempDir } from "../helpers/sluice.js";
import { startSocks5, type Socks5Server } from "../helpers/socks5.js";

/** An HTTP(S) server on 127.0.0.1 answering `hello <path>` and noting where each request came from. */
async function startWeb(tlsOptions?: { cert: Buffer; key: Buffer }): Promise<{ port: number; from: string[]; close(): Promise<void> }> {
  const from: string[] = [];
  const handler = (req: http.IncomingMessage, res: http.ServerResponse): void => {
    from.push(req.socket.remoteAddress ?? "");
    res.end(`hello ${req.url ?? ""}`);
  };
  const server = tlsOptions ? https.createServer(tlsOptions, handler) : http.createServer(handler);
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return {
    port: (server.address() as AddressInfo).port,
    from,
    close: () => {
      server.closeAllConnections();
      return new Promise((r) => server.close(() => r()));
    },
  };
}

let pki: Pki;
let web: Awaited<ReturnType<typeof startWeb>>;
let secure: Awaited<ReturnType<typeof startWeb>>;
let names: Responder;
let proxy: Socks5Server;
beforeAll(async () => {
  pki = makePki(tempDir("sluice-pki-"));
  web = await startWeb();
  secure = await startWeb(pki.server);
  names = await startResponder((q) => answerWith(q, /^files\.lab\.test$/i.test(q.questions[0].name) ? ["127.0.0.1"] : []));
  proxy = await startSocks5();
});
afterAll(() => Promise.all([web?.close(), secure?.close(), names?.close(), proxy?.close()]));

describe("sluice check", () => {
  const check = (yaml: string): string => {
    const file = join(tempDir(), "bad.yaml");
    writeFileSync(file, yaml);
    return checkErrors(file);
  };

  test("a bad profile is located at its line: bind, socks5, resolver, its name; an unknown key", () => {
    const errors = check(`network:
  outbound:
    lab:
      bind: eth0
      socks5: "http://proxy:8080"
      resolver: dns.example
    "bad name": {}
plugins: []
`);
    expect(errors).toMatch(/bad\.yaml:4:\d+: error: network\.outbound\.lab\.bind must be a local IP address \(no port\), not 'eth0'/);
    expect(errors).toMatch(/bad\.yaml:5:\d+: error: network\.outbound\.lab\.socks5: 'http:\/\/proxy:8080': only socks5:\/\/ proxies are supported/);
    expect(errors).toMatch(/bad\.yaml:6:\d+: error: network\.outbound\.lab\.resolver must be a DNS server's ip\[:port\], not 'dns\.example'/);
    expect(errors).toMatch(/bad\.yaml:7:\d+: error: network\.outbound: 'bad name' is not a usable profile name/);
    expect(check(`network:\n  outbound:\n    other: { via: x }\nplugins: []\n`)).toMatch(/bad\.yaml:3:\d+: error: .*unknown field 'via'/);
  });

  test("a reference to a profile that is not there is an error at the reference: forward (plugin and upstream), download, upgrade", () => {
    const plugins = check(`network:
  outbound:
    lab: { bind: 127.0.0.1 }
plugins:
  - tag: fwd
    type: forward
    args:
      outbound: missing
      upstreams:
        - { addr: 192.0.2.1, outbound: lab }
        - { addr: 192.0.2.2, outbound: gone }
  - tag: dl
    type: download
    args:
      outbound: absent
      downloads: [{ url: "http://192.0.2.1/a.txt", dir: lists }]
`);
    expect(plugins).toMatch(/bad\.yaml:8:\d+: error: plugin 'fwd': args\.outbound: no outbound profile 'missing' in network\.outbound \(profiles: lab\)/);
    expect(plugins).toMatch(/bad\.yaml:11:\d+: error: plugin 'fwd': args\.upstreams\[1\]\.outbound: no outbound profile 'gone'/);
    expect(plugins).toMatch(/bad\.yaml:15:\d+: error: plugin 'dl': args\.outbound: no outbound profile 'absent'/);
    expect(plugins.split("\n")).toHaveLength(3);
    const upgrade = check(`network:\n  outbound:\n    lab: { bind: 127.0.0.1 }\nupgrade:\n  repository: a/b\n  outbound: nowhere\nplugins: []\n`);
    expect(upgrade).toMatch(/bad\.yaml:6:\d+: error: upgrade\.outbound: no outbound profile 'nowhere' in network\.outbound \(profiles: lab\)/);
    const none = check(`upgrade:\n  repository: a/b\n  outbound: lab\nplugins: []\n`);
    expect(none).toMatch(/bad\.yaml:3:\d+: error: upgrade\.outbound: no outbound profile 'lab' in network\.outbound \(none is configured\)/);
    const both = check(`network:\n  outbound:\n    lab: {}\nupgrade:\n  repository: a/b\n  outbound: lab\n  socks5: socks5://127.0.0.1:1080\nplugins: []\n`);
    expect(both).toMatch(/bad\.yaml:7:\d+: error: upgrade\.socks5 and upgrade\.outbound are both set/);
  });
});

describe("download through a profile", () => {
  test("through its proxy, from its bind address; or from its bind address with its resolver naming the host", async () => {
    const targetsBefore = proxy.targets.length;
    const s = await startSluice(`network:
  outbound:
    proxied: { bind: 127.0.0.5, socks5: "${proxy.url}" }
    named: { bind: 127.0.0.6, resolver: "127.0.0.1:${names.port}" }
plugins:
  - { tag: via_proxy, type: download, args: { outbound: proxied, downloads: [{ url: "http://127.0.0.1:${web.port}/one.txt", dir: lists }] } }
  - { tag: via_name, type: download, args: { outbound: named, downloads: [{ url: "http://files.lab.test:${web.port}/two.txt", dir: lists }] } }
  - { tag: main, type: sequence, args: [{ exec: reject 3 }] }
  - { tag: udp, type: udp_server, args: { entry: main, listen: "127.0.0.1:0" } }
`);
    try {
      expect(readFileSync(join(s.dir, "lists", "one.txt"), "utf8")).toBe("hello /one.txt");
      expect(readFileSync(join(s.dir, "lists", "two.txt"), "utf8")).toBe("hello /two.txt");
      expect(proxy.targets.slice(targetsBefore)).toEqual([`127.0.0.1:${web.port}`]);
      expect(proxy.clients.slice(-1)).toEqual(["127.0.0.5"]);
      expect(web.from).toContain("127.0.0.6");
      expect(names.seen.map((q) => q.query.questions[0].name.toLowerCase())).toContain("files.lab.test");
    } finally {
      await s.stop();
    }
  });
});

describe("the Outbound service (ctx.outbound)", () => {
  const get = (o: Outbound, url: string, options: https.RequestOptions = {}): Promise<string> =>
    new Promise((resolve, reject) => {
      const u = new URL(url);
      const agent = o.agent(u.protocol === "https:" ? "https:" : "http:", { keepAlive: true });
      const lib = u.protocol === "https:" ? https : http;
      const req = lib.get(u, { agent, ...options }, (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => {
          agent.destroy();
          resolve(Buffer.concat(chunks).toString());
        });
      });
      req.on("error", reject);
    });

  test("lookup through the profile's resolver; connect and HTTP agents from the bind address, by name", async () => {
    const o = openOutbound({ name: "lab", bind: "127.0.0.7", socks5: null, resolver: `127.0.0.1:${names.port}` });
    expect(await o.lookup("files.lab.test")).toEqual([{ address: "127.0.0.1", family: 4 }]);
    expect(await o.lookup("192.0.2.9")).toEqual([{ address: "192.0.2.9", family: 4 }]);
    const socket = await o.connect("files.lab.test", web.port, { timeoutMs: 2000 });
    expect(socket.localAddress).toBe("127.0.0.7");
    socket.destroy();
    expect(await get(o, `http://files.lab.test:${web.port}/agent`)).toBe("hello /agent");
    expect(web.from[web.from.length - 1]).toBe("127.0.0.7");
    expect(await get(o, `https://127.0.0.1:${secure.port}/tls`, { ca: pki.ca })).toBe("hello /tls");
    expect(secure.from[secure.from.length - 1]).toBe("127.0.0.7");
  });

  test("through the profile's proxy: connect, HTTP and HTTPS (the certificate still checked against the request's CA)", async () => {
    const before = proxy.targets.length;
    const o = openOutbound({ name: "proxied", bind: null, socks5: proxy.url, resolver: null });
    const socket = await o.connect("127.0.0.1", web.port);
    socket.destroy();
    expect(await get(o, `http://127.0.0.1:${web.port}/via`)).toBe("hello /via");
    expect(await get(o, `https://127.0.0.1:${secure.port}/via-tls`, { ca: pki.ca })).toBe("hello /via-tls");
    await expect(get(o, `https://127.0.0.1:${secure.port}/untrusted`)).rejects.toThrow(/self.signed|unable to verify|certificate/i);
    expect(proxy.targets.slice(before)).toEqual([`127.0.0.1:${web.port}`, `127.0.0.1:${web.port}`, `127.0.0.1:${secure.port}`, `127.0.0.1:${secure.port}`]);
  });
});
