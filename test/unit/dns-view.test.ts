// The structural wire index (offsets, TTL patching) checked against the full decoder, and fitUdp's
// truncation rules checked on hand-picked and on random messages.

import { describe, expect, test } from "vitest";
import { EDNS_DO, FLAG, QTYPE } from "../../src/dns/constants.js";
import { decodeMessage, encodeMessage, type Message, type ResourceRecord } from "../../src/dns/message.js";
import { readName } from "../../src/dns/name.js";
import { addressRecord, nameRdata, syntheticSoa } from "../../src/dns/rdata.js";
import { fitUdp, indexMessage, minTtl, scanMessage, SECTION_ADDITIONAL, SECTION_ANSWER, setId, udpLimit, wireRcode } from "../../src/dns/view.js";
import { randInt, seededRandom } from "../helpers/wire.js";

const WORDS = ["www", "Mail", "api", "CDN", "example", "com", "net", "a", "xn--bcher-kva", "sub"];

function randomName(rnd: () => number): string {
  const parts: string[] = [];
  for (let n = randInt(rnd, 1, 4); n > 0; n--) parts.push(WORDS[randInt(rnd, 0, WORDS.length - 1)]);
  return parts.join(".");
}

function randomRecord(rnd: () => number): ResourceRecord {
  const name = randomName(rnd);
  const ttl = randInt(rnd, 0, 100_000);
  switch (randInt(rnd, 0, 5)) {
    case 0: return addressRecord(name, Uint8Array.from([10, 0, 0, randInt(rnd, 0, 255)]), ttl);
    case 1: return addressRecord(name, new Uint8Array(16).fill(randInt(rnd, 0, 255)), ttl);
    case 2: return { name, type: QTYPE.CNAME, class: 1, ttl, data: nameRdata(randomName(rnd)) };
    case 3: return { ...syntheticSoa(name, ttl) };
    case 4: return { name, type: QTYPE.MX, class: 1, ttl, data: Buffer.concat([Buffer.from([0, 10]), nameRdata(randomName(rnd))]) };
    default: return { name, type: QTYPE.TXT, class: 1, ttl, data: Buffer.alloc(randInt(rnd, 0, 300), 0x41) };
  }
}

function randomMessage(rnd: () => number, maxPerSection = 12): Message {
  const list = (): ResourceRecord[] => Array.from({ length: randInt(rnd, 0, maxPerSection) }, () => randomRecord(rnd));
  return {
    id: randInt(rnd, 0, 0xffff),
    flags: FLAG.QR | FLAG.RD | FLAG.RA,
    questions: [{ name: randomName(rnd), type: QTYPE.A, class: 1 }],
    answers: list(),
    authorities: list(),
    additionals: list(),
    edns: rnd() < 0.6 ? { udpSize: 1232, extRcode: 0, version: 0, flags: EDNS_DO, options: rnd() < 0.5 ? [] : [{ code: 12, data: Buffer.alloc(randInt(rnd, 0, 40)) }] } : null,
  };
}

