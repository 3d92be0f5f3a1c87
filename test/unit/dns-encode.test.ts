// The encoder: name compression (size, case-insensitive sharing, no false sharing), the 64 KiB
// limit, replies built from requests, and DnsResponse's lazy wire/message views.

import dnsPacket from "dns-packet";
import type { Answer } from "dns-packet";
import { describe, expect, test } from "vitest";
import { EDNS_DO, FLAG, QTYPE, RCODE } from "../../src/dns/constants.js";
import { decodeMessage, encodeMessage, messageRcode, replyTo, setMessageRcode, type Message, type ResourceRecord } from "../../src/dns/message.js";
import { addressRecord, nameRdata, soaRdata, syntheticSoa } from "../../src/dns/rdata.js";
import { DnsResponse } from "../../src/dns/response.js";
import { WireFormatError } from "../../src/dns/name.js";
import { WireWriter } from "../../src/dns/writer.js";

function message(parts: Partial<Message> = {}): Message {
  return { id: 7, flags: 0x8180, questions: [], answers: [], authorities: [], additionals: [], edns: null, ...parts };
}

function txt(size: number, name = ""): ResourceRecord {
  return { name, type: QTYPE.TXT, class: 1, ttl: 0, data: Buffer.alloc(size) };
}

describe("name compression", () => {
  test("a zone-sized response is much smaller than uncompressed and dns-packet decodes it identically", () => {
    const zone = "service.zone.example.com";
    const answers: Answer[] = [];
    for (let i = 0; i < 60; i++) answers.push({ type: "A", name: `host${i}.${zone}`, ttl: 60, data: `192.0.2.${i}` });
    answers.push({ type: "NS", name: zone, ttl: 60, data: `ns1.${zone}` });
    answers.push({ type: "MX", name: zone, ttl: 60, data: { preference: 5, exchange: `mail.${zone}` } });
    const authorities: Answer[] = [{ type: "SOA", name: zone, ttl: 60, data: { mname: `ns1.${zone}`, rname: `hostmaster.${zone}`, serial: 1, refresh: 2, retry: 3, expire: 4, minimum: 5 } }];
    const uncompressed = dnsPacket.encode({ type: "response", id: 9, questions: [{ type: "A", name: zone }], answers, authorities });
    const ours = encodeMessage(decodeMessage(uncompressed));
    expect(ours.length).toBeLessThan(uncompressed.length * 0.6);
    expect(dnsPacket.decode(ours)).toEqual(dnsPacket.decode(uncompressed));
  });

  test("suffixes are shared case-insensitively; the question keeps its own case", () => {
    const m = message({
      questions: [{ name: "Example.COM", type: QTYPE.A, class: 1 }],
      answers: [addressRecord("www.example.com", Uint8Array.from([192, 0, 2, 1]), 60)],
    });
    const wire = encodeMessage(m);
    // Question name at 12; answer owner = "www" + pointer to 12.
    expect([...wire.subarray(29, 35)]).toEqual([3, 0x77, 0x77, 0x77, 0xc0, 12]);
    const back = decodeMessage(wire);
    expect(back.questions[0].name).toBe("Example.COM");
    expect(back.answers[0].name).toBe("www.Example.COM");
  });

  test("labels containing dots or other label bytes never share with different label splits", () => {
    const names = ["a.b", "a\\.b", "ab", "b", "\\001b", "a\\.b.c", "a.b.c", "\\.b"];
    const m = message({ answers: names.map((n) => ({ ...txt(1), name: n })) });
    expect(decodeMessage(encodeMessage(m)).answers.map((r) => r.name)).toEqual(names);
  });

  test("names written beyond 16 KiB still compress against earlier ones and stay correct", () => {
    const answers = [txt(100, "early.example.com"), txt(20_000, "big.example.com")];
    for (let i = 0; i < 50; i++) answers.push({ ...txt(4), name: `n${i}.late${i % 3}.example.com` });
    answers.push({ ...txt(4), name: "n0.late0.example.com" });
    const m = message({ answers });
    const wire = encodeMessage(m);
    expect(decodeMessage(wire).answers.map((r) => r.name)).toEqual(answers.map((r) => r.name));
    expect(dnsPacket.decode(wire).answers?.map((r) => r.name)).toEqual(answers.map((r) => r.name));
    // The repeated late name cannot point at its own first copy (past 0x3fff) but shares "example.com".
    const tail = wire.subarray(wire.length - 24);
    expect(tail.includes(0xc0)).toBe(true);
  });
});

