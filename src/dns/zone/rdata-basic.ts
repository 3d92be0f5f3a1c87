// Text forms of the everyday record types: addresses, name pointers, MX-like, SRV, SOA, TXT,
// HINFO, NAPTR, CAA and URI.

import { QTYPE } from "../constants.js";
import { parseIPv4, parseIPv6 } from "../ip.js";
import type { WireWriter } from "../writer.js";
import type { RdataReader } from "./reader.js";

export interface RdataSpec {
  /** Said when fields are missing. */
  usage: string;
  parse(r: RdataReader, w: WireWriter): void;
}

const address: RdataSpec = {
  usage: "A needs an IPv4 address",
  parse(r: RdataReader, w) {
    const t = r.next();
    const ip = parseIPv4(t.text);
    if (!ip) r.fail(`needs an IPv4 address, got '${t.text}'`, t);
    w.bytes(ip);
  },
};

const address6: RdataSpec = {
  usage: "AAAA needs an IPv6 address",
  parse(r: RdataReader, w) {
    const t = r.next();
    const ip = t.text.includes(":") ? parseIPv6(t.text) : null;
    if (!ip) r.fail(`needs an IPv6 address, got '${t.text}'`, t);
    w.bytes(ip);
  },
};

function oneName(type: string, what: string): RdataSpec {
  return {
    usage: `${type} needs ${what}`,
    parse(r, w) {
      w.bytes(r.name());
    },
  };
}

/** MX, AFSDB, RT, KX: a 16-bit number then a name. */
function numberAndName(type: string, num: string, name: string): RdataSpec {
  return {
    usage: `${type} needs a ${num} and ${name}`,
    parse(r, w) {
      w.u16(r.u16(num));
      w.bytes(r.name());
    },
  };
}

/** TXT and SPF: one or more character-strings. */
function strings(type: string): RdataSpec {
  return {
    usage: `${type} needs at least one string`,
    parse(r, w) {
      if (r.remaining === 0) r.next();
      while (r.remaining > 0) {
        const s = r.charString("string");
        w.u8(s.length);
        w.bytes(s);
      }
    },
  };
}

const srv: RdataSpec = {
  usage: "SRV needs a priority, a weight, a port and a target",
  parse(r, w) {
    w.u16(r.u16("priority"));
    w.u16(r.u16("weight"));
    w.u16(r.u16("port"));
    w.bytes(r.name());
  },
};

const soa: RdataSpec = {
  usage: "SOA needs mname, rname, serial, refresh, retry, expire and minimum",
  parse(r, w) {
    w.bytes(r.name());
    w.bytes(r.name());
    w.u32(r.u32("serial"));
    w.u32(r.duration("refresh"));
    w.u32(r.duration("retry"));
    w.u32(r.duration("expire"));
    w.u32(r.duration("minimum"));
  },
};

const hinfo: RdataSpec = {
  usage: "HINFO needs a CPU and an OS string",
  parse(r, w) {
    for (const what of ["CPU", "OS"]) {
      const s = r.charString(what);
      w.u8(s.length);
      w.bytes(s);
    }
  },
};

const naptr: RdataSpec = {
  usage: "NAPTR needs order, preference, flags, services, regexp and replacement",
  parse(r, w) {
    w.u16(r.u16("order"));
    w.u16(r.u16("preference"));
    for (const what of ["flags", "services", "regexp"]) {
      const s = r.charString(what);
      w.u8(s.length);
      w.bytes(s);
    }
    w.bytes(r.name());
  },
};

const caa: RdataSpec = {
  usage: "CAA needs flags, a tag and a value",
  parse(r: RdataReader, w) {
    const flags = r.u8("flags");
    const tagToken = r.next();
    if (tagToken.quoted || !/^[A-Za-z0-9]{1,15}$/.test(tagToken.text)) {
      r.fail(`tag must be 1-15 letters or digits, got '${tagToken.text}'`, tagToken);
    }
    const value = r.text();
    w.u8(flags);
    w.u8(tagToken.text.length);
    w.bytes(Buffer.from(tagToken.text, "latin1"));
    w.bytes(value);
  },
};

const uri: RdataSpec = {
  usage: "URI needs a priority, a weight and a target",
  parse(r: RdataReader, w) {
    w.u16(r.u16("priority"));
    w.u16(r.u16("weight"));
    const target = r.text();
    if (target.length === 0) r.fail("target must not be empty");
    w.bytes(target);
  },
};

export const BASIC_TYPES: readonly [number, RdataSpec][] = [
  [QTYPE.A, address],
  [QTYPE.AAAA, address6],
  [QTYPE.NS, oneName("NS", "a name server")],
  [QTYPE.CNAME, oneName("CNAME", "a target name")],
  [QTYPE.PTR, oneName("PTR", "a target name")],
  [QTYPE.DNAME, oneName("DNAME", "a target name")],
  [QTYPE.MB, oneName("MB", "a mailbox host")],
  [QTYPE.MG, oneName("MG", "a mailbox")],
  [QTYPE.MR, oneName("MR", "a mailbox")],
  [QTYPE.MX, numberAndName("MX", "preference", "an exchange")],
  [QTYPE.AFSDB, numberAndName("AFSDB", "subtype", "a hostname")],
  [QTYPE.RT, numberAndName("RT", "preference", "an intermediate host")],
  [QTYPE.KX, numberAndName("KX", "preference", "an exchanger")],
  [QTYPE.TXT, strings("TXT")],
  [QTYPE.SPF, strings("SPF")],
  [QTYPE.SRV, srv],
  [QTYPE.SOA, soa],
  [QTYPE.HINFO, hinfo],
  [QTYPE.NAPTR, naptr],
  [QTYPE.CAA, caa],
  [QTYPE.URI, uri],
];
