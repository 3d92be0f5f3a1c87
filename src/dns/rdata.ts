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

/** SvcParamKeys (RFC 9460 §14.3.2, RFC 9461 for dohpath) that Sluice writes itself. */
export const SVC_KEY = { alpn: 1, port: 3, ipv4hint: 4, ipv6hint: 6, dohpath: 7 } as const;

/** SVCB/HTTPS data (RFC 9460 §2.2): priority, the target uncompressed, then the params in key order. */
export function svcbRdata(priority: number, target: string, params: ReadonlyMap<number, Uint8Array>): Buffer {
  w.reset(false);
  w.u16(priority);
  w.name(target);
  for (const key of [...params.keys()].sort((a, b) => a - b)) {
    const value = params.get(key) as Uint8Array;
    w.u16(key);
    w.u16(value.length);
    w.bytes(value);
  }
  return w.finish();
}

/** An `alpn` SvcParam value: each protocol id with its length byte. */
export function alpnValue(ids: readonly string[]): Buffer {
  return Buffer.concat(ids.map((id) => Buffer.concat([Buffer.from([id.length]), Buffer.from(id, "latin1")])));
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

/** The fields of the placeholder SOA of synthesized negative answers (MINIMUM is their TTL). */
export const SYNTHETIC_SOA = { mname: "ns.sluice.invalid", rname: "hostmaster.sluice.invalid", serial: 1, refresh: 1800, retry: 900, expire: 604800 } as const;

/** The placeholder SOA we attach to synthesized NODATA answers so clients cache them briefly. */
export function syntheticSoa(zone: string, ttl: number): ResourceRecord {
  return { name: zone, type: QTYPE.SOA, class: 1, ttl, data: soaRdata({ ...SYNTHETIC_SOA, minimum: ttl }) };
}

export function addressRecord(name: string, ip: Uint8Array, ttl: number): ResourceRecord {
  return { name, type: ip.length === 4 ? QTYPE.A : QTYPE.AAAA, class: 1, ttl, data: Buffer.from(ip) };
}
