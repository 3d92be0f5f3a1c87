// Interoperability with an independent implementation (dns-packet): what it encodes we decode, and
// what we re-encode (compressed) it decodes to the same thing.

import dnsPacket from "dns-packet";
import type { Answer, Packet } from "dns-packet";
import { describe, expect, test } from "vitest";
import { QTYPE } from "../../src/dns/constants.js";
import { formatIP } from "../../src/dns/ip.js";
import { decodeMessage, encodeMessage, type Message } from "../../src/dns/message.js";
import { nameRdata, rdataName, readSoa } from "../../src/dns/rdata.js";

const NAME = "host.example.org";

/** One record of each type dns-packet knows how to encode. */
const RECORDS: Answer[] = [
  { type: "A", name: NAME, ttl: 300, data: "192.0.2.1" },
  { type: "AAAA", name: NAME, ttl: 300, data: "2001:db8::1" },
  { type: "CNAME", name: "alias.example.org", ttl: 60, data: "target.example.net" },
  { type: "DNAME", name: "old.example.org", ttl: 60, data: "new.example.org" },
  { type: "PTR", name: "1.2.0.192.in-addr.arpa", ttl: 60, data: NAME },
  { type: "NS", name: "example.org", ttl: 3600, data: "ns1.example.org" },
  { type: "MX", name: "example.org", ttl: 3600, data: { preference: 10, exchange: "mx.example.org" } },
  {
    type: "SOA", name: "example.org", ttl: 3600,
    data: { mname: "ns1.example.org", rname: "hostmaster.example.org", serial: 2024010101, refresh: 7200, retry: 900, expire: 1209600, minimum: 300 },
  },
  { type: "SRV", name: "_sip._tcp.example.org", ttl: 60, data: { priority: 1, weight: 5, port: 5060, target: "sip.example.org" } },
  { type: "TXT", name: NAME, ttl: 60, data: ["v=spf1 -all", "second string"] },
  { type: "CAA", name: "example.org", ttl: 60, data: { flags: 128, tag: "issue", value: "ca.example.net" } },
  { type: "HINFO", name: NAME, ttl: 60, data: { cpu: "x86", os: "linux" } },
  { type: "NAPTR", name: "example.org", ttl: 60, data: { order: 100, preference: 10, flags: "S", services: "SIP+D2U", regexp: "", replacement: "_sip._udp.example.org" } },
  { type: "DS", name: "example.org", ttl: 60, data: { keyTag: 12345, algorithm: 8, digestType: 2, digest: Buffer.alloc(32, 0xab) } },
  { type: "DNSKEY", name: "example.org", ttl: 60, data: { flags: 257, algorithm: 8, key: Buffer.alloc(64, 0x11) } },
  {
    type: "RRSIG", name: "example.org", ttl: 60,
    data: { typeCovered: "A", algorithm: 8, labels: 2, originalTTL: 300, expiration: 1700000000, inception: 1690000000, keyTag: 12345, signersName: "example.org", signature: Buffer.alloc(64, 0x22) },
  },
  { type: "NSEC", name: "a.example.org", ttl: 60, data: { nextDomain: "b.example.org", rrtypes: ["A", "AAAA", "RRSIG", "NSEC"] } },
  { type: "NSEC3", name: "abc.example.org", ttl: 60, data: { algorithm: 1, flags: 0, iterations: 10, salt: Buffer.from("beef", "hex"), nextDomain: Buffer.alloc(20, 3), rrtypes: ["A", "RRSIG"] } },
  { type: "SSHFP", name: NAME, ttl: 60, data: { algorithm: 4, hash: 2, fingerprint: "ab".repeat(32) } },
  { type: "TLSA", name: "_443._tcp.example.org", ttl: 60, data: { usage: 3, selector: 1, matchingType: 1, certificate: Buffer.alloc(32, 0x33) } },
  { type: "RP", name: NAME, ttl: 60, data: { mbox: "admin.example.org", txt: "info.example.org" } },
  { type: "NULL", name: NAME, ttl: 60, data: Buffer.from([0, 1, 2, 0xc0, 0x0c]) },
];

