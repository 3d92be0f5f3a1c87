import { describe, expect, test } from "vitest";
import { parseIP } from "../../src/dns/ip.js";
import { IpPrefixSet, IpPrefixSetBuilder, ipv4Value, parseIpRule } from "../../src/engine/rules/ip.js";
import { RuleSyntaxError } from "../../src/engine/rules/domain.js";

function set(...rules: string[]): IpPrefixSet {
  const b = new IpPrefixSetBuilder();
  for (const r of rules) b.add(r);
  return b.build();
}
const has = (s: IpPrefixSet, ip: string): boolean => s.contains(parseIP(ip) as Uint8Array);

describe("IPv4", () => {
  test("a single address is a /32", () => {
    const s = set("192.0.2.7");
    expect(has(s, "192.0.2.7")).toBe(true);
    expect(has(s, "192.0.2.6")).toBe(false);
    expect(has(s, "192.0.2.8")).toBe(false);
    expect(has(set("192.0.2.7/32"), "192.0.2.7")).toBe(true);
  });

  test("CIDR edges: first and last address in, neighbours out", () => {
    const s = set("10.1.2.0/23");
    expect(has(s, "10.1.2.0")).toBe(true);
    expect(has(s, "10.1.3.255")).toBe(true);
    expect(has(s, "10.1.1.255")).toBe(false);
    expect(has(s, "10.1.4.0")).toBe(false);
  });

  test("/0 holds every IPv4 address and no IPv6 one", () => {
    const s = set("0.0.0.0/0");
    expect(has(s, "0.0.0.0")).toBe(true);
    expect(has(s, "255.255.255.255")).toBe(true);
    expect(has(s, "2001:db8::1")).toBe(false);
  });

  test("host bits after the prefix are ignored", () => {
    const s = set("10.200.3.4/8");
    expect(has(s, "10.0.0.1")).toBe(true);
    expect(has(s, "11.0.0.0")).toBe(false);
  });

  test("the top of the address space", () => {
    const s = set("255.255.255.255", "255.255.255.0/31");
    expect(has(s, "255.255.255.255")).toBe(true);
    expect(has(s, "255.255.255.1")).toBe(true);
    expect(has(s, "255.255.255.2")).toBe(false);
  });
});

describe("IPv6", () => {
  test("/128 and prefix edges", () => {
    const s = set("2001:db8::1", "2001:db8:1::/48");
    expect(has(s, "2001:db8::1")).toBe(true);
    expect(has(s, "2001:db8::2")).toBe(false);
    expect(has(s, "2001:db8:1::")).toBe(true);
    expect(has(s, "2001:db8:1:ffff:ffff:ffff:ffff:ffff")).toBe(true);
    expect(has(s, "2001:db8:0:ffff:ffff:ffff:ffff:ffff")).toBe(false);
    expect(has(s, "2001:db8:2::")).toBe(false);
    expect(has(set("2001:db8::1/128"), "2001:db8::1")).toBe(true);
  });

  test("a prefix ending inside a 32-bit word", () => {
    const s = set("2001:db8:ab00::/40");
    expect(has(s, "2001:db8:abff:ffff::")).toBe(true);
    expect(has(s, "2001:db8:ac00::")).toBe(false);
    expect(has(s, "2001:db8:aaff:ffff:ffff:ffff:ffff:ffff")).toBe(false);
  });

  test("::/0 holds every IPv6 address (and so every IPv4-mapped one)", () => {
    const s = set("::/0");
    expect(has(s, "::")).toBe(true);
    expect(has(s, "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff")).toBe(true);
    expect(has(s, "1.2.3.4")).toBe(true);
    expect(has(set("2000::/3"), "1.2.3.4")).toBe(false);
  });
});

describe("IPv4-mapped IPv6", () => {
  test("a mapped address matches IPv4 rules", () => {
    const s = set("198.51.100.0/24");
    expect(has(s, "::ffff:198.51.100.9")).toBe(true);
    expect(has(s, "::ffff:198.51.101.9")).toBe(false);
  });

  test("a mapped rule is an IPv4 rule", () => {
    const s = set("::ffff:198.51.100.0/120");
    expect(has(s, "198.51.100.200")).toBe(true);
    expect(has(s, "198.51.101.0")).toBe(false);
  });

  test("containsText reads the forms Node reports for peers", () => {
    const s = set("127.0.0.0/8", "fd00::/8");
    expect(s.containsText("127.0.0.1")).toBe(true);
    expect(s.containsText("::ffff:127.0.0.1")).toBe(true);
    expect(s.containsText("::FFFF:127.0.0.1")).toBe(true);
    expect(s.containsText("fd12::1")).toBe(true);
    expect(s.containsText("128.0.0.1")).toBe(false);
    expect(s.containsText("fe80::1")).toBe(false);
    expect(s.containsText("not an ip")).toBe(false);
  });
});

