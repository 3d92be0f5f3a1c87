// `black_hole` seen from a client, every mode over real sockets and decoded by dns-packet: NXDOMAIN and
// NODATA with a synthesised SOA for every query type, null and custom addresses (NODATA for the other
// types), REFUSED, SERVFAIL; the legacy address-list forms; Next vs short_circuit; its counter;
// `sluice check` locating bad args; and the worked example of docs/plugins.md run as printed.
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import dnsPacket from "dns-packet";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { rcodeName } from "../../src/dns/constants.js";
import { buildQuery, query, rcodeOf, udpExchange } from "../helpers/dns.js";
import { checkErrors } from "../helpers/check.js";
import { startDocExample } from "../helpers/doc-example.js";
import { serversYaml, startSluice, tempDir, type RunningSluice } from "../helpers/sluice.js";

let s: RunningSluice;
beforeAll(async () => {
  s = await startSluice(`
plugins:
  - { tag: refuser, type: black_hole, args: { mode: refused, short_circuit: true } }
  - { tag: legacy_string, type: black_hole, args: "0.0.0.0 ::" }
  - { tag: legacy_object, type: black_hole, args: { ips: "192.0.2.9, 2001:db8::9", short_circuit: true } }
  - tag: main
    type: sequence
    args:
      - { matches: "qname domain:nx.test", exec: black_hole short_circuit }
      - { matches: "qname domain:nodata.test", exec: black_hole nodata ttl=60 short_circuit }
      - { matches: "qname domain:null.test", exec: black_hole null short_circuit }
      - { matches: "qname domain:custom.test", exec: black_hole custom 192.0.2.1 192.0.2.2 2001:db8::1 ttl=30 short_circuit=true }
      - { matches: "qname domain:v4only.test", exec: black_hole 0.0.0.0 short_circuit }
      - { matches: "qname domain:refused.test", exec: $refuser }
      - { matches: "qname domain:servfail.test", exec: black_hole servfail short_circuit }
      - { matches: "qname domain:legacy.test", exec: $legacy_string }
      - { matches: "qname domain:legacy2.test", exec: $legacy_object }
      - { matches: "qname domain:next.test", exec: black_hole nxdomain }
      - { matches: ["qname domain:next.test", "rcode NXDOMAIN"], exec: reject SERVFAIL }
      - { matches: has_resp, exec: accept }
      - exec: reject 5
${serversYaml()}
`);
});
afterAll(() => s.stop());

interface Decoded {
  rcode: string;
  answers: { name: string; type: string; ttl: number; data: unknown }[];
  authorities: { name: string; type: string; ttl: number; data: unknown }[];
}

/** One query over UDP, decoded by dns-packet (an independent decoder). */
async function ask(name: string, type: string, opts: { qclass?: number } = {}): Promise<Decoded> {
  const raw = await udpExchange(s.udpPort, buildQuery(name, type, { edns: 1232, qclass: opts.qclass }));
  if (!raw) throw new Error(`no answer for ${name} ${type}`);
  const m = dnsPacket.decode(raw);
  const records = (list: dnsPacket.Answer[] | undefined): Decoded["answers"] =>
    (list ?? []).map((r) => ({ name: r.name, type: r.type, ttl: "ttl" in r ? (r.ttl ?? -1) : -1, data: "data" in r ? r.data : undefined }));
  return { rcode: rcodeName((m.flags ?? 0) & 0x0f), answers: records(m.answers), authorities: records(m.authorities) };
}

const soa = (name: string, ttl: number): Decoded["authorities"][number] => ({
  name,
  type: "SOA",
  ttl,
  data: { mname: "ns.sluice.invalid", rname: "hostmaster.sluice.invalid", serial: 1, refresh: 1800, retry: 900, expire: 604800, minimum: ttl },
});

const TYPES = ["A", "AAAA", "TXT", "MX", "HTTPS", "SRV", "PTR"];

