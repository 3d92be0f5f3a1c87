// `arbitrary` over real sockets: zone-format records answered to a client (decoded by us and by
// dns-packet), $GENERATE and $INCLUDE, short_circuit, pass-through, and errors at check and start.
import { rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Writable } from "node:stream";
import dnsPacket from "dns-packet";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { App, checkConfig } from "../../src/app/app.js";
import { FLAG, QTYPE } from "../../src/dns/constants.js";
import { createCatalog } from "../../src/plugins/catalog.js";
import { answerIps, query, buildQuery, rcodeOf, udpExchange } from "../helpers/dns.js";
import { serversYaml, startSluice, tempDir, type RunningSluice } from "../helpers/sluice.js";
import { flattenAnswers, txtStrings, type DecodedRecord } from "../helpers/zone.js";

const yaml = `
plugins:
  - tag: zone
    type: arbitrary
    args:
      rules:
        - "www.example.com. 300 IN A 192.0.2.1"
        - |
          $ORIGIN example.com.
          $TTL 600
          www AAAA 2001:db8::1
          txt TXT "hello world" "second string"
          @ MX 10 mail
            MX 20 mail2.example.net.
          _sip._tcp SRV 10 60 5060 sip
          svc HTTPS 1 . alpn=h2,h3 port=8443 ipv4hint=192.0.2.7
          next 60 A 192.0.2.50
          $GENERATE 1-5 host-$ A 10.0.0.$
      files: [main.zone]
  - tag: zone_stop
    type: arbitrary
    args: { rules: ["stop.example.com. 60 A 192.0.2.99"], short_circuit: true }
  - tag: main
    type: sequence
    args:
      - exec: $zone_stop
      # Reached only if zone_stop did not stop the sequence.
      - matches: qname full:stop.example.com
        exec: reject 5
      - exec: $zone
      - matches: qname full:next.example.com
        exec: reject 2
      - matches: has_resp
        exec: accept
      - exec: reject 5
${serversYaml()}
`;

const files = {
  "main.zone": "$ORIGIN files.example.\n$TTL 120\n@ A 198.51.100.1\n$INCLUDE extra.zone sub.files.example.\n",
  "extra.zone": '@ TXT "from include"\nwww 30 A 198.51.100.2\n',
};

let s: RunningSluice;
beforeAll(async () => {
  s = await startSluice(yaml, files);
});
afterAll(() => s.stop());

/** The same query, answered over UDP and decoded by dns-packet. */
async function viaDnsPacket(name: string, type: string): Promise<{ rcode: number; answers: DecodedRecord[] }> {
  const raw = await udpExchange(s.udpPort, buildQuery(name, type));
  if (!raw) throw new Error(`no answer for ${name} ${type}`);
  const decoded = dnsPacket.decode(raw);
  return { rcode: (decoded.flags ?? -1) & 0x0f, answers: flattenAnswers(decoded.answers) };
}

describe("answers as a client sees them", () => {
  test("A: NOERROR, the record's TTL, AA not set", async () => {
    const m = await query(s.udpPort, "www.example.com", "A");
    expect(rcodeOf(m)).toBe(0);
    expect(m.flags & FLAG.AA).toBe(0);
    expect(m.flags & FLAG.QR).not.toBe(0);
    expect(answerIps(m)).toEqual(["192.0.2.1"]);
    expect(m.answers[0].ttl).toBe(300);
    const p = await viaDnsPacket("www.example.com", "A");
    expect(p.rcode).toBe(0);
    expect(p.answers).toMatchObject([{ name: "www.example.com", type: "A", class: "IN", ttl: 300, data: "192.0.2.1" }]);
  });

  test("AAAA from a second snippet, with its $TTL", async () => {
    const m = await query(s.udpPort, "www.example.com", "AAAA");
    expect(answerIps(m)).toEqual(["2001:db8::1"]);
    expect(m.answers[0].ttl).toBe(600);
    expect((await viaDnsPacket("www.example.com", "AAAA")).answers).toMatchObject([{ type: "AAAA", ttl: 600, data: "2001:db8::1" }]);
  });

  test("TXT with two strings", async () => {
    const m = await query(s.udpPort, "txt.example.com", "TXT");
    expect(m.answers).toHaveLength(1);
    expect(m.answers[0].data.toString("hex")).toBe(Buffer.from("\u000bhello world\u000dsecond string").toString("hex"));
    const p = await viaDnsPacket("txt.example.com", "TXT");
    expect(txtStrings(p.answers[0].data)).toEqual(["hello world", "second string"]);
  });

  test("MX: both records of the set, the second from an inherited owner", async () => {
    const p = await viaDnsPacket("example.com", "MX");
    expect(p.answers.map((a) => a.data)).toEqual([
      { preference: 10, exchange: "mail.example.com" },
      { preference: 20, exchange: "mail2.example.net" },
    ]);
    expect((await query(s.udpPort, "example.com", "MX")).answers).toHaveLength(2);
  });

  test("SRV", async () => {
    const p = await viaDnsPacket("_sip._tcp.example.com", "SRV");
    expect(p.answers).toMatchObject([{ type: "SRV", ttl: 600, data: { priority: 10, weight: 60, port: 5060, target: "sip.example.com" } }]);
  });

  test("HTTPS: SvcParams on the wire in key order", async () => {
    const m = await query(s.udpPort, "svc.example.com", "HTTPS");
    expect(m.answers).toHaveLength(1);
    expect(m.answers[0].type).toBe(QTYPE.HTTPS);
    const expected = "0001 00 0001 0006 026832 026833 0003 0002 20fb 0004 0004 c0000207".replace(/ /g, "");
    expect(m.answers[0].data.toString("hex")).toBe(expected);
    // dns-packet has no HTTPS codec: it hands back the raw data, which must be the same bytes.
    const p = await viaDnsPacket("svc.example.com", "HTTPS");
    expect((p.answers[0].data as Buffer).toString("hex")).toBe(expected);
  });

  test("matching ignores case, and the answer is spelt as the client asked (0x20)", async () => {
    const m = await query(s.udpPort, "WwW.ExAmPlE.cOm", "A");
    expect(m.answers[0].name).toBe("WwW.ExAmPlE.cOm");
    expect(m.questions[0].name).toBe("WwW.ExAmPlE.cOm");
  });

  test("over TCP too", async () => {
    const m = await query(s.tcpPort, "www.example.com", "A", { tcp: true });
    expect(answerIps(m)).toEqual(["192.0.2.1"]);
  });
});

