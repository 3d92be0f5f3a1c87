// RDATA of every supported type, cross-checked by decoding our records with dns-packet where it
// knows the type, and byte-for-byte where it does not; plus the RFC 3597 generic form.
import { describe, expect, test } from "vitest";
import { QTYPE } from "../../src/dns/constants.js";
import { decodeMessage, encodeMessage } from "../../src/dns/message.js";
import { parseZone } from "../../src/dns/zone/index.js";
import { decodedOne, parseOne, txtStrings, zoneError } from "../helpers/zone.js";

const o = { origin: "example.com" };
const sha1 = "123456789abcdef67890123456789abcdef67890";
const sha256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

describe("types dns-packet decodes: fields match", () => {
  test.each([
    ["www A 192.0.2.1", "A", "192.0.2.1"],
    ["www AAAA 2001:db8::1", "AAAA", "2001:db8::1"],
    ["www AAAA ::ffff:192.0.2.1", "AAAA", "::ffff:c000:201"],
    ["@ NS ns1", "NS", "ns1.example.com"],
    ["www CNAME target.example.net.", "CNAME", "target.example.net"],
    ["1.2.0.192.in-addr.arpa. PTR host", "PTR", "host.example.com"],
    ["old DNAME new.example.", "DNAME", "new.example"],
    ["@ MX 10 mail", "MX", { preference: 10, exchange: "mail.example.com" }],
    ["_sip._tcp SRV 10 60 5060 sip.example.net.", "SRV", { priority: 10, weight: 60, port: 5060, target: "sip.example.net" }],
    ["@ CAA 0 issue \"letsencrypt.org\"", "CAA", { flags: 0, tag: "issue", value: "letsencrypt.org", issuerCritical: false }],
    ["@ CAA 128 iodef \"mailto:sec@example.com\"", "CAA", { flags: 128, tag: "iodef", value: "mailto:sec@example.com", issuerCritical: true }],
    ["@ CAA 0 issuewild ;", "CAA", undefined],
    [
      "@ NAPTR 100 10 \"S\" \"SIP+D2U\" \"!^.*$!sip:info@example.com!\" _sip._udp",
      "NAPTR",
      { order: 100, preference: 10, flags: "S", services: "SIP+D2U", regexp: "!^.*$!sip:info@example.com!", replacement: "_sip._udp.example.com" },
    ],
    ["host HINFO \"x86-64\" Linux", "HINFO", { cpu: "x86-64", os: "Linux" }],
  ])("%s", (text, type, data) => {
    if (data === undefined) {
      expect(zoneError(text, o).message).toMatch(/CAA needs flags, a tag and a value/);
      return;
    }
    const a = decodedOne(text, o);
    expect(a.type).toBe(type);
    expect(a.data).toEqual(data);
  });

  test("TXT and SPF: several strings, quoted and bare", () => {
    const txt = decodedOne(`@ TXT "v=spf1 -all" second "" "${"z".repeat(255)}"`, o);
    expect(txtStrings(txt.data)).toEqual(["v=spf1 -all", "second", "", "z".repeat(255)]);
    // dns-packet has no SPF; its data is the same as TXT's.
    const spf = parseOne(`@ SPF "v=spf1 -all" second`, o);
    expect(spf.type).toBe(QTYPE.SPF);
    expect(spf.data).toEqual(parseOne(`@ TXT "v=spf1 -all" second`, o).data);
  });

  test("SOA with units in its timers", () => {
    const a = decodedOne("@ SOA ns1.example.com. hostmaster.example.com. 2024010101 1h 15m 2w 5m", o);
    expect(a.data).toEqual({ mname: "ns1.example.com", rname: "hostmaster.example.com", serial: 2024010101, refresh: 3600, retry: 900, expire: 1209600, minimum: 300 });
  });

  test("SSHFP", () => {
    const a = decodedOne(`host SSHFP 4 2 ${sha256}`, o);
    expect(a.data).toEqual({ algorithm: 4, hash: 2, fingerprint: sha256.toUpperCase() });
    const b = decodedOne(`host SSHFP 1 1 ${sha1.slice(0, 20)} ${sha1.slice(20)}`, o);
    expect(b.data).toEqual({ algorithm: 1, hash: 1, fingerprint: sha1.toUpperCase() });
  });

  test("TLSA", () => {
    const a = decodedOne(`_443._tcp.www TLSA 3 1 1 ( ${sha256.slice(0, 32)}\n ${sha256.slice(32)} )`, o);
    expect(a.data).toEqual({ usage: 3, selector: 1, matchingType: 1, certificate: Buffer.from(sha256, "hex") });
  });

  test("DS, with a numeric or mnemonic algorithm and a digest in pieces", () => {
    const a = decodedOne(`@ DS 60485 8 2 ${sha256.slice(0, 10)} ${sha256.slice(10)}`, o);
    expect(a.data).toEqual({ keyTag: 60485, algorithm: 8, digestType: 2, digest: Buffer.from(sha256, "hex") });
    const b = decodedOne(`@ DS 60485 RSASHA256 2 ${sha256}`, o);
    expect(b.data).toEqual(a.data);
  });

  test("DNSKEY", () => {
    const key = Buffer.from("a key of some bytes").toString("base64");
    const a = decodedOne(`@ DNSKEY 257 3 ECDSAP256SHA256 ( ${key.slice(0, 8)} ${key.slice(8)} )`, o);
    expect(a.data).toEqual({ flags: 257, algorithm: 13, key: Buffer.from("a key of some bytes") });
  });
});