describe("modes", () => {
  test("plain black_hole is NXDOMAIN with an SOA (TTL and MINIMUM 300) for every type", async () => {
    for (const type of TYPES) {
      const m = await ask("ads.nx.test", type);
      expect(m, type).toEqual({ rcode: "NXDOMAIN", answers: [], authorities: [soa("ads.nx.test", 300)] });
    }
  });

  test("the SOA is owned by the name as the client spelt it", async () => {
    expect((await ask("Ads.NX.test", "A")).authorities).toEqual([soa("Ads.NX.test", 300)]);
  });

  test("nodata: NOERROR, no answer, the SOA with the configured TTL, for every type", async () => {
    for (const type of TYPES) {
      expect(await ask("x.nodata.test", type), type).toEqual({ rcode: "NOERROR", answers: [], authorities: [soa("x.nodata.test", 60)] });
    }
  });

  test("null: 0.0.0.0 and :: (TTL 300), NODATA with an SOA for other types", async () => {
    expect(await ask("a.null.test", "A")).toEqual({ rcode: "NOERROR", answers: [{ name: "a.null.test", type: "A", ttl: 300, data: "0.0.0.0" }], authorities: [] });
    expect(await ask("a.null.test", "AAAA")).toEqual({ rcode: "NOERROR", answers: [{ name: "a.null.test", type: "AAAA", ttl: 300, data: "::" }], authorities: [] });
    expect(await ask("a.null.test", "TXT")).toEqual({ rcode: "NOERROR", answers: [], authorities: [soa("a.null.test", 300)] });
  });

  test("custom: the given addresses of the asked family with the configured TTL; other types NODATA", async () => {
    const a = await ask("c.custom.test", "A");
    expect(a.answers.map((r) => [r.type, r.data, r.ttl])).toEqual([["A", "192.0.2.1", 30], ["A", "192.0.2.2", 30]]);
    const aaaa = await ask("c.custom.test", "AAAA");
    expect(aaaa.answers.map((r) => [r.type, r.data, r.ttl])).toEqual([["AAAA", "2001:db8::1", 30]]);
    expect(await ask("c.custom.test", "MX")).toEqual({ rcode: "NOERROR", answers: [], authorities: [soa("c.custom.test", 30)] });
  });

  test("an address list without a family: that family gets NODATA", async () => {
    expect((await ask("v4only.test", "A")).answers.map((r) => r.data)).toEqual(["0.0.0.0"]);
    expect(await ask("v4only.test", "AAAA")).toEqual({ rcode: "NOERROR", answers: [], authorities: [soa("v4only.test", 300)] });
  });

  test("refused and servfail: the bare rcode", async () => {
    for (const type of ["A", "TXT"]) {
      expect(await ask("r.refused.test", type)).toEqual({ rcode: "REFUSED", answers: [], authorities: [] });
      expect(await ask("s.servfail.test", type)).toEqual({ rcode: "SERVFAIL", answers: [], authorities: [] });
    }
  });

  test("the legacy forms (args as a string, ips as a string) are custom", async () => {
    expect((await ask("legacy.test", "A")).answers.map((r) => r.data)).toEqual(["0.0.0.0"]);
    expect((await ask("legacy.test", "AAAA")).answers.map((r) => r.data)).toEqual(["::"]);
    expect((await ask("legacy2.test", "AAAA")).answers.map((r) => r.data)).toEqual(["2001:db8::9"]);
    expect((await ask("legacy2.test", "TXT")).authorities).toEqual([soa("legacy2.test", 300)]);
  });

  test("without short_circuit the sequence goes on with the answer set", async () => {
    expect((await ask("n.next.test", "A")).rcode).toBe("SERVFAIL");
  });

  test("a class other than IN passes through", async () => {
    expect(rcodeOf(await query(s.udpPort, "ads.nx.test", "TXT", { qclass: 3 }))).toBe(5);
  });

  test("over TCP the same answer", async () => {
    const m = await query(s.tcpPort, "ads.nx.test", "AAAA", { tcp: true });
    expect(rcodeOf(m)).toBe(3);
    expect(m.authorities).toHaveLength(1);
  });

  test("blackhole_block_total counts every synthesised answer", async () => {
    const count = async (): Promise<number> => {
      const text = await s.app.services.metrics.registry.metrics();
      const line = text.split("\n").find((l) => l.startsWith('blackhole_block_total{plugin_tag="refuser"}'));
      return Number(line?.split(" ")[1] ?? 0);
    };
    const before = await count();
    await ask("r.refused.test", "A");
    await ask("r.refused.test", "MX");
    expect(await count()).toBe(before + 2);
  });
});

describe("sluice check", () => {
  const dir = tempDir();
  const check = (rules: string): string => {
    const file = join(dir, "bh.yaml");
    writeFileSync(file, `plugins:\n${rules}`);
    return checkErrors(file).replaceAll(`${file}:`, "");
  };

  test("a word that is neither a mode nor an address, in a quick setup", () => {
    expect(check("  - tag: main\n    type: sequence\n    args:\n      - exec: black_hole nxdomian\n")).toBe(
      "5:15: error: plugin 'main': args[0].exec: 'black_hole nxdomian': 'nxdomian' is neither an IP address nor a mode (nxdomain, nodata, null, custom, refused, servfail)",
    );
  });

  test("addresses with another mode, custom without addresses, an unknown mode, a bad ttl", () => {
    expect(check("  - tag: a\n    type: black_hole\n    args: { mode: nodata, ips: [0.0.0.0] }\n")).toBe(
      "4:32: error: plugin 'a': args.ips: addresses are only used by mode 'custom' (mode is 'nodata')",
    );
    expect(check("  - tag: a\n    type: black_hole\n    args:\n      mode: custom\n")).toMatch(/^5:7: error: plugin 'a': args.ips: mode 'custom' needs at least one IP address in 'ips'$/);
    expect(check("  - tag: a\n    type: black_hole\n    args: { mode: blackout }\n")).toMatch(/^4:19: error: plugin 'a': args.mode: /);
    expect(check("  - tag: main\n    type: sequence\n    args:\n      - exec: black_hole null ttl=soon\n")).toMatch(/^5:15: error: plugin 'main': args\[0\]\.exec: 'black_hole null ttl=soon': .*integer/);
    expect(check("  - tag: a\n    type: black_hole\n    args: { ips: [0.0.0.0, 10.0.0.300] }\n")).toBe("4:28: error: plugin 'a': args.ips[1]: '10.0.0.300' is not an IP address");
  });
});

test("docs/plugins.md's example runs as printed", async () => {
  const ex = await startDocExample("Sinkholes for every query type");
  try {
    const results = await ex.runAll();
    expect(results).toHaveLength(7);
    for (const r of results) expect(r.output, r.command).toBe(r.printed);
  } finally {
    await ex.stop();
  }
});
