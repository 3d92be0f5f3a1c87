// The strict decoder: what it refuses (each case a packet a sloppy parser would accept or crash on),
// what it makes of compressed record data, and the query decoder's size and EDNS-option bounds.

import { describe, expect, test } from "vitest";
import { QTYPE } from "../../src/dns/constants.js";
import { decodeMessage, encodeMessage, messageRcode, WireFormatError } from "../../src/dns/message.js";
import { decodeQuery, emptyDecodedQuery, MAX_EDNS_OPTIONS, MAX_QUERY_BYTES } from "../../src/dns/query.js";
import { rdataName, readSoa } from "../../src/dns/rdata.js";
import { indexMessage } from "../../src/dns/view.js";
import { PacketBuilder } from "../helpers/wire.js";

const A = QTYPE.A;
const OPT = QTYPE.OPT;

function expectReject(buf: Buffer, pattern: RegExp): void {
  expect(() => decodeMessage(buf)).toThrow(WireFormatError);
  expect(() => decodeMessage(buf)).toThrow(pattern);
}

/** A valid response: one question, one A answer, one NS authority, one A glue, OPT. */
function validResponse(): PacketBuilder {
  const b = new PacketBuilder({ flags: 0x8180, qd: 1, an: 1, ns: 1, ar: 2 });
  b.question(["www", "example", "com"]);
  b.pointer(12).record(A, 1, 300, (r) => r.bytes([192, 0, 2, 1]));
  b.pointer(16).record(QTYPE.NS, 1, 300, (r) => r.name(["ns1"], 16));
  b.name(["ns1"], 16).record(A, 1, 300, (r) => r.bytes([192, 0, 2, 53]));
  b.opt(1232, 0x8000);
  return b;
}

