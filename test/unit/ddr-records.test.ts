// The SVCB records `ddr` makes of a configuration's listeners, against the bytes the zone parser
// (RFC 9460 text form) makes of the same records: address hints only for a listener bound to one
// address, IPv6 hints, priorities in order, the target written uncompressed with its trailing dot.
import { expect, test } from "vitest";
import { ddrBlock } from "../../src/plugins/executors/ddr.js";
import { parseOne } from "../helpers/zone.js";

/** Splits a block's records (owner pointer, type, class, TTL, length, data) into their data, as hex. */
function datas(bytes: Buffer): string[] {
  const out: string[] = [];
  for (let p = 0; p < bytes.length; ) {
    expect(bytes.readUInt16BE(p)).toBe(0xc00c);
    expect(bytes.readUInt16BE(p + 2)).toBe(64);
    expect(bytes.readUInt16BE(p + 4)).toBe(1);
    expect(bytes.readUInt32BE(p + 6)).toBe(120);
    const len = bytes.readUInt16BE(p + 10);
    out.push(bytes.subarray(p + 12, p + 12 + len).toString("hex"));
    p += 12 + len;
  }
  return out;
}

const zone = (text: string): string => parseOne(`_dns.resolver.arpa. 120 IN SVCB ${text}`).data.toString("hex");

test("every address: no hint; one address: ipv4hint or ipv6hint; priorities 1, 2, 3, 4", () => {
  const block = ddrBlock(
    [
      { tag: "a", protocol: "dot", address: "0.0.0.0", port: 853 },
      { tag: "b", protocol: "doh", address: "::", port: 443, path: "/dns-query" },
      { tag: "c", protocol: "doh", address: "2001:db8::53", port: 8443, path: "/family" },
      { tag: "d", protocol: "dot", address: "192.0.2.53", port: 8853 },
    ],
    "resolver.example.",
    120,
  );
  expect(block.count).toBe(4);
  expect(datas(block.bytes)).toEqual([
    zone("1 resolver.example. alpn=dot port=853"),
    zone("2 resolver.example. alpn=h2 port=443 dohpath=/dns-query{?dns}"),
    zone("3 resolver.example. alpn=h2 port=8443 ipv6hint=2001:db8::53 dohpath=/family{?dns}"),
    zone("4 resolver.example. alpn=dot port=8853 ipv4hint=192.0.2.53"),
  ]);
});

test("a target without its trailing dot is the same name; no listener: no record", () => {
  expect(datas(ddrBlock([{ tag: "a", protocol: "dot", address: "0.0.0.0", port: 853 }], "Resolver.Example", 120).bytes)).toEqual([zone("1 Resolver.Example. alpn=dot port=853")]);
  expect(ddrBlock([], "resolver.example", 120).count).toBe(0);
});
