// Builds PROXY protocol v2 headers the way a load balancer (dnsdist) writes them, for tests.

import { parseIP } from "../../src/dns/ip.js";
import { PROXY_V2_SIGNATURE } from "../../src/plugins/servers/proxy-protocol.js";

export interface HeaderSpec {
  source?: string;
  sourcePort?: number;
  destination?: string;
  destinationPort?: number;
  /** PROXY (default) or LOCAL (a health check: no client). */
  command?: "proxy" | "local";
  transport?: "stream" | "dgram";
  /** Extra bytes after the addresses (TLVs). */
  tlvs?: Buffer;
  /** Overrides the version nibble (2). */
  version?: number;
}

export function proxyHeader(spec: HeaderSpec = {}): Buffer {
  const src = parseIP(spec.source ?? "192.0.2.7");
  const dst = parseIP(spec.destination ?? (src && src.length === 16 ? "::1" : "127.0.0.1"));
  if (!src || !dst || src.length !== dst.length) throw new Error("bad addresses");
  const v6 = src.length === 16;
  const addr = Buffer.alloc(v6 ? 36 : 12);
  Buffer.from(src).copy(addr, 0);
  Buffer.from(dst).copy(addr, v6 ? 16 : 4);
  addr.writeUInt16BE(spec.sourcePort ?? 40000, v6 ? 32 : 8);
  addr.writeUInt16BE(spec.destinationPort ?? 53, v6 ? 34 : 10);
  const tlvs = spec.tlvs ?? Buffer.alloc(0);
  const fixed = Buffer.alloc(4);
  fixed[0] = ((spec.version ?? 2) << 4) | (spec.command === "local" ? 0 : 1);
  fixed[1] = ((v6 ? 2 : 1) << 4) | (spec.transport === "dgram" ? 2 : 1);
  fixed.writeUInt16BE(addr.length + tlvs.length, 2);
  return Buffer.concat([PROXY_V2_SIGNATURE, fixed, addr, tlvs]);
}

/** One TLV: type, 2-byte length, value. */
export function tlv(type: number, value: Buffer): Buffer {
  const head = Buffer.alloc(3);
  head[0] = type;
  head.writeUInt16BE(value.length, 1);
  return Buffer.concat([head, value]);
}