describe("decodeMessage rejects", () => {
  test("a valid baseline decodes (so the cases below fail for their own reason)", () => {
    const m = decodeMessage(validResponse().build());
    expect(m.questions).toEqual([{ name: "www.example.com", type: A, class: 1 }]);
    expect(m.answers[0]).toMatchObject({ name: "www.example.com", ttl: 300 });
    expect(rdataName(m.authorities[0].data)).toBe("ns1.example.com");
    expect(m.additionals.map((r) => r.name)).toEqual(["ns1.example.com"]);
    expect(m.edns).toMatchObject({ udpSize: 1232, flags: 0x8000, version: 0, extRcode: 0 });
  });

  test("a header shorter than 12 bytes", () => {
    for (let n = 0; n < 12; n++) expectReject(Buffer.alloc(n), /shorter than a DNS header/);
  });

  test("every truncation of a valid message", () => {
    const full = validResponse().build();
    for (let n = 12; n < full.length; n++) {
      expect(() => decodeMessage(full.subarray(0, n)), `length ${n}`).toThrow(WireFormatError);
      expect(() => indexMessage(full.subarray(0, n)), `length ${n}`).toThrow(WireFormatError);
    }
  });

  test("a truncated question (name complete, type/class missing)", () => {
    const b = new PacketBuilder({ qd: 1 }).name(["a"]).u16(1);
    expectReject(b.build(), /truncated/);
  });

  test("a truncated record header and record data past the end", () => {
    expectReject(new PacketBuilder({ an: 1 }).u8(0).u16(A).u16(1).u32(0).build(), /record header truncated/);
    expectReject(new PacketBuilder({ an: 1 }).u8(0).recordRaw(QTYPE.TXT, 1, 0, 10, [3, 0x61, 0x62]).build(), /past the end/);
  });

  test("counts that lie: more records claimed than present, fewer claimed than present", () => {
    const more = validResponse().build();
    more.writeUInt16BE(3, 6); // an = 3
    expectReject(more, /WireFormat|truncated|past|name|OPT|record/);
    const fewerAr = validResponse().build();
    fewerAr.writeUInt16BE(1, 10);
    expectReject(fewerAr, /trailing bytes/);
    const noQuestion = validResponse().build();
    noQuestion.writeUInt16BE(0, 4);
    expect(() => decodeMessage(noQuestion)).toThrow(WireFormatError);
    const hugeQd = validResponse().build();
    hugeQd.writeUInt16BE(0xffff, 4);
    expect(() => decodeMessage(hugeQd)).toThrow(WireFormatError);
  });

  test("trailing garbage after the last record", () => {
    const buf = Buffer.concat([validResponse().build(), Buffer.from([0])]);
    expectReject(buf, /trailing bytes/);
    expect(() => indexMessage(buf)).toThrow(/trailing bytes/);
  });

  test("two OPT records", () => {
    const b = new PacketBuilder({ qd: 1, ar: 2 }).question(["a"]).opt().opt();
    expectReject(b.build(), /more than one OPT/);
    expect(() => indexMessage(b.build())).toThrow(/OPT/);
  });

  test("OPT in the answer or authority section", () => {
    const inAnswer = new PacketBuilder({ qd: 1, an: 1 }).question(["a"]).opt().build();
    expectReject(inAnswer, /outside the additional section/);
    expect(() => indexMessage(inAnswer)).toThrow(/OPT/);
    const inAuthority = new PacketBuilder({ qd: 1, ns: 1 }).question(["a"]).opt().build();
    expectReject(inAuthority, /outside the additional section/);
  });

  test("OPT not owned by the root (by label or by pointer)", () => {
    const byLabel = new PacketBuilder({ qd: 1, ar: 1 }).question(["a"]).name(["x"]).recordRaw(OPT, 1232, 0, 0, []).build();
    expectReject(byLabel, /not owned by the root/);
    expect(() => indexMessage(byLabel)).toThrow(/not owned by the root/);
    const byPointer = new PacketBuilder({ qd: 1, ar: 1 }).question(["a"]).pointer(12).recordRaw(OPT, 1232, 0, 0, []).build();
    expectReject(byPointer, /not owned by the root/);
    expect(() => indexMessage(byPointer)).toThrow(/not owned by the root/);
  });

  test("malformed EDNS options inside OPT", () => {
    const short = new PacketBuilder({ qd: 1, ar: 1 }).question(["a"]).opt(1232, 0, [0, 8, 0]).build();
    expectReject(short, /option header truncated/);
    const long = new PacketBuilder({ qd: 1, ar: 1 }).question(["a"]).opt(1232, 0, [0, 8, 0, 9, 1, 2]).build();
    expectReject(long, /option runs past/);
  });

  test("A and AAAA records of class IN with the wrong RDLENGTH", () => {
    for (const [type, sizes] of [[A, [0, 3, 5, 16]], [QTYPE.AAAA, [0, 4, 15, 17]]] as const) {
      for (const size of sizes) {
        const buf = new PacketBuilder({ an: 1 }).u8(0).recordRaw(type, 1, 0, size, new Array<number>(size).fill(1)).build();
        expectReject(buf, /record data must be/);
      }
    }
    // Other classes have other layouts (CHAOS A is a name + address), so they are left alone.
    const chaos = new PacketBuilder({ an: 1 }).u8(0).recordRaw(A, 3, 0, 6, [1, 0x61, 0, 0, 0, 1]).build();
    expect(decodeMessage(chaos).answers[0].data).toHaveLength(6);
  });

  test("bad names anywhere: question, owner, and inside record data", () => {
    const reserved = new PacketBuilder({ qd: 1 }).u8(0x40).u8(0).u16(1).u16(1).build();
    expectReject(reserved, /reserved label type/);
    const loopOwner = new PacketBuilder({ qd: 1, an: 1 }).question(["a"]);
    const at = loopOwner.here;
    loopOwner.pointer(at).recordRaw(A, 1, 0, 4, [1, 2, 3, 4]);
    expectReject(loopOwner.build(), /does not point backwards/);
    const forwardInRdata = new PacketBuilder({ qd: 1, an: 1 }).question(["a"]).u8(0);
    const rdataAt = forwardInRdata.here + 10;
    forwardInRdata.recordRaw(QTYPE.CNAME, 1, 0, 2, [0xc0, rdataAt + 2]);
    expectReject(forwardInRdata.build(), /does not point backwards/);
  });

  test("record data whose names do not fill it exactly, or overflow it", () => {
    const extra = new PacketBuilder({ an: 1 }).u8(0).record(QTYPE.CNAME, 1, 0, (r) => r.name(["a"]).u8(0xff)).build();
    expectReject(extra, /longer than its type allows/);
    const mxShort = new PacketBuilder({ an: 1 }).u8(0).record(QTYPE.MX, 1, 0, (r) => r.u8(0)).build();
    expectReject(mxShort, /shorter than its type requires/);
    const soaShort = new PacketBuilder({ an: 1 }).u8(0).record(QTYPE.SOA, 1, 0, (r) => r.name(["ns"]).name(["h"]).u32(1)).build();
    expectReject(soaShort, /shorter than its type requires/);
    // The CNAME's name is longer than its RDLENGTH: the name check runs against the record limit.
    const overflow = new PacketBuilder({ an: 1 }).u8(0).recordRaw(QTYPE.CNAME, 1, 0, 2, [3, 0x61, 0x62, 0x63, 0]).u8(0).build();
    expectReject(overflow, /past the end/);
    const emptyCname = new PacketBuilder({ an: 1 }).u8(0).recordRaw(QTYPE.CNAME, 1, 0, 0, []).build();
    expectReject(emptyCname, /past the end/);
  });
});

