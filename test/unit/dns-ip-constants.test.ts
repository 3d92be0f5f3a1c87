import { describe, expect, test } from "vitest";
import { className, opcodeName, parseClass, parseRcode, parseType, QTYPE, RCODE, rcodeName, typeName } from "../../src/dns/constants.js";
import { formatIP, maskIP, parseIP, parseIPv4, parseIPv6, unmapIPv4 } from "../../src/dns/ip.js";

const hex = (b: Uint8Array | null): string | null => (b ? Buffer.from(b).toString("hex") : null);

describe("parseIPv4", () => {
  test("accepts dotted quads", () => {
    expect([...parseIPv4("192.0.2.255")!]).toEqual([192, 0, 2, 255]);
    expect([...parseIPv4("0.0.0.0")!]).toEqual([0, 0, 0, 0]);
  });

  test("rejects leading zeros, out-of-range parts, shorthand and junk", () => {
    for (const bad of ["01.2.3.4", "1.2.3.04", "1.2.3.00", "256.1.1.1", "1.2.3", "1.2.3.4.5", "1.2.3.", "1..2.3", "127.1", "0x7f.0.0.1", " 1.2.3.4", "1.2.3.4 ", "1.2.3.-4", "+1.2.3.4", "1.2.3.1e1", ""]) {
      expect(parseIPv4(bad), bad).toBeNull();
      expect(parseIP(bad), bad).toBeNull();
    }
  });
});

describe("parseIPv6", () => {
  test("full, compressed and embedded-IPv4 forms", () => {
    expect(hex(parseIPv6("2001:db8:0:0:0:0:0:1"))).toBe("20010db8000000000000000000000001");
    expect(hex(parseIPv6("2001:DB8::1"))).toBe("20010db8000000000000000000000001");
    expect(hex(parseIPv6("::"))).toBe("0".repeat(32));
    expect(hex(parseIPv6("::1"))).toBe("0".repeat(31) + "1");
    expect(hex(parseIPv6("1::"))).toBe("0001" + "0".repeat(28));
    expect(hex(parseIPv6("::ffff:192.0.2.1"))).toBe("00000000000000000000ffffc0000201");
    expect(hex(parseIPv6("1:2:3:4:5:6:1.2.3.4"))).toBe("00010002000300040005000601020304");
    expect(hex(parseIPv6("::1.2.3.4"))).toBe("00000000000000000000000001020304");
    expect(hex(parseIPv6("0001:002:03:4::"))).toBe("0001000200030004" + "0".repeat(16));
    expect(hex(parseIP("fe80::1"))).toBe("fe80" + "0".repeat(27) + "1");
  });

  test("rejects malformed text", () => {
    const bad = [
      ":", ":::", "1:::2", "1::2::3", ":1:2:3:4:5:6:7", "1:2:3:4:5:6:7:", "1:2:3:4:5:6:7", "1:2:3:4:5:6:7:8:9",
      "1::2:3:4:5:6:7:8", "12345::", "g::1", "::1.2.3", "::1.2.3.04", "::256.0.0.1", "1.2.3.4::", "::1.2.3.4:1",
      "1:2:3:4:5:6:7:1.2.3.4", "fe80::1%eth0", "[::1]", " ::1", "",
    ];
    for (const text of bad) expect(parseIPv6(text), text).toBeNull();
  });
});

describe("formatIP (RFC 5952)", () => {
  const fmt = (text: string): string => formatIP(parseIP(text)!);

  test("lower case, no leading zeros, the longest zero run compressed (first on ties), single zeros kept", () => {
    expect(fmt("2001:0DB8:0000:0000:0000:0000:0000:0001")).toBe("2001:db8::1");
    expect(fmt("2001:db8:0:0:1:0:0:1")).toBe("2001:db8::1:0:0:1");
    expect(fmt("2001:0:0:1:0:0:0:1")).toBe("2001:0:0:1::1");
    expect(fmt("2001:db8:0:1:1:1:1:1")).toBe("2001:db8:0:1:1:1:1:1");
    expect(fmt("1:0:0:0:0:0:0:0")).toBe("1::");
    expect(fmt("0:0:0:0:0:0:0:0")).toBe("::");
    expect(fmt("0:0:0:0:0:0:0:1")).toBe("::1");
    expect(fmt("1:2:3:4:5:6:7:8")).toBe("1:2:3:4:5:6:7:8");
    expect(fmt("0:1:0:1:0:1:0:1")).toBe("0:1:0:1:0:1:0:1");
  });

  test("IPv4 and IPv4-mapped addresses keep the dotted quad", () => {
    expect(fmt("192.0.2.1")).toBe("192.0.2.1");
    expect(fmt("::ffff:192.0.2.1")).toBe("::ffff:192.0.2.1");
    expect(fmt("::FFFF:c000:0201")).toBe("::ffff:192.0.2.1");
    // Only the mapped prefix gets the mixed form.
    expect(fmt("::1.2.3.4")).toBe("::102:304");
    expect(fmt("64:ff9b::1.2.3.4")).toBe("64:ff9b::102:304");
  });

  test("format → parse round-trips for random addresses with zero runs", () => {
    let seed = 7;
    const next = (): number => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648;
    for (let i = 0; i < 500; i++) {
      const bytes = new Uint8Array(16);
      for (let j = 0; j < 16; j += 2) if (next() < 0.5) bytes[j] = Math.floor(next() * 256);
      expect(hex(parseIP(formatIP(bytes)))).toBe(hex(bytes));
    }
  });
});

