// Fuzz inputs for the DNS servers: a corpus of valid queries, structure-aware mutators, random
// bytes, queries at the size and EDNS-option bounds, and a crafted query whose echoed questions
// would re-encode to more than 64 KiB.

import { EDNS_DO, QTYPE } from "../../src/dns/constants.js";
import { encodeMessage, type Edns, type Message } from "../../src/dns/message.js";
import { readName } from "../../src/dns/name.js";
import { MAX_EDNS_OPTIONS, MAX_QUERY_BYTES } from "../../src/dns/query.js";
import { PacketBuilder, randInt, randomBytes } from "../helpers/wire.js";

export type Rng = () => number;

const NAMES = ["www.blocked.test", "blocked.test", "Deep.Sub.BLOCKED.test", "ok.example", "a.b.c.example.com", "", "x", "notblocked.test", "esc\\.aped.blocked.test"];
const TYPES = [QTYPE.A, QTYPE.AAAA, QTYPE.TXT, QTYPE.ANY, QTYPE.MX, QTYPE.HTTPS, 65280];

function edns(rnd: Rng): Edns | null {
  switch (randInt(rnd, 0, 3)) {
    case 0: return null;
    case 1: return { udpSize: 1232, extRcode: 0, version: 0, flags: 0, options: [] };
    case 2: return { udpSize: randInt(rnd, 0, 0xffff), extRcode: 0, version: 0, flags: EDNS_DO, options: [{ code: 8, data: Buffer.from([0, 1, 24, 0, 192, 0, 2]) }] };
    default: return { udpSize: 4096, extRcode: 0, version: 0, flags: EDNS_DO, options: [{ code: 10, data: Buffer.alloc(8, 0x5a) }, { code: 12, data: Buffer.alloc(randInt(rnd, 0, 40)) }] };
  }
}

/** A well-formed query, sometimes with an extra compressed additional record. */
export function validQuery(rnd: Rng): Buffer {
  const name = NAMES[randInt(rnd, 0, NAMES.length - 1)];
  const m: Message = {
    id: 0, flags: rnd() < 0.8 ? 0x0100 : 0x0110,
    questions: [{ name, type: TYPES[randInt(rnd, 0, TYPES.length - 1)], class: rnd() < 0.9 ? 1 : 3 }],
    answers: [], authorities: [],
    additionals: rnd() < 0.2 ? [{ name: `extra.${name}`.replace(/\.$/, ""), type: QTYPE.A, class: 1, ttl: 1, data: Buffer.from([1, 2, 3, 4]) }] : [],
    edns: edns(rnd),
  };
  return encodeMessage(m);
}

const INTERESTING = [0x00, 0x01, 0x3f, 0x40, 0x7f, 0x80, 0xbf, 0xc0, 0xc0, 0xff, 0x2e, 0x5c];

type Mutator = (p: Buffer, rnd: Rng) => Buffer;

const at = (p: Buffer, rnd: Rng, from = 0): number => randInt(rnd, Math.min(from, p.length - 1), p.length - 1);

