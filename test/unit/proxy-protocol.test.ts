// The PROXY v2 parser: addresses, LOCAL, TLVs skipped, every length checked, nothing thrown on junk.
import { describe, expect, test } from "vitest";
import { IpPrefixSetBuilder } from "../../src/engine/rules/ip.js";
import { INCOMPLETE, INVALID, MAX_PROXY_HEADER, parseHeader, ProxyPolicy, type ProxySource } from "../../src/plugins/servers/proxy-protocol.js";
import { proxyHeader, tlv } from "../helpers/proxy-header.js";

const out = (): ProxySource => ({ address: "", port: 0, local: true });

function policy(trusted: string[]): ProxyPolicy {
  const b = new IpPrefixSetBuilder();
  for (const t of trusted) b.add(t);
  return new ProxyPolicy(b.build(), { accepted: { value: 0 }, untrusted: { value: 0 }, invalid: { value: 0 } });
}

describe("parseHeader", () => {
  test("IPv4 and IPv6 sources, with the header length", () => {
    const o = out();
    const h4 = proxyHeader({ source: "198.51.100.9", sourcePort: 5353 });
    expect(parseHeader(h4, o)).toBe(28);
    expect(o).toEqual({ address: "198.51.100.9", port: 5353, local: false });
    const h6 = proxyHeader({ source: "2001:db8::7", sourcePort: 1 });
    expect(parseHeader(h6, o)).toBe(52);
    expect(o).toEqual({ address: "2001:db8::7", port: 1, local: false });
  });

  test("LOCAL names no client; TLVs are skipped", () => {
    const o = out();
    expect(parseHeader(proxyHeader({ command: "local" }), o)).toBe(28);
    expect(o.local).toBe(true);
    const withTlvs = proxyHeader({ tlvs: Buffer.concat([tlv(0x04, Buffer.alloc(0)), tlv(0xe0, Buffer.from("abc"))]) });
    expect(parseHeader(Buffer.concat([withTlvs, Buffer.from("dns")]), o)).toBe(28 + 3 + 6);
    expect(o.address).toBe("192.0.2.7");
  });

  test("short input is incomplete; bad version, command, family, lengths and TLVs are invalid", () => {
    const h = proxyHeader();
    for (let n = 12; n < h.length; n++) expect(parseHeader(h.subarray(0, n), out())).toBe(INCOMPLETE);
    expect(parseHeader(proxyHeader({ version: 1 }), out())).toBe(INVALID);
    const badCmd = Buffer.from(h);
    badCmd[12] = 0x22;
    expect(parseHeader(badCmd, out())).toBe(INVALID);
    const badFamily = Buffer.from(h);
    badFamily[13] = 0x51;
    expect(parseHeader(badFamily, out())).toBe(INVALID);
    const tooShortForV4 = Buffer.from(h);
    tooShortForV4.writeUInt16BE(8, 14);
    expect(parseHeader(tooShortForV4, out())).toBe(INVALID);
    const tooLong = Buffer.from(h);
    tooLong.writeUInt16BE(MAX_PROXY_HEADER, 14);
    expect(parseHeader(tooLong, out())).toBe(INVALID);
    // A TLV whose length runs past the header.
    const lying = proxyHeader({ tlvs: Buffer.from([0xe0, 0x00, 0x09, 1, 2]) });
    expect(parseHeader(lying, out())).toBe(INVALID);
    const cutTlv = proxyHeader({ tlvs: Buffer.from([0xe0, 0x00]) });
    expect(parseHeader(cutTlv, out())).toBe(INVALID);
  });

  test("random bytes after the signature never throw and never claim more than they hold", () => {
    const h = proxyHeader();
    let seed = 7;
    const rnd = (): number => (seed = (seed * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff;
    for (let i = 0; i < 20_000; i++) {
      const junk = Buffer.alloc(Math.floor(rnd() * 80));
      for (let j = 0; j < junk.length; j++) junk[j] = Math.floor(rnd() * 256);
      const data = Buffer.concat([h.subarray(0, 12), junk]);
      if (rnd() < 0.5) data[12] = 0x21;
      const n = parseHeader(data, out());
      expect(n === INCOMPLETE || n === INVALID || (n >= 16 && n <= data.length)).toBe(true);
    }
  });
});

describe("ProxyPolicy.unwrap (one datagram)", () => {
  const query = Buffer.from([0x12, 0x34, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0]);

  test("a trusted peer's header names the client; the message follows it", () => {
    const p = policy(["127.0.0.2/32"]);
    const data = Buffer.concat([proxyHeader({ source: "203.0.113.5", sourcePort: 999 }), query]);
    expect(p.unwrap(data, "127.0.0.2", 4000)).toBe(28);
    expect(p.client).toMatchObject({ address: "203.0.113.5", port: 999 });
    expect(p.stats.accepted.value).toBe(1);
  });

  test("no header: the peer is the client, trusted or not", () => {
    const p = policy(["127.0.0.2"]);
    expect(p.unwrap(query, "127.0.0.2", 4000)).toBe(0);
    expect(p.client).toMatchObject({ address: "127.0.0.2", port: 4000 });
    expect(p.unwrap(query, "10.1.1.1", 5)).toBe(0);
    expect(p.client).toMatchObject({ address: "10.1.1.1", port: 5 });
  });

  test("a header from an untrusted peer, or a broken one, drops the datagram and is counted", () => {
    const p = policy(["127.0.0.2"]);
    expect(p.unwrap(Buffer.concat([proxyHeader(), query]), "127.0.0.1", 1)).toBe(-1);
    expect(p.stats.untrusted.value).toBe(1);
    expect(p.unwrap(proxyHeader().subarray(0, 20), "127.0.0.2", 1)).toBe(-1);
    expect(p.stats.invalid.value).toBe(1);
  });

  test("LOCAL from a trusted peer: the peer is the client", () => {
    const p = policy(["::ffff:127.0.0.0/104"]);
    expect(p.unwrap(Buffer.concat([proxyHeader({ command: "local" }), query]), "127.0.0.9", 77)).toBe(28);
    expect(p.client).toMatchObject({ address: "127.0.0.9", port: 77 });
  });
});
