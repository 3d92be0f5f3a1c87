// `ddr` over real sockets: `_dns.resolver.arpa` SVCB answered with one record per DoT/DoH listener
// of the configuration (TLS listeners only, configuration order, the real ports, address hints, the
// DoH path), compared with the bytes the zone parser makes of the same text and read back by dig over
// DoT; NODATA with an SOA for the other types and without a name; other names pass through to the
// upstream, this one never does; a reload that drops a listener, or every TLS listener, changes the
// answer; the counter; `sluice check` locating bad args; the worked example of docs/plugins.md run as
// printed (its openssl command too).
import { execFile } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import dnsPacket from "dns-packet";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { rcodeName } from "../../src/dns/constants.js";
import { checkErrors } from "../helpers/check.js";
import { startDocExample, type RunningExample } from "../helpers/doc-example.js";
import { buildQuery, query, rcodeOf, udpExchange } from "../helpers/dns.js";
import { makePki } from "../helpers/pki.js";
import { answerWith, startResponder, type Responder } from "../helpers/responder.js";
import { startSluice, tempDir, type RunningSluice } from "../helpers/sluice.js";
import { requireTool } from "../helpers/tools.js";
import { parseOne } from "../helpers/zone.js";
import type { ServerPlugin } from "../../src/registry/types.js";

const run = promisify(execFile);

const SERVERS = {
  doh: `  - tag: doh
    type: http_server
    args: { listen: "127.0.0.1:0", cert: server.crt, key: server.key, entries: [{ path: /q, exec: main }, { path: /dns-query, exec: main }] }`,
  cleartext: `  - { tag: cleartext, type: http_server, args: { listen: "127.0.0.3:0", entries: [{ path: /dns-query, exec: main }] } }`,
  dot: `  - { tag: dot, type: tcp_server, args: { entry: main, listen: "127.0.0.2:0", cert: server.crt, key: server.key } }`,
};

const yaml = (servers: (keyof typeof SERVERS)[], upstream: number): string => `
api: { http: "127.0.0.1:0" }
plugins:
  - tag: main
    type: sequence
    args:
      - exec: ddr dns.example.test ttl=60
      - exec: forward 127.0.0.1:${upstream}
  - tag: anonymous
    type: sequence
    args:
      - exec: ddr
      - exec: reject 5
  - { tag: udp, type: udp_server, args: { entry: main, listen: "127.0.0.1:0" } }
  - { tag: udp_anonymous, type: udp_server, args: { entry: anonymous, listen: "127.0.0.2:0" } }
  - { tag: tcp, type: tcp_server, args: { entry: main, listen: "127.0.0.1:0" } }
${servers.map((k) => SERVERS[k]).join("\n")}
`;

let s: RunningSluice;
let upstream: Responder;
const dir = tempDir();
beforeAll(async () => {
  requireTool("dig");
  const pki = makePki(dir);
  upstream = await startResponder((q) => answerWith(q, []));
  s = await startSluice(yaml(["doh", "cleartext", "dot"], upstream.port), { "server.crt": pki.server.cert, "server.key": pki.server.key });
});
afterAll(async () => {
  await s.stop();
  await upstream.close();
});

const portOf = (tag: string): number => (s.app.runtime.live(tag)?.instance as ServerPlugin).address().port;

/** The SVCB record data the zone parser makes of `text` (an independent encoder of the same record). */
const svcbData = (text: string): string => parseOne(`_dns.resolver.arpa. 60 IN SVCB ${text}`).data.toString("hex");

interface Decoded {
  rcode: string;
  answers: { name: string; type: string; ttl: number | undefined; hex: string }[];
  authorities: { name: string; type: string; ttl: number | undefined }[];
}

/** One query over UDP to the `udp` server (or to `udp_anonymous`, on 127.0.0.2), decoded by dns-packet. */
async function ask(name: string, type: string, server: "udp" | "udp_anonymous" = "udp"): Promise<Decoded> {
  const raw = await udpExchange(portOf(server), buildQuery(name, type), 2000, server === "udp" ? "127.0.0.1" : "127.0.0.2");
  if (!raw) throw new Error(`no answer for ${name} ${type}`);
  const m = dnsPacket.decode(raw);
  // dns-packet has no SVCB codec: it hands back the record data as bytes.
  const hex = (data: unknown): string => (Buffer.isBuffer(data) ? data.toString("hex") : JSON.stringify(data));
  return {
    rcode: rcodeName((m.flags ?? 0) & 0x0f),
    answers: (m.answers ?? []).map((r) => ({ name: r.name, type: r.type, ttl: "ttl" in r ? r.ttl : undefined, hex: hex("data" in r ? r.data : undefined) })),
    authorities: (m.authorities ?? []).map((r) => ({ name: r.name, type: r.type, ttl: "ttl" in r ? r.ttl : undefined })),
  };
}

