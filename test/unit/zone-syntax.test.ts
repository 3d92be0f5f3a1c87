// Master-file syntax: comments, quoting, parentheses, owners, TTL/class fields, and located errors.
import { describe, expect, test } from "vitest";
import { QCLASS, QTYPE } from "../../src/dns/constants.js";
import { parseZone } from "../../src/dns/zone/index.js";
import { decodedOne, parseOne, txtStrings, viaDnsPacket, zoneError } from "../helpers/zone.js";

const origin = { origin: "example.com" };

describe("lexical structure", () => {
  test("comments, blank lines and comment-only indented lines produce nothing", () => {
    const records = parseZone(
      ["; a full-line comment", "", "www A 192.0.2.1 ; trailing comment", "   ; indented comment", "\t", "ftp A 192.0.2.2;no space before it"].join("\n"),
      origin,
    );
    expect(records.map((r) => r.name)).toEqual(["www.example.com", "ftp.example.com"]);
  });

  test("CRLF line ends are accepted", () => {
    const records = parseZone("www A 192.0.2.1\r\n  AAAA 2001:db8::1\r\n", origin);
    expect(records.map((r) => [r.name, r.type])).toEqual([
      ["www.example.com", QTYPE.A],
      ["www.example.com", QTYPE.AAAA],
    ]);
  });

  test("quoted strings keep blanks, semicolons and parentheses, and decode escapes", () => {
    const a = decodedOne(String.raw`t TXT "a;b (c)" "say \"hi\"" "\065\066C" "back\\slash" ""`, origin);
    expect(txtStrings(a.data)).toEqual(["a;b (c)", 'say "hi"', "ABC", "back\\slash", ""]);
  });

  test("bare words are separate strings and their escapes are decoded too", () => {
    const a = decodedOne(String.raw`t TXT hello\ world two \059semi`, origin);
    expect(txtStrings(a.data)).toEqual(["hello world", "two", ";semi"]);
  });

  test("non-ASCII text in a quoted string is stored as UTF-8", () => {
    const rr = parseOne(`t TXT "héllo ✓"`, origin);
    expect(rr.data.subarray(1).toString("utf8")).toBe("héllo ✓");
    expect(rr.data[0]).toBe(Buffer.byteLength("héllo ✓"));
  });

  test("parentheses join lines, with comments inside", () => {
    const text = [
      "@ IN SOA ns1 hostmaster (",
      "      2024010101 ; serial",
      "      2h         ; refresh",
      "      1h 1w      ; retry, expire",
      "      300 )      ; minimum",
      "www A 192.0.2.1",
    ].join("\n");
    const records = parseZone(text, origin);
    expect(records).toHaveLength(2);
    const [soa] = viaDnsPacket([records[0]]);
    expect(soa.data).toEqual({
      mname: "ns1.example.com",
      rname: "hostmaster.example.com",
      serial: 2024010101,
      refresh: 7200,
      retry: 3600,
      expire: 604800,
      minimum: 300,
    });
  });
});

describe("owners", () => {
  test("a line starting with a blank repeats the previous owner", () => {
    const records = parseZone("www A 192.0.2.1\n  A 192.0.2.2\n\tAAAA 2001:db8::1\nftp A 192.0.2.3", origin);
    expect(records.map((r) => r.name)).toEqual(["www.example.com", "www.example.com", "www.example.com", "ftp.example.com"]);
  });

  test("@ is the origin, relative names get the origin, absolute names are kept", () => {
    const records = parseZone("@ A 192.0.2.1\nwww A 192.0.2.2\nother.net. A 192.0.2.3\na.b A 192.0.2.4\n. TXT root", origin);
    expect(records.map((r) => r.name)).toEqual(["example.com", "www.example.com", "other.net", "a.b.example.com", ""]);
  });

  test("without an origin, relative names are taken from the root", () => {
    expect(parseOne("www.example.org A 192.0.2.1").name).toBe("www.example.org");
  });

  test("case is kept as written and escapes are normalised", () => {
    expect(parseOne("WWW.Example.COM. A 192.0.2.1").name).toBe("WWW.Example.COM");
    expect(parseOne(String.raw`\065bc A 192.0.2.1`, origin).name).toBe("Abc.example.com");
    expect(parseOne(String.raw`a\.b A 192.0.2.1`, origin).name).toBe(String.raw`a\.b.example.com`);
    // An escaped backslash before the dot leaves the dot unescaped: the name is absolute.
    expect(parseOne(String.raw`a\\. A 192.0.2.1`, origin).name).toBe(String.raw`a\\`);
  });

  test("names in record data are completed with the origin too", () => {
    const a = decodedOne("@ MX 10 mail", origin);
    expect(a.data).toEqual({ preference: 10, exchange: "mail.example.com" });
    const b = decodedOne("@ CNAME @", origin);
    expect(b.data).toBe("example.com");
  });
});