describe("types dns-packet does not decode: exact bytes", () => {
  test("URI", () => {
    const rr = parseOne(`_ftp._tcp URI 10 1 "ftp://ftp.example.com/public"`, o);
    expect(rr.type).toBe(QTYPE.URI);
    expect(rr.data).toEqual(Buffer.concat([Buffer.from([0, 10, 0, 1]), Buffer.from("ftp://ftp.example.com/public")]));
  });

  test("CDS and SMIMEA share the DS and TLSA layouts", () => {
    expect(parseOne(`@ CDS 1 8 2 ${sha256}`, o).data).toEqual(parseOne(`@ DS 1 8 2 ${sha256}`, o).data);
    expect(parseOne(`x SMIMEA 3 1 1 ${sha256}`, o).data).toEqual(parseOne(`x TLSA 3 1 1 ${sha256}`, o).data);
  });

  test("name-bearing records survive our strict decoder with names intact", () => {
    const records = parseZone("@ MX 10 mail\n@ SRV 1 2 3 t\n@ NS ns\n@ SOA a b 1 2 3 4 5\n@ AFSDB 1 afs\n@ KX 5 kx", o);
    const wire = encodeMessage({ id: 1, flags: 0x8000, questions: [], answers: records, authorities: [], additionals: [], edns: null });
    expect(decodeMessage(wire).answers.map((r) => r.data)).toEqual(records.map((r) => r.data));
  });
});

