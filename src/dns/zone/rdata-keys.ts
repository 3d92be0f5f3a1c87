// Text forms of the key and fingerprint types: DS/CDS, DNSKEY/CDNSKEY, SSHFP, TLSA/SMIMEA.

import { QTYPE } from "../constants.js";
import type { RdataSpec } from "./rdata-basic.js";
import type { RdataReader } from "./reader.js";

/** DNSSEC algorithm mnemonics (IANA), accepted where a number is expected. */
const ALGORITHMS: ReadonlyMap<string, number> = new Map([
  ["RSAMD5", 1], ["DH", 2], ["DSA", 3], ["RSASHA1", 5], ["DSA-NSEC3-SHA1", 6], ["RSASHA1-NSEC3-SHA1", 7],
  ["RSASHA256", 8], ["RSASHA512", 10], ["ECC-GOST", 12], ["ECDSAP256SHA256", 13], ["ECDSAP384SHA384", 14],
  ["ED25519", 15], ["ED448", 16], ["INDIRECT", 252], ["PRIVATEDNS", 253], ["PRIVATEOID", 254],
]);

function algorithm(r: RdataReader): number {
  const t = r.peek();
  const known = t && !t.quoted ? ALGORITHMS.get(t.text.toUpperCase()) : undefined;
  if (known === undefined) return r.u8("algorithm");
  r.next();
  return known;
}

function ds(type: string): RdataSpec {
  return {
    usage: `${type} needs a key tag, an algorithm, a digest type and a hex digest`,
    parse(r, w) {
      w.u16(r.u16("key tag"));
      w.u8(algorithm(r));
      w.u8(r.u8("digest type"));
      w.bytes(r.hexRest("digest"));
    },
  };
}

function dnskey(type: string): RdataSpec {
  return {
    usage: `${type} needs flags, a protocol, an algorithm and a base64 key`,
    parse(r, w) {
      w.u16(r.u16("flags"));
      w.u8(r.u8("protocol"));
      w.u8(algorithm(r));
      w.bytes(r.base64Rest("key"));
    },
  };
}

const sshfp: RdataSpec = {
  usage: "SSHFP needs an algorithm, a fingerprint type and a hex fingerprint",
  parse(r, w) {
    w.u8(r.u8("algorithm"));
    w.u8(r.u8("fingerprint type"));
    w.bytes(r.hexRest("fingerprint"));
  },
};

function tlsa(type: string): RdataSpec {
  return {
    usage: `${type} needs a usage, a selector, a matching type and hex data`,
    parse(r, w) {
      w.u8(r.u8("usage"));
      w.u8(r.u8("selector"));
      w.u8(r.u8("matching type"));
      w.bytes(r.hexRest("certificate data"));
    },
  };
}

export const KEY_TYPES: readonly [number, RdataSpec][] = [
  [QTYPE.DS, ds("DS")],
  [QTYPE.CDS, ds("CDS")],
  [QTYPE.DLV, ds("DLV")],
  [QTYPE.DNSKEY, dnskey("DNSKEY")],
  [QTYPE.CDNSKEY, dnskey("CDNSKEY")],
  [QTYPE.SSHFP, sshfp],
  [QTYPE.TLSA, tlsa("TLSA")],
  [QTYPE.SMIMEA, tlsa("SMIMEA")],
];
