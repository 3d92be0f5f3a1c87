// EDNS Client Subnet (RFC 7871) option: FAMILY, SOURCE PREFIX, SCOPE PREFIX, ADDRESS (truncated).

import { EDNS_OPTION } from "./constants.js";
import type { Edns, EdnsOption } from "./message.js";
import { maskIP } from "./ip.js";

export interface ClientSubnet {
  /** 1 = IPv4, 2 = IPv6. */
  family: 1 | 2;
  sourcePrefix: number;
  scopePrefix: number;
  /** Full-width address (4 or 16 bytes), bits after sourcePrefix zeroed. */
  address: Uint8Array;
}

/** Decodes an ECS option's data; null when it is malformed. */
export function decodeEcs(data: Uint8Array): ClientSubnet | null {
  if (data.length < 4) return null;
  const family = (data[0] << 8) | data[1];
  if (family !== 1 && family !== 2) return null;
  const width = family === 1 ? 4 : 16;
  const sourcePrefix = data[2];
  const scopePrefix = data[3];
  if (sourcePrefix > width * 8 || scopePrefix > width * 8) return null;
  const addrLen = data.length - 4;
  if (addrLen !== Math.ceil(sourcePrefix / 8)) return null;
  const address = new Uint8Array(width);
  address.set(data.subarray(4));
  return { family, sourcePrefix, scopePrefix, address: maskIP(address, sourcePrefix) };
}

export function encodeEcs(subnet: ClientSubnet): Buffer {
  const addrLen = Math.ceil(subnet.sourcePrefix / 8);
  const out = Buffer.alloc(4 + addrLen);
  out.writeUInt16BE(subnet.family, 0);
  out[2] = subnet.sourcePrefix;
  out[3] = subnet.scopePrefix;
  out.set(maskIP(subnet.address, subnet.sourcePrefix).subarray(0, addrLen), 4);
  return out;
}

/** A subnet for `ip` (4 or 16 bytes) cut to `prefix` bits, scope 0. */
export function subnetFor(ip: Uint8Array, prefix: number): ClientSubnet {
  const family = ip.length === 4 ? 1 : 2;
  const bits = Math.min(prefix, ip.length * 8);
  return { family, sourcePrefix: bits, scopePrefix: 0, address: maskIP(ip, bits) };
}

export function findEcs(edns: Edns | null): EdnsOption | undefined {
  return edns?.options.find((o) => o.code === EDNS_OPTION.ECS);
}