describe("the 64 KiB limit", () => {
  // 12 header + 5 root question + one TXT record at the root (11 + data).
  const sized = (total: number): Message => message({ questions: [{ name: "", type: 1, class: 1 }], answers: [txt(total - 28)] });

  test("65535 bytes encode, 65536 are rejected", () => {
    expect(encodeMessage(sized(65535), new WireWriter())).toHaveLength(65535);
    expect(() => encodeMessage(sized(65536), new WireWriter())).toThrow(WireFormatError);
    expect(() => encodeMessage(sized(70000), new WireWriter())).toThrow(/larger than 65535/);
  });

  test("a writer whose buffer has grown by doubling still refuses the 65536th byte", () => {
    const w = new WireWriter();
    const answers = Array.from({ length: 65 }, () => txt(989));
    answers.push(txt(65536 - 12 - 5 - 65 * 1000 - 11));
    expect(() => encodeMessage(message({ questions: [{ name: "", type: 1, class: 1 }], answers }), w)).toThrow(/larger than 65535/);
    answers[answers.length - 1] = txt(65535 - 12 - 5 - 65 * 1000 - 11);
    expect(encodeMessage(message({ questions: [{ name: "", type: 1, class: 1 }], answers }), w)).toHaveLength(65535);
  });

  test("a message that fails to encode leaves the shared writer usable", () => {
    expect(() => encodeMessage(sized(65536))).toThrow(WireFormatError);
    const small = message({ questions: [{ name: "ok.example", type: 1, class: 1 }] });
    expect(decodeMessage(encodeMessage(small))).toEqual(small);
  });
});

describe("replies and rcodes", () => {
  const request = (): Message => message({
    id: 0x4242, flags: (2 << 11) | FLAG.RD | FLAG.CD | FLAG.AD | FLAG.AA,
    questions: [{ name: "q.example", type: QTYPE.AAAA, class: 1 }],
    edns: { udpSize: 4096, extRcode: 0, version: 0, flags: EDNS_DO | 0x1, options: [{ code: 10, data: Buffer.alloc(8) }] },
  });

  test("replyTo copies id, opcode, RD, CD and the question, sets QR and RA, and answers OPT with DO only", () => {
    const r = replyTo(request(), RCODE.NXDOMAIN);
    expect(r.id).toBe(0x4242);
    expect(r.flags).toBe(FLAG.QR | (2 << 11) | FLAG.RD | FLAG.CD | FLAG.RA | RCODE.NXDOMAIN);
    expect(r.questions).toEqual([{ name: "q.example", type: QTYPE.AAAA, class: 1 }]);
    expect(r.edns).toEqual({ udpSize: 1232, extRcode: 0, version: 0, flags: EDNS_DO, options: [] });
    expect(replyTo(message({ questions: [] })).edns).toBeNull();
  });

  test("extended rcodes spread into OPT and survive the wire", () => {
    const r = replyTo(request(), RCODE.BADVERS);
    expect(r.flags & 0x0f).toBe(0);
    expect(r.edns?.extRcode).toBe(1);
    const back = decodeMessage(encodeMessage(r));
    expect(messageRcode(back)).toBe(RCODE.BADVERS);
    expect(DnsResponse.fromWire(encodeMessage(r)).rcode).toBe(RCODE.BADVERS);
    setMessageRcode(back, RCODE.REFUSED);
    expect(messageRcode(back)).toBe(RCODE.REFUSED);
    expect(back.edns?.extRcode).toBe(0);
  });

  test("OPT fields (size, version, flags, options) survive encode → decode", () => {
    const m = request();
    m.edns = { udpSize: 512, extRcode: 0xab, version: 3, flags: 0xffff, options: [{ code: 8, data: Buffer.from([0, 1, 24, 0, 192, 0, 2]) }, { code: 12, data: Buffer.alloc(0) }] };
    expect(decodeMessage(encodeMessage(m)).edns).toEqual(m.edns);
  });
});

describe("DnsResponse", () => {
  const answer = (): Buffer => encodeMessage(message({
    id: 99, flags: FLAG.QR | FLAG.TC | RCODE.NXDOMAIN, questions: [{ name: "x.example", type: 1, class: 1 }],
    answers: [addressRecord("x.example", Uint8Array.from([1, 2, 3, 4]), 30)],
    authorities: [syntheticSoa("example", 60)],
  }));

  test("header facts are read from the wire without decoding", () => {
    const r = DnsResponse.fromWire(answer());
    expect([r.id, r.rcode, r.answerCount, r.truncated]).toEqual([99, RCODE.NXDOMAIN, 1, true]);
    expect(r.index.records.map((s) => s.type)).toEqual([QTYPE.A, QTYPE.SOA]);
  });

  test("edit() rebuilds the wire; clone() is independent", () => {
    const r = DnsResponse.fromWire(answer());
    const copy = r.clone();
    const m = r.edit();
    m.answers = [];
    m.flags &= ~FLAG.TC;
    const rebuilt = decodeMessage(r.toWire());
    expect(rebuilt.answers).toEqual([]);
    expect(r.answerCount).toBe(0);
    expect(r.truncated).toBe(false);
    expect(r.index.records.map((s) => s.type)).toEqual([QTYPE.SOA]);
    expect(copy.answerCount).toBe(1);
    expect(decodeMessage(copy.toWire()).answers).toHaveLength(1);
  });

  test("fromMessage encodes lazily and the rdata helpers build well-formed data", () => {
    const m = message({ answers: [{ name: "c.example", type: QTYPE.CNAME, class: 1, ttl: 5, data: nameRdata("t.example") }] });
    m.authorities.push({ name: "example", type: QTYPE.SOA, class: 1, ttl: 5, data: soaRdata({ mname: "a", rname: "b", serial: 1, refresh: 2, retry: 3, expire: 4, minimum: 5 }) });
    const r = DnsResponse.fromMessage(m);
    expect(r.answerCount).toBe(1);
    expect(decodeMessage(r.toWire())).toEqual(m);
  });
});