describe("directives", () => {
  test("$GENERATE records answer; outside the range passes through", async () => {
    for (const i of [1, 3, 5]) expect(answerIps(await query(s.udpPort, `host-${i}.example.com`, "A"))).toEqual([`10.0.0.${i}`]);
    expect(rcodeOf(await query(s.udpPort, "host-6.example.com", "A"))).toBe(5);
  });

  test("a zone file with $INCLUDE (own origin and TTLs)", async () => {
    const apex = await query(s.udpPort, "files.example", "A");
    expect([answerIps(apex), apex.answers[0].ttl]).toEqual([["198.51.100.1"], 120]);
    const inc = await query(s.udpPort, "www.sub.files.example", "A");
    expect([answerIps(inc), inc.answers[0].ttl]).toEqual([["198.51.100.2"], 30]);
    const txt = await viaDnsPacket("sub.files.example", "TXT");
    expect(txtStrings(txt.answers[0].data)).toEqual(["from include"]);
  });
});

describe("flow through the sequence", () => {
  test("short_circuit stops the sequence: the later `reject 5` is not reached", async () => {
    const m = await query(s.udpPort, "stop.example.com", "A");
    expect(rcodeOf(m)).toBe(0);
    expect(answerIps(m)).toEqual(["192.0.2.99"]);
  });

  test("without short_circuit the sequence goes on after an answer", async () => {
    // The rule after $zone turns this name into SERVFAIL, so it must have run.
    expect(rcodeOf(await query(s.udpPort, "next.example.com", "A"))).toBe(2);
  });

  test("no match passes through untouched to the next rule", async () => {
    expect(rcodeOf(await query(s.udpPort, "unknown.example.com", "A"))).toBe(5);
    // Matching is exact on type and class: the name alone is not enough.
    expect(rcodeOf(await query(s.udpPort, "www.example.com", "TXT"))).toBe(5);
    expect(rcodeOf(await query(s.udpPort, "www.example.com", "A", { qclass: 3 }))).toBe(5);
    expect(rcodeOf(await query(s.udpPort, "example.com", "ANY"))).toBe(5);
  });
});

describe("bad records are reported before anything starts", () => {
  const dir = tempDir("sluice-arbitrary-");
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const config = (args: string): string => `
plugins:
  - tag: zone
    type: arbitrary
    args: ${args}
  - tag: main
    type: sequence
    args:
      - exec: $zone
`;
  const checkError = (yamlText: string): string => {
    const path = join(dir, "check.yaml");
    writeFileSync(path, yamlText);
    try {
      checkConfig(path, createCatalog());
    } catch (err) {
      return (err as Error).message;
    }
    return "no error";
  };
  const startError = async (yamlText: string): Promise<string> => {
    const path = join(dir, "start.yaml");
    writeFileSync(path, yamlText);
    const sink = new Writable({ write: (_c, _e, cb) => cb() });
    try {
      const app = await App.start({ configPath: path, baseDir: dir, stdout: sink });
      await app.stop();
    } catch (err) {
      return (err as Error).message;
    }
    return "no error";
  };

  test("check names the rule index and line of a bad inline record", () => {
    const message = checkError(config(`{ rules: ["a.example. A 192.0.2.1", "$ORIGIN example.\\nmail MX 10"] }`));
    expect(message).toMatch(/rules\[1\]: line 2: MX needs a preference and an exchange/);
  });

  test("check rejects unknown keys, no records, and the quick-setup form", () => {
    expect(checkError(config(`{ rules: ["a. A 192.0.2.1"], ttl: 5 }`))).toMatch(/ttl/);
    expect(checkError(config("{}"))).toMatch(/needs records: give 'rules', 'files' or both/);
    const quick = checkError(`
plugins:
  - tag: main
    type: sequence
    args:
      - exec: arbitrary a. A 192.0.2.1
`);
    expect(quick).toMatch(/'arbitrary' has no quick-setup form/);
  });

  test("a bad zone file fails start with the file and line", async () => {
    writeFileSync(join(dir, "bad.zone"), "ok A 192.0.2.1\n\nbad AAAA 192.0.2.1\n");
    const message = await startError(config(`{ files: [bad.zone] }`));
    expect(message).toMatch(/files\[0\]: bad\.zone, line 3: AAAA needs an IPv6 address, got '192\.0\.2\.1'/);
  });

  test("a missing zone file, and a missing $INCLUDE, are named", async () => {
    expect(await startError(config(`{ files: [nope.zone] }`))).toMatch(/files\[0\]: nope\.zone: cannot read zone file: no such file/);
    expect(await startError(config(`{ rules: ["a. A 192.0.2.1", "$INCLUDE gone.zone"] }`))).toMatch(/rules\[1\]: line 1: cannot read included file 'gone\.zone': no such file/);
  });
});
