// The `reject` builtin's negative answers as a client sees them (decoded by dns-packet): NXDOMAIN, by
// name or number, `nodata` and OxiDNS's `reject 0 soa` carry a synthesised SOA (TTL and MINIMUM 300, or ttl=N); the other
// rcodes stay bare. `sluice check` locates a bad `reject` expression. The worked example of
// docs/plugins.md runs as printed.
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import dnsPacket from "dns-packet";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { rcodeName } from "../../src/dns/constants.js";
import { buildQuery, tcpExchange, udpExchange } from "../helpers/dns.js";
import { checkErrors } from "../helpers/check.js";
import { startDocExample } from "../helpers/doc-example.js";
import { serversYaml, startSluice, tempDir, type RunningSluice } from "../helpers/sluice.js";

let s: RunningSluice;
beforeAll(async () => {
  s = await startSluice(`
plugins:
  - tag: main
    type: sequence
    args:
      - { matches: "qname domain:nx.test", exec: reject nxdomain }
      - { matches: "qname domain:nx3.test", exec: reject 3 }
      - { matches: "qname domain:nx60.test", exec: reject NXDOMAIN ttl=60 }
      - { matches: "qname domain:nodata.test", exec: reject nodata }
      - { matches: "qname domain:nodata0.test", exec: reject NODATA ttl=0 }
      - { matches: "qname domain:noerror.test", exec: reject noerror }
      - { matches: "qname domain:zerosoa.test", exec: reject 0 soa }
      - { matches: "qname domain:noerrorsoa.test", exec: reject NOERROR soa ttl=30 }
      - { matches: "qname domain:servfail.test", exec: reject servfail }
      - exec: reject
${serversYaml()}
`);
});
afterAll(() => s.stop());

interface Decoded {
  rcode: string;
  answers: number;
  authorities: { name: string; type: string; ttl: number | undefined; data: unknown }[];
}

async function ask(name: string, type = "A", tcp = false): Promise<Decoded> {
  const packet = buildQuery(name, type);
  const raw = tcp ? (await tcpExchange(s.tcpPort, [packet]))[0] : await udpExchange(s.udpPort, packet);
  if (!raw) throw new Error(`no answer for ${name}`);
  const m = dnsPacket.decode(raw);
  const authorities = (m.authorities ?? []).map((r) => ({ name: r.name, type: r.type, ttl: "ttl" in r ? r.ttl : undefined, data: "data" in r ? r.data : undefined }));
  return { rcode: rcodeName((m.flags ?? 0) & 0x0f), answers: (m.answers ?? []).length, authorities };
}

const soa = (name: string, ttl: number): Decoded["authorities"][number] => ({
  name,
  type: "SOA",
  ttl,
  data: { mname: "ns.sluice.invalid", rname: "hostmaster.sluice.invalid", serial: 1, refresh: 1800, retry: 900, expire: 604800, minimum: ttl },
});

describe("negative answers carry an SOA", () => {
  test("reject nxdomain and reject 3: NXDOMAIN with the SOA, TTL 300, owned by the question name", async () => {
    for (const type of ["A", "AAAA", "MX"]) {
      expect(await ask("x.nx.test", type)).toEqual({ rcode: "NXDOMAIN", answers: 0, authorities: [soa("x.nx.test", 300)] });
      expect(await ask("x.nx3.test", type)).toEqual({ rcode: "NXDOMAIN", answers: 0, authorities: [soa("x.nx3.test", 300)] });
    }
    expect(await ask("x.nx.test", "A", true)).toEqual({ rcode: "NXDOMAIN", answers: 0, authorities: [soa("x.nx.test", 300)] });
  });

  test("ttl=N sets the SOA's TTL and MINIMUM", async () => {
    expect(await ask("x.nx60.test")).toEqual({ rcode: "NXDOMAIN", answers: 0, authorities: [soa("x.nx60.test", 60)] });
    expect(await ask("x.nodata0.test", "TXT")).toEqual({ rcode: "NOERROR", answers: 0, authorities: [soa("x.nodata0.test", 0)] });
  });

  test("reject nodata: NOERROR, empty answer, the SOA", async () => {
    for (const type of ["A", "AAAA", "HTTPS"]) {
      expect(await ask("x.nodata.test", type)).toEqual({ rcode: "NOERROR", answers: 0, authorities: [soa("x.nodata.test", 300)] });
    }
  });

  test("OxiDNS's reject 0 soa is reject nodata", async () => {
    expect(await ask("x.zerosoa.test", "A")).toEqual({ rcode: "NOERROR", answers: 0, authorities: [soa("x.zerosoa.test", 300)] });
    expect(await ask("x.noerrorsoa.test", "MX")).toEqual({ rcode: "NOERROR", answers: 0, authorities: [soa("x.noerrorsoa.test", 30)] });
  });

  test("other rcodes (and reject noerror) stay bare", async () => {
    expect(await ask("x.noerror.test")).toEqual({ rcode: "NOERROR", answers: 0, authorities: [] });
    expect(await ask("x.servfail.test")).toEqual({ rcode: "SERVFAIL", answers: 0, authorities: [] });
    expect(await ask("other.test")).toEqual({ rcode: "REFUSED", answers: 0, authorities: [] });
  });
});

describe("sluice check", () => {
  const dir = tempDir();
  /** `sluice check` of a sequence whose one rule is `exec: <expr>` (line 5, column 15). */
  const check = (expr: string): string => {
    const file = join(dir, "reject.yaml");
    writeFileSync(file, `plugins:\n  - tag: main\n    type: sequence\n    args:\n      - exec: ${expr}\n`);
    return checkErrors(file).replaceAll(`${file}:`, "");
  };

  test.each([
    ["reject nodat", "'nodat' is not an rcode (use a number, a name such as NXDOMAIN, or nodata)"],
    ["reject nodata 60", "'60' is not part of reject: write 'reject [rcode|nodata] [soa] [ttl=<seconds>]'"],
    ["reject nodata ttl=soon", "'ttl=soon' is not a TTL: write 'reject nodata ttl=<seconds>'"],
    ["reject refused ttl=60", "ttl= sets the SOA of a negative answer: only 'reject nxdomain' and 'reject nodata' take it"],
    ["reject nxdomain ttl=2147483648", "ttl=2147483648 is above the largest TTL, 2147483647"],
    ["reject nodata ttl=60 ttl=5", "'ttl=5' is not part of reject: write 'reject [rcode|nodata] [soa] [ttl=<seconds>]'"],
    ["reject refused soa", "'soa' goes with a negative answer: 'reject 0 soa', 'reject nodata' or 'reject nxdomain'"],
  ])("%s", (expr, message) => {
    expect(check(expr)).toBe(`5:15: error: plugin 'main': args[0].exec: ${message}`);
  });
});

test("docs/plugins.md's example runs as printed", async () => {
  const ex = await startDocExample("Negative answers clients cache");
  try {
    const results = await ex.runAll();
    expect(results).toHaveLength(6);
    for (const r of results) expect(r.output, r.command).toBe(r.printed);
  } finally {
    await ex.stop();
  }
});