describe("maskIP and unmapIPv4", () => {
  test("maskIP keeps the prefix bits only", () => {
    expect([...maskIP(parseIP("192.168.255.255")!, 20)]).toEqual([192, 168, 240, 0]);
    expect([...maskIP(parseIP("1.2.3.4")!, 0)]).toEqual([0, 0, 0, 0]);
    expect([...maskIP(parseIP("1.2.3.4")!, 32)]).toEqual([1, 2, 3, 4]);
    expect(formatIP(maskIP(parseIP("2001:db8:abcd:1234::1")!, 56))).toBe("2001:db8:abcd:1200::");
  });

  test("unmapIPv4 turns ::ffff:a.b.c.d into 4 bytes and leaves everything else", () => {
    expect([...unmapIPv4(parseIP("::ffff:10.1.2.3")!)]).toEqual([10, 1, 2, 3]);
    const v6 = parseIP("::1.2.3.4")!;
    expect(unmapIPv4(v6)).toBe(v6);
    const v4 = parseIP("10.0.0.1")!;
    expect(unmapIPv4(v4)).toBe(v4);
  });
});

describe("constants", () => {
  test("parseType: mnemonics in any case, numbers, TYPEnnn; junk is undefined", () => {
    expect(parseType("A")).toBe(1);
    expect(parseType("aaaa")).toBe(28);
    expect(parseType(" https ")).toBe(65);
    expect(parseType("nsap-ptr")).toBe(23);
    expect(parseType("TYPE65")).toBe(65);
    expect(parseType("type65534")).toBe(65534);
    expect(parseType("28")).toBe(28);
    expect(parseType("65535")).toBe(65535);
    for (const bad of ["", "TYPE", "TYPE65536", "65536", "-1", "1.5", "1e3", "TYPE-1", "CLASS1", "BOGUS", "A A"]) {
      expect(parseType(bad), bad).toBeUndefined();
    }
  });

  test("parseRcode: names, numbers and RCODEnnn up to 12 bits", () => {
    expect(parseRcode("NXDOMAIN")).toBe(3);
    expect(parseRcode("refused")).toBe(5);
    expect(parseRcode("3")).toBe(3);
    expect(parseRcode("BADVERS")).toBe(16);
    expect(parseRcode("BADSIG")).toBe(16);
    expect(parseRcode("RCODE4095")).toBe(4095);
    expect(parseRcode("4096")).toBeUndefined();
    expect(parseRcode("TYPE3")).toBeUndefined();
    expect(parseRcode("")).toBeUndefined();
  });

  test("names for numbers, with RFC 3597 forms for unknown ones", () => {
    expect(typeName(QTYPE.AAAA)).toBe("AAAA");
    expect(typeName(23)).toBe("NSAP-PTR");
    expect(typeName(65280)).toBe("TYPE65280");
    expect(parseType(typeName(65280))).toBe(65280);
    expect(rcodeName(RCODE.BADVERS)).toBe("BADVERS");
    expect(rcodeName(12)).toBe("RCODE12");
    expect(className(1)).toBe("IN");
    expect(className(300)).toBe("CLASS300");
    expect(parseClass("CLASS300")).toBe(300);
    expect(parseClass("ch")).toBe(3);
    expect(opcodeName(5)).toBe("UPDATE");
    expect(opcodeName(9)).toBe("OPCODE9");
    // Every known mnemonic maps back to itself.
    for (const [name, value] of Object.entries(QTYPE)) expect(parseType(typeName(value)), name).toBe(value);
  });
});