describe("TTL and class", () => {
  test("in either order, and each optional", () => {
    const records = parseZone(
      ["a 300 IN A 192.0.2.1", "b IN 300 A 192.0.2.1", "c 300 A 192.0.2.1", "d IN A 192.0.2.1", "e A 192.0.2.1", "f CH 60 TXT x", "g CLASS42 TXT x"].join("\n"),
      origin,
    );
    expect(records.map((r) => [r.ttl, r.class])).toEqual([
      [300, QCLASS.IN],
      [300, QCLASS.IN],
      [300, QCLASS.IN],
      [3600, QCLASS.IN],
      [3600, QCLASS.IN],
      [60, QCLASS.CH],
      [3600, 42],
    ]);
  });

  test("units: s m h d w, combined and in either case", () => {
    const ttls = parseZone(["a 30s A 192.0.2.1", "b 1h30m A 192.0.2.1", "c 2d A 192.0.2.1", "d 1w A 192.0.2.1", "e 1W2D3H4M5S A 192.0.2.1", "f 1h30 A 192.0.2.1"].join("\n"), origin).map(
      (r) => r.ttl,
    );
    expect(ttls).toEqual([30, 5400, 172800, 604800, 604800 + 2 * 86400 + 3 * 3600 + 4 * 60 + 5, 3630]);
  });

  test("a missing TTL is the last $TTL, else 3600; the class defaults to IN", () => {
    const records = parseZone("a A 192.0.2.1\n$TTL 5m\nb A 192.0.2.1\nc 7 A 192.0.2.1\nd A 192.0.2.1", origin);
    expect(records.map((r) => r.ttl)).toEqual([3600, 300, 7, 300]);
    expect(records.every((r) => r.class === QCLASS.IN)).toBe(true);
  });

  test("an owner that looks like a class or a number is still an owner", () => {
    const records = parseZone("in A 192.0.2.1\n300 A 192.0.2.2", origin);
    expect(records.map((r) => [r.name, r.ttl])).toEqual([
      ["in.example.com", 3600],
      ["300.example.com", 3600],
    ]);
  });
});

describe("errors name the line and what was wrong", () => {
  test("the brief's example: an MX without an exchange", () => {
    const err = zoneError("$ORIGIN example.com.\nwww A 192.0.2.1\n\nmail MX 10\n");
    expect(err.line).toBe(4);
    expect(err.message).toBe("line 4: MX needs a preference and an exchange");
  });

  test("the file name comes first when there is one", () => {
    expect(zoneError("www A 192.0.2.300", { source: "zones/a.zone" }).message).toBe("zones/a.zone, line 1: A needs an IPv4 address, got '192.0.2.300'");
  });

  test("a problem inside parentheses names the line of the bad field", () => {
    const err = zoneError("x A 192.0.2.1\n@ SOA ns hm (\n 1\n 2h\n soon\n 1w 300 )", origin);
    expect(err.line).toBe(5);
    expect(err.detail).toMatch(/bad SOA retry 'soon'/);
  });

  test.each([
    ["www FOO 1", 1, /unknown record type 'FOO'/],
    ["www 300 IN", 1, /record has no type/],
    ["www 300 600 A 192.0.2.1", 1, /unknown record type '600' \(the TTL is already given\)/],
    ["www IN CH A 192.0.2.1", 1, /unknown record type 'CH' \(the class is already given\)/],
    ["www 1x A 192.0.2.1", 1, /bad TTL '1x'/],
    ["www 2147483648 A 192.0.2.1", 1, /bad TTL/],
    ["www ANY 1", 1, /ANY is a query-only type/],
    ["www OPT 1", 1, /OPT is a query-only type/],
    ["www CLASS255 A 192.0.2.1", 1, /'CLASS255' is not a class a record can have/],
    ["  A 192.0.2.1", 1, /no previous owner/],
    ["a A 192.0.2.1\nb ( A\n192.0.2.1", 2, /'\(' opened on line 2 is never closed/],
    ["a A 192.0.2.1 )", 1, /'\)' without a matching '\('/],
    ['a TXT "open\nb A 192.0.2.1', 1, /quoted string not closed/],
    ["a TXT abc\\", 1, /escapes nothing/],
    ["a..b A 192.0.2.1", 1, /bad name 'a..b': empty label/],
    [`${"x".repeat(64)} A 192.0.2.1`, 1, /label longer than 63/],
    [`${"abcdefghi.".repeat(26)} A 192.0.2.1`, 1, /longer than 255/],
    ["café A 192.0.2.1", 1, /non-ASCII/],
    ["a A 192.0.2.1 extra", 1, /A has unexpected data 'extra' after its last field/],
    ["$FOO bar", 1, /unknown directive '\$FOO'/],
    [String.raw`a TXT "\300"`, 1, /bad escape '\\300'/],
    [`a TXT "${"x".repeat(256)}"`, 1, /TXT string is 256 bytes; a string holds at most 255/],
  ])("%j → line %i", (text, line, message) => {
    const err = zoneError(text, origin);
    expect(err.line).toBe(line);
    expect(err.message).toMatch(message);
  });

  test("record data larger than 65535 bytes is refused", () => {
    const strings = Array.from({ length: 300 }, () => `"${"y".repeat(250)}"`).join(" ");
    expect(zoneError(`big TXT ${strings}`).message).toMatch(/TXT record data is longer than 65535 bytes/);
  });

  test("a bad origin option is reported", () => {
    expect(() => parseZone("www A 192.0.2.1", { origin: "a..b" })).toThrow(/bad origin/);
  });
});