describe("decodeMessage expands compressed names in record data", () => {
  test("CNAME, MX, SRV, SOA, PTR, NS data come out uncompressed and self-contained", () => {
    const b = new PacketBuilder({ flags: 0x8180, qd: 1, an: 5, ns: 1 });
    b.question(["www", "Example", "com"]); // "example.com" at 16, "com" at 24
    b.pointer(12).record(QTYPE.CNAME, 1, 60, (r) => r.name(["edge"], 16));
    b.pointer(12).record(QTYPE.MX, 1, 60, (r) => r.u16(10).name(["mx"], 16));
    b.pointer(12).record(QTYPE.SRV, 1, 60, (r) => r.u16(1).u16(2).u16(443).name(["srv", "cdn"], 24));
    b.pointer(12).record(QTYPE.PTR, 1, 60, (r) => r.pointer(12));
    b.pointer(12).record(QTYPE.NS, 1, 60, (r) => r.pointer(16));
    b.pointer(16).record(QTYPE.SOA, 1, 60, (r) => r.name(["ns1"], 16).name(["hostmaster"], 16).u32(2024).u32(7200).u32(900).u32(86400).u32(30));
    const m = decodeMessage(b.build());
    const [cname, mx, srv, ptr, ns] = m.answers;
    expect(rdataName(cname.data)).toBe("edge.Example.com");
    expect([...cname.data]).toEqual([4, ...Buffer.from("edge"), 7, ...Buffer.from("Example"), 3, ...Buffer.from("com"), 0]);
    expect(mx.data.readUInt16BE(0)).toBe(10);
    expect(rdataName(mx.data, 2)).toBe("mx.Example.com");
    expect([srv.data.readUInt16BE(0), srv.data.readUInt16BE(2), srv.data.readUInt16BE(4)]).toEqual([1, 2, 443]);
    expect(rdataName(srv.data, 6)).toBe("srv.cdn.com");
    expect(rdataName(ptr.data)).toBe("www.Example.com");
    expect(rdataName(ns.data)).toBe("Example.com");
    expect(readSoa(m.authorities[0].data)).toEqual({
      mname: "ns1.Example.com", rname: "hostmaster.Example.com", serial: 2024, refresh: 7200, retry: 900, expire: 86400, minimum: 30,
    });
    // No pointer survives in any expanded record.
    for (const rr of [...m.answers, ...m.authorities]) expect(rr.data.includes(0xc0)).toBe(false);
  });

  test("types whose data is opaque are copied byte for byte, pointers and all", () => {
    const raw = [0xc0, 0x0c, 1, 2, 3];
    const buf = new PacketBuilder({ an: 1 }).u8(0).recordRaw(QTYPE.TXT, 1, 0, raw.length, raw).build();
    expect([...decodeMessage(buf).answers[0].data]).toEqual(raw);
  });

  test("the rcode combines the header nibble with OPT's extended bits", () => {
    const b = new PacketBuilder({ flags: 0x8000 | 0x0, qd: 1, ar: 1 }).question(["a"]).opt(1232, 0x01000000);
    expect(messageRcode(decodeMessage(b.build()))).toBe(16);
  });
});