test("overlapping and adjacent prefixes are merged", () => {
  const s = set("10.0.0.0/25", "10.0.0.128/25", "10.0.0.7", "10.0.1.0/24", "2001:db8::/33", "2001:db8:8000::/33");
  expect(s.ranges).toBe(2);
  expect(s.size).toBe(6);
  expect(has(s, "10.0.1.255")).toBe(true);
  expect(has(s, "10.0.2.0")).toBe(false);
  expect(has(s, "2001:db8:ffff::1")).toBe(true);
});

test("an empty set holds nothing; odd lengths never match", () => {
  expect(IpPrefixSet.empty().contains(new Uint8Array(4))).toBe(false);
  expect(set("0.0.0.0/0").contains(new Uint8Array(5))).toBe(false);
});

test("bad rules are rejected with the rule in the message", () => {
  for (const [rule, msg] of [
    ["1.2.3.4/33", /'1.2.3.4\/33' has a bad prefix length \(0-32 for IPv4\)/],
    ["::1/129", /bad prefix length \(0-128 for IPv6\)/],
    ["1.2.3.4/", /bad prefix length/],
    ["1.2.3.4/-1", /bad prefix length/],
    ["1.2.3", /'1.2.3' is not an IP address or CIDR/],
    ["01.2.3.4", /not an IP address/],
    ["example.com", /not an IP address/],
    ["fe80::1%eth0", /not an IP address/],
  ] as const) {
    expect(() => parseIpRule(rule)).toThrow(RuleSyntaxError);
    expect(() => new IpPrefixSetBuilder().add(rule)).toThrow(msg);
  }
});

test("ipv4Value parses dotted quads without allocating and rejects anything else", () => {
  expect(ipv4Value("0.0.0.0")).toBe(0);
  expect(ipv4Value("255.255.255.255")).toBe(0xffffffff);
  expect(ipv4Value("10.0.0.1")).toBe(0x0a000001);
  for (const bad of ["", "1.2.3", "1.2.3.4.5", "256.0.0.1", "1..2.3", "1.2.3.", "::1", "a.b.c.d"]) expect(ipv4Value(bad)).toBe(-1);
});

test("binary search agrees with a naive scan on random prefixes", () => {
  let seed = 99;
  const rand = (): number => {
    seed = (seed * 1103515245 + 12345) & 0x7fffffff;
    return seed;
  };
  const toIp = (v: number): string => `${v >>> 24}.${(v >>> 16) & 255}.${(v >>> 8) & 255}.${v & 255}`;
  const prefixes: [number, number][] = [];
  const b = new IpPrefixSetBuilder();
  for (let i = 0; i < 300; i++) {
    const bits = 8 + (rand() % 25);
    const mask = (0xffffffff << (32 - bits)) >>> 0;
    const base = ((rand() * 2) & mask) >>> 0;
    prefixes.push([base, mask]);
    b.add(`${toIp(base)}/${bits}`);
  }
  const s = b.build();
  for (let i = 0; i < 3000; i++) {
    // Half the probes sit right at a prefix edge, where off-by-one errors live.
    const [base, mask] = prefixes[rand() % prefixes.length];
    const probe = i % 2 === 0 ? (rand() * 2) >>> 0 : ((base | (~mask >>> 0)) + (i % 4 === 1 ? 1 : 0)) >>> 0;
    const naive = prefixes.some(([p, m]) => ((probe & m) >>> 0) === p);
    expect(s.containsV4(probe), toIp(probe)).toBe(naive);
  }
});

test("IPv6 binary search agrees with a naive scan on random prefixes", () => {
  let seed = 7;
  const word = (): bigint => {
    seed = (seed * 1103515245 + 12345) & 0x7fffffff;
    return BigInt(seed & 0xffff);
  };
  // A narrow first word keeps prefixes close together so they overlap and nest.
  const rand128 = (): bigint => {
    let v = 0x2001n;
    for (let i = 1; i < 8; i++) v = (v << 16n) | (i < 3 ? word() & 0x3n : word());
    return v;
  };
  const ALL = (1n << 128n) - 1n;
  const toBytes = (v: bigint): Uint8Array => Uint8Array.from({ length: 16 }, (_, i) => Number((v >> BigInt(120 - i * 8)) & 0xffn));
  const text = (v: bigint): string => (v.toString(16).padStart(32, "0").match(/.{4}/g) as string[]).join(":");
  const prefixes: [bigint, bigint][] = [];
  const b = new IpPrefixSetBuilder();
  for (let i = 0; i < 200; i++) {
    const bits = 16 + Number(word() % 113n);
    const mask = (ALL << BigInt(128 - bits)) & ALL;
    const base = rand128() & mask;
    prefixes.push([base, mask]);
    b.add(`${text(base)}/${bits}`);
  }
  const s = b.build();
  for (let i = 0; i < 2000; i++) {
    const [base, mask] = prefixes[Number(word()) % prefixes.length];
    const last = base | (ALL ^ mask);
    const probe = i % 3 === 0 ? rand128() : i % 3 === 1 ? last : (last + 1n) & ALL;
    const naive = prefixes.some(([p, m]) => (probe & m) === p);
    expect(s.contains(toBytes(probe)), text(probe)).toBe(naive);
  }
});