async function reloadWith(text: string): Promise<void> {
  writeFileSync(join(s.dir, "sluice.yaml"), text);
  const before = (await (await s.api("/api/reload/status")).json()) as { last_completed_ms: number | null };
  expect((await s.api("/api/reload", { method: "POST" })).status).toBe(202);
  for (;;) {
    const status = (await (await s.api("/api/reload/status")).json()) as { status: string; last_completed_ms: number | null };
    if (status.status === "ok" && status.last_completed_ms !== before.last_completed_ms) return;
    if (status.status === "failed") throw new Error(JSON.stringify(status));
    await new Promise((r) => setTimeout(r, 10));
  }
}

const nodata = (name: string, ttl: number): Decoded => ({ rcode: "NOERROR", answers: [], authorities: [{ name, type: "SOA", ttl }] });

describe("SVCB for the TLS listeners", () => {
  test("DoH then DoT (configuration order): alpn, the real port, the bound address as a hint, the first DoH path", async () => {
    const m = await ask("_dns.resolver.arpa", "SVCB");
    expect(m.rcode).toBe("NOERROR");
    expect(m.answers.map((r) => [r.name, r.type, r.ttl])).toEqual([
      ["_dns.resolver.arpa", "UNKNOWN_64", 60], // dns-packet names type 64 so
      ["_dns.resolver.arpa", "UNKNOWN_64", 60], // dns-packet names type 64 so
    ]);
    expect(m.answers.map((r) => r.hex)).toEqual([
      svcbData(`1 dns.example.test. alpn=h2 port=${portOf("doh")} ipv4hint=127.0.0.1 dohpath=/q{?dns}`),
      svcbData(`2 dns.example.test. alpn=dot port=${portOf("dot")} ipv4hint=127.0.0.2`),
    ]);
    expect(m.authorities).toEqual([]);
  });

  test("dig reads the records over DoT", async () => {
    const dot = portOf("dot");
    const { stdout } = await run("dig", ["@127.0.0.2", "-p", String(dot), "+tls", "+short", "_dns.resolver.arpa", "SVCB"], { timeout: 10_000 });
    // dig 9.18 prints dohpath (key 7) by number.
    expect(stdout).toBe(
      `1 dns.example.test. alpn="h2" port=${portOf("doh")} ipv4hint=127.0.0.1 key7="/q{?dns}"\n2 dns.example.test. alpn="dot" port=${dot} ipv4hint=127.0.0.2\n`,
    );
  });

  test("the name is matched without regard to case and answered as the client spelt it", async () => {
    const m = await ask("_DNS.Resolver.ARPA", "SVCB");
    expect(m.answers.map((r) => r.name)).toEqual(["_DNS.Resolver.ARPA", "_DNS.Resolver.ARPA"]);
  });

  test("any other type for the name: NODATA with an SOA (the configured TTL)", async () => {
    for (const type of ["A", "AAAA", "HTTPS", "TXT"]) expect(await ask("_dns.resolver.arpa", type), type).toEqual(nodata("_dns.resolver.arpa", 60));
  });

  test("without a name: NODATA for SVCB too (TTL 300)", async () => {
    expect(await ask("_dns.resolver.arpa", "SVCB", "udp_anonymous")).toEqual(nodata("_dns.resolver.arpa", 300));
  });

  test("other names pass through to the upstream; _dns.resolver.arpa never reaches it", async () => {
    for (const name of ["www.example.test", "resolver.arpa", "x._dns.resolver.arpa", "_dns.resolver.arpa.example"]) {
      const m = await query(portOf("udp"), name, "SVCB");
      expect(rcodeOf(m), name).toBe(0);
    }
    expect((await ask("other.test", "A", "udp_anonymous")).rcode).toBe("REFUSED");
    const asked = upstream.seen.map((q) => q.query.questions[0].name.toLowerCase());
    expect(asked).toContain("resolver.arpa");
    expect(asked).not.toContain("_dns.resolver.arpa");
  });

  test("ddr_answer_total counts SVCB and NODATA answers", async () => {
    const count = async (answer: string): Promise<number> => {
      const text = await s.app.services.metrics.registry.metrics();
      const line = text.split("\n").find((l) => l.startsWith(`ddr_answer_total{plugin_tag="qs.exec.main.0.ddr",answer="${answer}"}`));
      return Number(line?.split(" ")[1] ?? 0);
    };
    const [svcb, none] = [await count("svcb"), await count("nodata")];
    await ask("_dns.resolver.arpa", "SVCB");
    await ask("_dns.resolver.arpa", "A");
    await ask("_dns.resolver.arpa", "A");
    expect([await count("svcb"), await count("nodata")]).toEqual([svcb + 1, none + 2]);
  });
});