describe("indexMessage", () => {
  test("agrees with decodeMessage on record offsets, sections, types and TTLs (300 random messages)", () => {
    const rnd = seededRandom(1234);
    for (let i = 0; i < 300; i++) {
      const wire = encodeMessage(randomMessage(rnd));
      const m = decodeMessage(wire);
      const idx = indexMessage(wire);
      const expected = [
        ...m.answers.map((r) => ({ r, section: 0 })),
        ...m.authorities.map((r) => ({ r, section: 1 })),
        ...m.additionals.map((r) => ({ r, section: 2 })),
      ];
      const nonOpt = idx.records.filter((s) => s.type !== QTYPE.OPT);
      expect(nonOpt).toHaveLength(expected.length);
      expect(idx.opt >= 0).toBe(m.edns !== null);
      let pos = idx.questionEnd;
      expect(idx.questionCount).toBe(1);
      for (const slot of idx.records) {
        expect(slot.start).toBe(pos);
        pos = slot.end;
      }
      expect(pos).toBe(wire.length);
      nonOpt.forEach((slot, k) => {
        const { r, section } = expected[k];
        expect(slot.section).toBe(section);
        expect(slot.type).toBe(r.type);
        expect(readName(wire, slot.start).name).toBe(r.name);
        expect(wire.readUInt32BE(slot.fixed + 4)).toBe(r.ttl);
        expect(slot.end - slot.fixed - 10).toBe(r.data.length);
      });
      if (idx.opt >= 0) {
        expect(idx.records[idx.opt].section).toBe(SECTION_ADDITIONAL);
        expect(wire.readUInt16BE(idx.records[idx.opt].fixed + 2)).toBe(m.edns?.udpSize);
      }
      const firstAdditional = idx.records.find((s) => s.section === SECTION_ADDITIONAL);
      expect(idx.additionalStart).toBe(firstAdditional ? firstAdditional.start : wire.length);
      // The allocation-free check finds the same OPT record.
      expect(scanMessage(wire)).toBe(idx.opt >= 0 ? idx.records[idx.opt].fixed : -1);
    }
  });

  test("scanMessage accepts and rejects exactly what indexMessage does (mutated messages)", () => {
    const rnd = seededRandom(99);
    let rejected = 0;
    for (let i = 0; i < 2000; i++) {
      const wire = Buffer.from(encodeMessage(randomMessage(rnd)));
      // Corrupt a few bytes, or cut the message short.
      const cut = rnd() < 0.3;
      const bytes = cut ? wire.subarray(0, Math.floor(rnd() * wire.length)) : wire;
      if (!cut) for (let k = 0; k < 3; k++) bytes[Math.floor(rnd() * bytes.length)] = Math.floor(rnd() * 256);
      let indexed: number | "error";
      try {
        const idx = indexMessage(bytes);
        indexed = idx.opt >= 0 ? idx.records[idx.opt].fixed : -1;
      } catch {
        indexed = "error";
      }
      let scanned: number | "error";
      try {
        scanned = scanMessage(bytes);
      } catch {
        scanned = "error";
      }
      expect(scanned).toBe(indexed);
      if (indexed === "error") rejected++;
    }
    expect(rejected).toBeGreaterThan(200);
  });

  test("TTL patching touches every record but OPT; minTtl and wireRcode read the wire", () => {
    const m: Message = {
      id: 1, flags: FLAG.QR | 3, questions: [{ name: "t.example", type: 1, class: 1 }],
      answers: [addressRecord("t.example", Uint8Array.from([1, 1, 1, 1]), 500), addressRecord("t.example", Uint8Array.from([2, 2, 2, 2]), 40)],
      authorities: [syntheticSoa("example", 7)],
      additionals: [],
      edns: { udpSize: 1232, extRcode: 1, version: 0, flags: EDNS_DO, options: [] },
    };
    const wire = encodeMessage(m);
    const idx = indexMessage(wire);
    expect(minTtl(wire, idx, SECTION_ANSWER)).toBe(40);
    expect(minTtl(wire, idx, -1)).toBe(7);
    expect(minTtl(wire, idx, SECTION_ADDITIONAL)).toBe(-1);
    expect(wireRcode(wire, idx)).toBe(0x13);
    // Every record but OPT is indexed with its TTL at fixed + 4.
    const ttlFields = idx.records.filter((r) => r.type !== QTYPE.OPT).map((r) => r.fixed + 4);
    expect(ttlFields).toHaveLength(3);
    for (const at of ttlFields) wire.writeUInt32BE(12345, at);
    setId(wire, 0xabcd);
    const back = decodeMessage(wire);
    expect(back.id).toBe(0xabcd);
    expect([...back.answers, ...back.authorities].map((r) => r.ttl)).toEqual([12345, 12345, 12345]);
    expect(back.edns).toEqual(m.edns);
  });
});