describe("decodeQuery bounds", () => {
  const withOptions = (count: number, slowPath: boolean): Buffer =>
    encodeMessage({
      id: 1,
      flags: 0x0100,
      questions: [{ name: "bounds.test", type: A, class: 1 }],
      answers: [],
      authorities: [],
      // An extra additional record sends the query down the general decoder.
      additionals: slowPath ? [{ name: "extra.test", type: A, class: 1, ttl: 1, data: Buffer.from([1, 2, 3, 4]) }] : [],
      edns: { udpSize: 1232, extRcode: 0, version: 0, flags: 0, options: Array.from({ length: count }, (_, i) => ({ code: 65001, data: Buffer.from([i & 0xff]) })) },
    });

  for (const slowPath of [false, true]) {
    test(`${MAX_EDNS_OPTIONS} EDNS options decode, one more is refused (${slowPath ? "general" : "fast"} path)`, () => {
      expect(decodeQuery(withOptions(MAX_EDNS_OPTIONS, slowPath)).message.edns?.options).toHaveLength(MAX_EDNS_OPTIONS);
      expect(() => decodeQuery(withOptions(MAX_EDNS_OPTIONS + 1, slowPath))).toThrow(/more than 32 EDNS options/);
      // Scanning stops at the 33rd option: the trailing byte after the record is never reached.
      const broken = Buffer.concat([withOptions(MAX_EDNS_OPTIONS + 1, slowPath), Buffer.from([0xff])]);
      expect(() => decodeQuery(broken)).toThrow(/more than 32 EDNS options/);
    });
  }

  test(`a query over ${MAX_QUERY_BYTES} bytes is refused before its body is read`, () => {
    const padded = (size: number): Buffer => {
      const base = withOptions(1, false);
      const m = decodeMessage(base);
      m.edns!.options[0].data = Buffer.alloc(size - base.length + 1);
      return encodeMessage(m);
    };
    expect(padded(MAX_QUERY_BYTES)).toHaveLength(MAX_QUERY_BYTES);
    expect(decodeQuery(padded(MAX_QUERY_BYTES)).qname).toBe("bounds.test");
    expect(() => decodeQuery(padded(MAX_QUERY_BYTES + 1))).toThrow(/larger than 4096 bytes/);
    // Garbage past the header is not looked at.
    expect(() => decodeQuery(Buffer.alloc(MAX_QUERY_BYTES + 1, 0xc0))).toThrow(/larger than 4096 bytes/);
  });
});

describe("decodeQuery into a server's reused result", () => {
  const query = (name: string, options: number): Buffer =>
    encodeMessage({
      id: 7,
      flags: 0x0100,
      questions: [{ name, type: A, class: 1 }],
      answers: [],
      authorities: [],
      additionals: [],
      edns: { udpSize: 1232, extRcode: 0, version: 0, flags: 0, options: Array.from({ length: options }, () => ({ code: 10, data: Buffer.alloc(8, 1) })) },
    });

  test("each decode overwrites the result, on the fast and the general path, and equals a fresh decode", () => {
    const into = emptyDecodedQuery();
    const first = query("First.Example", 0);
    expect(decodeQuery(first, into)).toBe(into);
    expect(into).toEqual(decodeQuery(first));
    expect(into.qname).toBe("first.example");
    // A label with a space in it takes the general decoder; it fills the same object.
    const spaced = Buffer.from([0, 8, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 3, 0x61, 0x20, 0x62, 0, 0, 1, 0, 1]);
    decodeQuery(spaced, into);
    expect(into).toEqual(decodeQuery(spaced));
    expect(into.questionEnd).toBe(spaced.length);
    expect(into.message.questions[0].name).not.toBe("first.example");
    const second = query("second.example", 1);
    decodeQuery(second, into);
    expect(into).toEqual(decodeQuery(second));
    expect(into.questionEnd).toBe(12 + "second.example".length + 2 + 4);
  });

  test("an OPT record without options shares one frozen list: a plugin must replace it, not push to it", () => {
    const a = decodeQuery(query("a.example", 0)).message.edns!;
    const b = decodeQuery(query("b.example", 0)).message.edns!;
    expect(a.options).toHaveLength(0);
    expect(a.options).toBe(b.options);
    expect(() => a.options.push({ code: 8, data: Buffer.alloc(0) })).toThrow(TypeError);
    // With options, each query has its own list.
    expect(decodeQuery(query("c.example", 1)).message.edns!.options).not.toBe(decodeQuery(query("c.example", 1)).message.edns!.options);
  });
});