function packet(answers: Answer[]): Packet {
  return {
    type: "response", id: 0xbeef, flags: dnsPacket.RECURSION_DESIRED | dnsPacket.RECURSION_AVAILABLE,
    questions: [{ type: "A", name: "example.org" }],
    answers,
    additionals: [{ type: "OPT", name: ".", udpPayloadSize: 1232, extendedRcode: 0, ednsVersion: 0, flags: dnsPacket.DNSSEC_OK, flag_do: true, options: [{ code: 10, data: Buffer.alloc(8, 7) }] } as unknown as Answer],
  };
}

describe("records encoded by dns-packet", () => {
  for (const record of RECORDS) {
    test(`${record.type}: decodes, and our compressed re-encoding decodes identically in dns-packet`, () => {
      const original = dnsPacket.encode(packet([record, { ...record }]));
      const ours = decodeMessage(original);
      expect(ours.id).toBe(0xbeef);
      expect(ours.answers).toHaveLength(2);
      expect(ours.answers[0].name).toBe(record.name);
      expect(ours.answers[0].ttl).toBe("ttl" in record ? record.ttl : -1);
      expect(ours.edns).toMatchObject({ udpSize: 1232, flags: 0x8000, options: [{ code: 10, data: Buffer.alloc(8, 7) }] });
      const reencoded = encodeMessage(ours);
      expect(reencoded.length).toBeLessThan(original.length); // owner names at least are compressed
      expect(dnsPacket.decode(reencoded)).toEqual(dnsPacket.decode(original));
      // And back through our own decoder to the same structure.
      expect(decodeMessage(reencoded)).toEqual(ours);
    });
  }

  test("typed data is readable through our helpers", () => {
    const m = decodeMessage(dnsPacket.encode(packet(RECORDS)));
    const byType = new Map(m.answers.map((r) => [r.type, r]));
    expect(formatIP(byType.get(QTYPE.A)!.data)).toBe("192.0.2.1");
    expect(formatIP(byType.get(QTYPE.AAAA)!.data)).toBe("2001:db8::1");
    expect(rdataName(byType.get(QTYPE.CNAME)!.data)).toBe("target.example.net");
    expect(rdataName(byType.get(QTYPE.MX)!.data, 2)).toBe("mx.example.org");
    expect(rdataName(byType.get(QTYPE.SRV)!.data, 6)).toBe("sip.example.org");
    expect(readSoa(byType.get(QTYPE.SOA)!.data)).toMatchObject({ mname: "ns1.example.org", rname: "hostmaster.example.org", serial: 2024010101 });
  });

  test("a record type dns-packet does not know (type 65280) is carried opaquely", () => {
    const b = dnsPacket.encode(packet([{ type: "UNKNOWN_65280" as "NULL", name: NAME, ttl: 5, data: Buffer.from("opaque") }]));
    const m = decodeMessage(b);
    expect(m.answers[0]).toMatchObject({ type: 65280, data: Buffer.from("opaque") });
    expect(dnsPacket.decode(encodeMessage(m))).toEqual(dnsPacket.decode(b));
  });
});

describe("names with escaped characters", () => {
  const names = ["dot\\.inside.example", "back\\\\slash.example", "\\000\\001\\255.example", "sp\\032ace.example", "\\.\\.\\..example", "end\\."];

  test("\\. \\\\ and \\DDD names round-trip as question, owner and CNAME target", () => {
    for (const name of names) {
      const msg: Message = {
        id: 1, flags: 0x8180, questions: [{ name, type: QTYPE.A, class: 1 }],
        answers: [{ name, type: QTYPE.CNAME, class: 1, ttl: 1, data: nameRdata(name) }],
        authorities: [], additionals: [], edns: null,
      };
      const back = decodeMessage(encodeMessage(msg));
      expect(back.questions[0].name, name).toBe(name);
      expect(back.answers[0].name, name).toBe(name);
      expect(rdataName(back.answers[0].data), name).toBe(name);
    }
  });

  test("dns-packet sees the raw label bytes", () => {
    const msg: Message = {
      id: 1, flags: 0, questions: [{ name: "dot\\.inside.example", type: QTYPE.A, class: 1 }],
      answers: [], authorities: [], additionals: [], edns: null,
    };
    const wire = encodeMessage(msg);
    expect(wire[12]).toBe(10); // one 10-byte label "dot.inside"
    expect(dnsPacket.decode(wire).questions?.[0].name).toBe("dot.inside.example");
  });
});