describe("reload", () => {
  test("the new configuration's listeners are advertised; none left with TLS: NODATA", async () => {
    await reloadWith(yaml(["dot", "cleartext"], upstream.port));
    expect((await ask("_dns.resolver.arpa", "SVCB")).answers.map((r) => r.hex)).toEqual([svcbData(`1 dns.example.test. alpn=dot port=${portOf("dot")} ipv4hint=127.0.0.2`)]);
    await reloadWith(yaml(["cleartext"], upstream.port));
    expect(await ask("_dns.resolver.arpa", "SVCB")).toEqual(nodata("_dns.resolver.arpa", 60));
    expect(upstream.seen.some((q) => q.query.questions[0].name.toLowerCase() === "_dns.resolver.arpa")).toBe(false);
  });
});

describe("sluice check", () => {
  const check = (plugin: string): string => {
    const file = join(dir, "ddr.yaml");
    writeFileSync(file, `plugins:\n${plugin}`);
    return checkErrors(file).replaceAll(`${file}:`, "");
  };

  test("a bad name, the root, two names, a bad ttl", () => {
    expect(check("  - tag: main\n    type: sequence\n    args:\n      - exec: ddr dns..example\n")).toBe(
      "5:15: error: plugin 'main': args[0].exec: 'ddr dns..example': empty label in name 'dns..example'",
    );
    expect(check("  - tag: d\n    type: ddr\n    args: { name: . }\n")).toBe("4:19: error: plugin 'd': args.name: needs a host name (the name on the certificate), not the root");
    expect(check("  - tag: main\n    type: sequence\n    args:\n      - exec: ddr a.test b.test\n")).toBe(
      "5:15: error: plugin 'main': args[0].exec: 'ddr a.test b.test': 'b.test': ddr takes one name (and ttl=<seconds>)",
    );
    expect(check("  - tag: d\n    type: ddr\n    args: a.test ttl=-5\n")).toMatch(/^4:11: error: plugin 'd': args.ttl: .*integer/);
  });
});

test("docs/plugins.md's example runs as printed", async () => {
  const title = "Advertising DoT and DoH to DDR clients";
  const doc = readFileSync(join(import.meta.dirname, "..", "..", "docs", "plugins.md"), "utf8");
  const section = doc.slice(doc.indexOf(`#### Example: ${title}\n`));
  const openssl = (/```sh\n([\s\S]*?)```/.exec(section) ?? ["", "false"])[1];
  const certs = tempDir();
  await run("bash", ["-e", "-c", openssl], { cwd: certs, timeout: 10_000 });
  const read = (f: string): string => readFileSync(join(certs, f), "utf8");
  // The listeners run on port 0; the printed records say the document's ports.
  const holder: { ex: RunningExample | null } = { ex: null };
  const port = (msg: string): string => String(holder.ex?.cli.logs.find((l) => l.msg === msg)?.port);
  holder.ex = await startDocExample(title, {
    replace: [["127.0.0.1:8853", "127.0.0.1:0"], ["127.0.0.1:8443", "127.0.0.1:0"]],
    files: { "cert.pem": read("cert.pem"), "key.pem": read("key.pem") },
    normalize: (out) => out.replace(`port=${port("dot server listening")} `, "port=8853 ").replace(`port=${port("doh server listening")} `, "port=8443 "),
  });
  try {
    const results = await holder.ex.runAll();
    expect(results).toHaveLength(4);
    for (const r of results) expect(r.output, r.command).toBe(r.printed);
  } finally {
    await holder.ex.stop();
  }
});