const MUTATORS: Mutator[] = [
  function flipBits(p, rnd) {
    const out = Buffer.from(p);
    for (let n = randInt(rnd, 1, 8); n > 0 && out.length > 0; n--) out[at(out, rnd)] ^= 1 << randInt(rnd, 0, 7);
    return out;
  },
  function substituteBytes(p, rnd) {
    const out = Buffer.from(p);
    for (let n = randInt(rnd, 1, 4); n > 0 && out.length > 0; n--) out[at(out, rnd)] = rnd() < 0.5 ? INTERESTING[randInt(rnd, 0, INTERESTING.length - 1)] : randInt(rnd, 0, 255);
    return out;
  },
  function truncate(p, rnd) {
    return Buffer.from(p.subarray(0, randInt(rnd, 0, p.length)));
  },
  function extend(p, rnd) {
    return Buffer.concat([p, randomBytes(rnd, randInt(rnd, 1, 64))]);
  },
  function changeCounts(p, rnd) {
    const out = Buffer.from(p);
    if (out.length < 12) return out;
    const field = 4 + 2 * randInt(rnd, 0, 3);
    const choices = [0, 1, 2, 3, 0xffff, randInt(rnd, 0, 0xffff)];
    out.writeUInt16BE(choices[randInt(rnd, 0, choices.length - 1)], field);
    return out;
  },
  function insertPointer(p, rnd) {
    if (p.length < 14) return Buffer.from(p);
    const pos = at(p, rnd, 12);
    const targets = [randInt(rnd, 0, pos), pos, pos + 2, randInt(rnd, 0, 0x3fff), 12];
    const target = targets[randInt(rnd, 0, targets.length - 1)];
    const ptr = Buffer.from([0xc0 | ((target >> 8) & 0x3f), target & 0xff]);
    // Either overwrite two bytes or splice the pointer in.
    if (rnd() < 0.5) {
      const out = Buffer.from(p);
      ptr.copy(out, Math.min(pos, out.length - 2));
      return out;
    }
    return Buffer.concat([p.subarray(0, pos), ptr, p.subarray(pos)]);
  },
  function corruptLabelLength(p, rnd) {
    const out = Buffer.from(p);
    // Walk the first name's labels and corrupt one length byte.
    const lengths: number[] = [];
    for (let pos = 12; pos < out.length && out[pos] !== 0 && out[pos] < 0x40; pos += out[pos] + 1) lengths.push(pos);
    if (lengths.length === 0) return out;
    out[lengths[randInt(rnd, 0, lengths.length - 1)]] = rnd() < 0.5 ? randInt(rnd, 0, 255) : INTERESTING[randInt(rnd, 0, INTERESTING.length - 1)];
    return out;
  },
  function malformOpt(_p, rnd) {
    const b = new PacketBuilder({ id: 0, qd: 1, ar: 1 }).question(["opt", "blocked", "test"], QTYPE.A);
    switch (randInt(rnd, 0, 7)) {
      case 0: b.name(["notroot"]).recordRaw(QTYPE.OPT, 1232, 0, 0, []); break; // owner not root
      case 1: b.pointer(12).recordRaw(QTYPE.OPT, 1232, 0, 0, []); break; // owner by pointer
      case 2: b.opt(1232, 0, [0, 8, 0, 50, 1, 2]); break; // option runs past the record
      case 3: b.opt(1232, 0, [0, 8, 0]); break; // option header cut
      case 4: b.u8(0).recordRaw(QTYPE.OPT, 1232, 0, 40, [0, 12, 0, 0]); break; // RDLENGTH lies
      case 5: b.opt(1232, randInt(rnd, 1, 255) << 16); break; // EDNS version > 0
      case 6: b.opt(0, 0xffffffff, randomBytes(rnd, randInt(rnd, 0, 20))); break; // odd fields
      default: {
        const two = new PacketBuilder({ id: 0, qd: 1, ar: 2 }).question(["two", "opt"]).opt().opt();
        return two.build();
      }
    }
    // Sometimes flip or substitute a few bytes of the malformed packet as well.
    return rnd() < 0.3 ? MUTATORS[randInt(rnd, 0, 1)](b.build(), rnd) : b.build();
  },
  function atBounds(_p, rnd) {
    // Around MAX_EDNS_OPTIONS options, or padded to around MAX_QUERY_BYTES bytes.
    const count = rnd() < 0.5 ? MAX_EDNS_OPTIONS + randInt(rnd, -2, 8) : 1;
    const options = Array.from({ length: count }, () => ({ code: randInt(rnd, 1, 20), data: Buffer.alloc(randInt(rnd, 0, 3)) }));
    const m: Message = { id: 0, flags: 0x0100, questions: [{ name: "bounds.blocked.test", type: QTYPE.A, class: 1 }], answers: [], authorities: [], additionals: [], edns: { udpSize: 4096, extRcode: 0, version: 0, flags: 0, options } };
    const base = encodeMessage(m).length;
    if (count === 1) options[0].data = Buffer.alloc(Math.max(0, MAX_QUERY_BYTES - base + randInt(rnd, -3, 3)));
    return encodeMessage(m);
  },
  function setFlags(p, rnd) {
    const out = Buffer.from(p);
    if (out.length < 4) return out;
    out[2] = randInt(rnd, 0, 255) & (rnd() < 0.7 ? 0x7f : 0xff); // random opcode/AA/TC/RD, sometimes QR
    out[3] = randInt(rnd, 0, 255);
    return out;
  },
  function splice(p, rnd) {
    const other = validQuery(rnd);
    const cut = randInt(rnd, 0, p.length);
    return Buffer.concat([p.subarray(0, cut), other.subarray(randInt(rnd, 0, other.length))]);
  },
];

/** A valid query put through one to three mutators. */
export function mutatedQuery(rnd: Rng): Buffer {
  let p = validQuery(rnd);
  for (let n = randInt(rnd, 1, 3); n > 0; n--) p = MUTATORS[randInt(rnd, 0, MUTATORS.length - 1)](p, rnd);
  return p;
}

/** The fuzz stream: 30% random bytes of 0–600 bytes, 10% valid queries, 60% mutated queries. */
export function fuzzPacket(rnd: Rng): Buffer {
  const r = rnd();
  if (r < 0.3) return randomBytes(rnd, randInt(rnd, 0, 600));
  if (r < 0.4) return validQuery(rnd);
  return mutatedQuery(rnd);
}

/**
 * Many questions that point into the middle of earlier labels: each decodes to a long name the
 * encoder cannot share, so echoing all of them would need far more than 64 KiB.
 */
export function amplifyingQuery(rnd: Rng): Buffer {
  const b = new PacketBuilder({ id: 0, flags: 0x0100 });
  const carriers: [number, number][] = [];
  let qd = 0;
  // Carriers first, then as many pointer questions as fit in the largest query the servers read.
  while (b.here < 1000) {
    const start = b.here;
    for (let l = 0; l < 4; l++) b.u8(60).bytes(Array.from({ length: 60 }, () => (rnd() < 0.08 ? 0 : randInt(rnd, 1, 40))));
    b.u8(0).u16(1).u16(1);
    carriers.push([start, b.here - start]);
    qd++;
  }
  const carrierBytes = b.build();
  for (const [start, len] of carriers) {
    for (let k = start + 1; k < start + len - 5; k++) {
      if (b.here + 6 > MAX_QUERY_BYTES) break;
      try {
        readName(carrierBytes, k);
      } catch {
        continue;
      }
      b.pointer(k).u16(1).u16(1);
      qd++;
    }
  }
  const out = b.build();
  out.writeUInt16BE(qd, 4);
  return out;
}