describe("RFC 3597 generic form", () => {
  test("for a known type it gives the same record as the text form", () => {
    expect(parseOne(String.raw`www A \# 4 C0000201`, o).data).toEqual(parseOne("www A 192.0.2.1", o).data);
    expect(parseOne(String.raw`www TYPE1 \# 4 c0 00 02 01`, o)).toEqual(parseOne("www A 192.0.2.1", o));
    const mx = parseOne(String.raw`@ MX \# 8 000a 046d61696c 00`, o);
    expect(mx.data).toEqual(parseOne("@ MX 10 mail.", o).data);
  });

  test("for unknown and text-less types", () => {
    const rr = parseOne(String.raw`x TYPE65280 \# 3 abcdef`, o);
    expect([rr.type, rr.data.toString("hex")]).toEqual([65280, "abcdef"]);
    expect(parseOne(String.raw`x NULL \# 0`, o).data.length).toBe(0);
    expect(parseOne(String.raw`x LOC \# 2 0102`, o).type).toBe(QTYPE.LOC);
  });

  test.each([
    [String.raw`x TYPE65280 \# 3 abcd`, /\\# length 3 does not match the 2 bytes of data given/],
    [String.raw`x TYPE65280 \# 2 abc`, /even number of hex digits/],
    [String.raw`x TYPE65280 \# 2 zz11`, /even number of hex digits/],
    [String.raw`x TYPE65280 \#`, /\\# needs a length and hex data/],
    [String.raw`x TYPE65280 \# 70000 00`, /\\# length must be an integer 0-65535/],
    [String.raw`x A \# 3 010203`, /not a valid A: an A record has 4 bytes/],
    [String.raw`x AAAA \# 4 01020304`, /not a valid AAAA/],
    [String.raw`x MX \# 4 000ac00c`, /not a valid MX: a name uses compression/],
    [String.raw`x CNAME \# 3 016100ff`, /length 3 does not match/],
    [String.raw`x CNAME \# 4 016100ff`, /not a valid CNAME: it is longer than the type allows/],
    [String.raw`x SOA \# 3 000000`, /not a valid SOA: it is shorter than the type requires/],
    ["x LOC 52 22 23.000 N", /LOC has no text form here; write its data as \\# <length> <hex>/],
  ])("%s is refused", (text, message) => {
    expect(zoneError(text, o).message).toMatch(message);
  });
});

describe("field errors say which field and why", () => {
  test.each([
    ["x A 1.2.3", /A needs an IPv4 address, got '1\.2\.3'/],
    ["x A 01.2.3.4", /A needs an IPv4 address/],
    ["x A", /^line 1: A needs an IPv4 address$/],
    ["x AAAA 192.0.2.1", /AAAA needs an IPv6 address, got '192\.0\.2\.1'/],
    ["x AAAA 2001:db8:::1", /AAAA needs an IPv6 address/],
    ["x MX mail", /MX preference must be an integer 0-65535, got 'mail'/],
    ["x MX 70000 mail", /MX preference must be an integer 0-65535, got '70000'/],
    ["x MX -1 mail", /MX preference must be an integer/],
    ["x NS", /NS needs a name server/],
    ["x CNAME a b", /CNAME has unexpected data 'b'/],
    ["x SRV 1 2 3", /SRV needs a priority, a weight, a port and a target/],
    ["x SOA a b 1 2 3 4", /SOA needs mname, rname, serial, refresh, retry, expire and minimum/],
    ["x SOA a b 4294967296 2 3 4 5", /SOA serial must be an integer 0-4294967295/],
    ["x TXT", /TXT needs at least one string/],
    ["x CAA 0 bad-tag v", /CAA tag must be 1-15 letters or digits, got 'bad-tag'/],
    ["x CAA 256 issue v", /CAA flags must be an integer 0-255/],
    ["x NAPTR 1 2 S SIP", /NAPTR needs order, preference, flags, services, regexp and replacement/],
    ["x SSHFP 1 1 abc", /SSHFP fingerprint must be an even number of hex digits/],
    ["x SSHFP 1 1", /SSHFP needs an algorithm, a fingerprint type and a hex fingerprint/],
    ["x TLSA 3 1 1 xyz0", /TLSA certificate data must be an even number of hex digits/],
    ["x DS 1 NOSUCHALG 2 00", /DS algorithm must be an integer 0-255, got 'NOSUCHALG'/],
    ["x DNSKEY 257 3 8 not*base64", /DNSKEY key is not valid base64/],
    ["x HINFO one", /HINFO needs a CPU and an OS string/],
    ['x URI 1 1 ""', /URI target must not be empty/],
  ])("%s", (text, message) => {
    expect(zoneError(text, o).message).toMatch(message);
  });
});
