// SVCB/HTTPS text form against the RFC 9460 Appendix D test vectors (dns-packet has no SVCB),
// plus the failure cases of D.3 and our own checks.
import { describe, expect, test } from "vitest";
import { QTYPE } from "../../src/dns/constants.js";
import { decodeMessage, encodeMessage } from "../../src/dns/message.js";
import { parseOne, zoneError } from "../helpers/zone.js";

const hex = (s: string): string => s.replace(/\s+/g, "");
const FOO_COM = "03 666f6f 07 6578616d706c65 03 636f6d 00";
const FOO_ORG = "03 666f6f 07 6578616d706c65 03 6f7267 00";

describe("RFC 9460 Appendix D vectors", () => {
  test.each([
    ["D.1 AliasMode", "example.com. HTTPS 0 foo.example.com.", `0000 ${FOO_COM}`],
    ["D.2 root target", "example.com. SVCB 1 .", "0001 00"],
    ["D.2 port", "example.com. SVCB 16 foo.example.com. port=53", `0010 ${FOO_COM} 0003 0002 0035`],
    ["D.2 generic key", "example.com. SVCB 1 foo.example.com. key667=hello", `0001 ${FOO_COM} 029b 0005 68656c6c6f`],
    ["D.2 quoted generic key with an escape", String.raw`example.com. SVCB 1 foo.example.com. key667="hello\210qoo"`, `0001 ${FOO_COM} 029b 0009 68656c6c6f d2 716f6f`],
    [
      "D.2 two IPv6 hints",
      `example.com. SVCB 1 foo.example.com. ( ipv6hint="2001:db8::1,2001:db8::53:1" )`,
      `0001 ${FOO_COM} 0006 0020 20010db8000000000000000000000001 20010db8000000000000000000530001`,
    ],
    [
      "D.2 IPv4-embedded IPv6 hint",
      `example.com. SVCB 1 example.com. ( ipv6hint="2001:db8:122:344::192.0.2.33" )`,
      "0001 07 6578616d706c65 03 636f6d 00 0006 0010 20010db80122034400000000c0000221",
    ],
    [
      "D.2 params sorted, mandatory",
      "example.com. SVCB 16 foo.example.org. ( alpn=h2,h3-19 mandatory=ipv4hint,alpn ipv4hint=192.0.2.1 )",
      `0010 ${FOO_ORG} 0000 0004 0001 0004 0001 0009 02 6832 05 68332d3139 0004 0004 c0000201`,
    ],
    [
      "D.2 alpn with escaped comma and backslash (quoted)",
      String.raw`example.com. SVCB 16 foo.example.org. alpn="f\\\\oo\\,bar,h2"`,
      `0010 ${FOO_ORG} 0001 000c 08 665c6f6f2c626172 02 6832`,
    ],
    [
      "D.2 alpn with escaped comma and backslash (bare)",
      String.raw`example.com. SVCB 16 foo.example.org. alpn=f\\\092oo\092,bar,h2`,
      `0010 ${FOO_ORG} 0001 000c 08 665c6f6f2c626172 02 6832`,
    ],
  ])("%s", (_name, text, wire) => {
    expect(parseOne(text).data.toString("hex")).toBe(hex(wire));
  });
});

describe("the other SvcParams", () => {
  test("no-default-alpn, ech, dohpath and a valueless generic key", () => {
    const ech = Buffer.from("an ECH config").toString("base64");
    const rr = parseOne(`_dns.resolver.arpa. SVCB 1 dns.example. alpn=h2 no-default-alpn ech=${ech} dohpath=/q{?dns} key65000`);
    const target = "03 646e73 07 6578616d706c65 00";
    const echHex = Buffer.from("an ECH config").toString("hex");
    expect(rr.data.toString("hex")).toBe(
      hex(`0001 ${target} 0001 0003 02 6832 0002 0000 0005 ${(echHex.length / 2).toString(16).padStart(4, "0")} ${echHex} 0007 0008 ${Buffer.from("/q{?dns}").toString("hex")} fde8 0000`),
    );
  });

  test("HTTPS and SVCB share a layout; relative targets use the origin", () => {
    const https = parseOne("@ HTTPS 1 svc alpn=h3 port=8443", { origin: "example.com" });
    expect(https.type).toBe(QTYPE.HTTPS);
    expect(https.data).toEqual(parseOne("example.com. SVCB 1 svc.example.com. port=8443 alpn=h3").data);
  });

  test("a keyNNNN spelling of a known key is read with that key's syntax", () => {
    expect(parseOne("x. SVCB 1 . key3=53").data).toEqual(parseOne("x. SVCB 1 . port=53").data);
  });

  test("records survive our strict decoder", () => {
    const rr = parseOne("x. HTTPS 1 . alpn=h2,h3 ipv4hint=192.0.2.1,192.0.2.2 ipv6hint=2001:db8::1");
    const wire = encodeMessage({ id: 1, flags: 0x8000, questions: [], answers: [rr], authorities: [], additionals: [], edns: null });
    expect(decodeMessage(wire).answers[0].data).toEqual(rr.data);
  });
});

describe("failures (RFC 9460 D.3 and more)", () => {
  test.each([
    ["x. SVCB 1 foo. ( key123=abc key123=def )", /SvcParam key123 is given twice/],
    ["x. SVCB 1 foo. mandatory", /SvcParam mandatory needs a value/],
    ["x. SVCB 1 foo. alpn", /SvcParam alpn needs a value/],
    ["x. SVCB 1 foo. port", /SvcParam port needs a value/],
    ["x. SVCB 1 foo. ipv4hint", /SvcParam ipv4hint needs a value/],
    ["x. SVCB 1 foo. ipv6hint", /SvcParam ipv6hint needs a value/],
    ["x. SVCB 1 foo. no-default-alpn=abc", /SvcParam no-default-alpn takes no value/],
    ["x. SVCB 1 foo. mandatory=key123", /lists 'key123' as mandatory but does not set it/],
    ["x. SVCB 1 foo. mandatory=mandatory", /SvcParam mandatory cannot list itself/],
    ["x. SVCB 1 foo. ( mandatory=key123,key123 key123=abc )", /SvcParam mandatory lists 'key123' twice/],
    ["x. SVCB 1 foo. ipv6hint=1.2.3.4", /SvcParam ipv6hint has a bad address '1\.2\.3\.4'/],
    ["x. SVCB 1 foo. ipv4hint=1.2.3.4,,1.2.3.5", /has an empty item in its list/],
    ["x. SVCB 1 foo. port=65536", /SvcParam port must be a port 0-65535/],
    ["x. SVCB 1 foo. ech=***", /SvcParam ech must be base64/],
    ["x. SVCB 1 foo. no-default-alpn", /sets no-default-alpn without alpn/],
    ["x. SVCB 1 foo. frobnicate=1", /has an unknown SvcParam key 'frobnicate'/],
    ["x. SVCB 1 foo. key65535=1", /unknown SvcParam key 'key65535'/],
    ['x. SVCB 1 foo. "alpn=h2"', /SvcParam must be written key=value/],
    ["x. HTTPS 0 foo. alpn=h2", /HTTPS in AliasMode \(priority 0\) takes no SvcParams/],
    ["x. HTTPS 1", /HTTPS needs a priority and a target name/],
    ["x. HTTPS one foo.", /HTTPS priority must be an integer 0-65535/],
    [`x. SVCB 1 foo. alpn=${"a".repeat(256)}`, /protocol id longer than 255 bytes/],
  ])("%s", (text, message) => {
    expect(zoneError(text).message).toMatch(message);
  });
});
