// Builders and readers for the record data we synthesize or inspect.
// RDATA here is always uncompressed (see message.ts).

import { QTYPE } from "./constants.js";
import type { ResourceRecord } from "./message.js";
import { readName } from "./name.js";
import { WireWriter } from "./writer.js";

const w = new WireWriter();

export function nameRdata(name: string): Buffer {
  w.reset(false);
  w.name(name);
  return w.finish();
}

export function soaRdata(soa: SoaData): Buffer {
  w.reset(false);
  w.name(soa.mname);
  w.name(soa.rname);
  w.u32(soa.serial);
  w.u32(soa.refresh);
  w.u32(soa.retry);
  w.u32(soa.expire);
  w.u32(soa.minimum);
  return w.finish();
}

export interface SoaData {
  mname: string;
  rname: string;
  serial: number;
  refresh: number;
  retry: number;
  expire: number;
  minimum: number;
}

/** Reads an uncompressed name at `offset` of a record's data. */
export function rdataName(data: Buffer, offset = 0): string {
  return readName(data, offset).name;
}

export function readSoa(data: Buffer): SoaData {
  const m = readName(data, 0);
  const r = readName(data, m.end);
  const p = r.end;
  return {
    mname: m.name,
    rname: r.name,
    serial: data.readUInt32BE(p),
    refresh: data.readUInt32BE(p + 4),
    retry: data.readUInt32BE(p + 8),
    expire: data.readUInt32BE(p + 12),
    minimum: data.readUInt32BE(p + 16),
  };
}

/** The placeholder SOA we attach to synthesized NODATA answers so clients cache them briefly. */
export function syntheticSoa(zone: string, ttl: number): ResourceRecord {
  return {
    name: zone,
    type: QTYPE.SOA,
    class: 1,
    ttl,
    data: soaRdata({ mname: "ns.sluice.invalid", rname: "hostmaster.sluice.invalid", serial: 1, refresh: 1800, retry: 900, expire: 604800, minimum: ttl }),
  };
}

export function addressRecord(name: string, ip: Uint8Array, ttl: number): ResourceRecord {
  return { name, type: ip.length === 4 ? QTYPE.A : QTYPE.AAAA, class: 1, ttl, data: Buffer.from(ip) };
}