describe("fitUdp", () => {
  /** 1 question, `an` answers of ~100 bytes, `ar` additionals of ~100 bytes, optional OPT. */
  function sized(an: number, ar: number, edns: boolean): Buffer {
    const rec = (name: string): ResourceRecord => ({ name, type: QTYPE.TXT, class: 1, ttl: 60, data: Buffer.alloc(80, 0x61) });
    return encodeMessage({
      id: 77, flags: FLAG.QR | FLAG.RD | FLAG.RA, questions: [{ name: "big.example", type: QTYPE.TXT, class: 1 }],
      answers: Array.from({ length: an }, () => rec("big.example")),
      authorities: [],
      additionals: Array.from({ length: ar }, (_, i) => rec(`extra${i}.example`)),
      edns: edns ? { udpSize: 4096, extRcode: 0, version: 0, flags: EDNS_DO, options: [] } : null,
    });
  }

  test("a message under the limit is returned unchanged (same buffer)", () => {
    const wire = sized(2, 2, true);
    expect(fitUdp(wire, wire.length)).toBe(wire);
    expect(fitUdp(wire, 4096)).toBe(wire);
  });

  test("additional records go first, OPT stays, TC stays clear", () => {
    const wire = sized(3, 10, true);
    expect(wire.length).toBeGreaterThan(512);
    const out = fitUdp(wire, 512);
    expect(out.length).toBeLessThanOrEqual(512);
    const m = decodeMessage(out);
    expect(m.flags & FLAG.TC).toBe(0);
    expect(m.answers).toHaveLength(3);
    expect(m.additionals).toHaveLength(0);
    expect(m.edns).toMatchObject({ udpSize: 4096, flags: EDNS_DO });
    expect(m.id).toBe(77);
  });

  test("then answers and authority go, with TC set and the question and OPT kept", () => {
    const out = fitUdp(sized(12, 3, true), 512);
    expect(out.length).toBeLessThanOrEqual(512);
    const m = decodeMessage(out);
    expect(m.flags & FLAG.TC).toBe(FLAG.TC);
    expect(m.flags & (FLAG.RD | FLAG.RA | FLAG.QR)).toBe(FLAG.RD | FLAG.RA | FLAG.QR);
    expect(m.questions).toEqual([{ name: "big.example", type: QTYPE.TXT, class: 1 }]);
    expect([m.answers.length, m.authorities.length, m.additionals.length]).toEqual([0, 0, 0]);
    expect(m.edns).not.toBeNull();
    const plain = decodeMessage(fitUdp(sized(12, 0, false), 512));
    expect(plain.flags & FLAG.TC).toBe(FLAG.TC);
    expect(plain.edns).toBeNull();
  });

  test("never over the limit and always decodable (random messages and limits)", () => {
    const rnd = seededRandom(99);
    let cut = 0;
    for (let i = 0; i < 400; i++) {
      const wire = encodeMessage(randomMessage(rnd, 20));
      const limit = randInt(rnd, 512, 2048);
      const out = fitUdp(wire, limit);
      expect(out.length).toBeLessThanOrEqual(limit);
      const before = decodeMessage(wire);
      const after = decodeMessage(out);
      expect(after.id).toBe(before.id);
      expect(after.questions).toEqual(before.questions);
      expect(after.edns).toEqual(before.edns);
      if (out === wire) continue;
      cut++;
      if ((after.flags & FLAG.TC) === 0) {
        // Only the optional records were dropped.
        expect(after.answers).toEqual(before.answers);
        expect(after.authorities).toEqual(before.authorities);
        expect(after.additionals).toEqual([]);
      } else {
        expect(after.answers.length + after.authorities.length + after.additionals.length).toBe(0);
      }
    }
    expect(cut).toBeGreaterThan(50);
  });

  test("udpLimit: 512 without EDNS, the client's size otherwise but never below 512 nor above the server's cap", () => {
    expect(udpLimit(null, 1232)).toBe(512);
    expect(udpLimit(100, 1232)).toBe(512);
    expect(udpLimit(1232, 1232)).toBe(1232);
    expect(udpLimit(800, 1232)).toBe(800);
    expect(udpLimit(65535, 1232)).toBe(1232);
    expect(udpLimit(65535, 4096)).toBe(4096);
    expect(udpLimit(65535, 65535)).toBe(65535);
    expect(udpLimit(null, 65535)).toBe(512);
  });
});
