// Reverse-lookup names (in-addr.arpa / ip6.arpa) decoded back to the address they stand for.

import { parseIPv4 } from "../../dns/ip.js";

const V4_SUFFIX = ".in-addr.arpa";
const V6_SUFFIX = ".ip6.arpa";

function hexNibble(c: number): number {
  if (c >= 0x30 && c <= 0x39) return c - 0x30;
  if (c >= 0x61 && c <= 0x66) return c - 0x61 + 10;
  if (c >= 0x41 && c <= 0x46) return c - 0x41 + 10;
  return -1;
}

/**
 * `4.3.2.1.in-addr.arpa` → 1.2.3.4 and the 32-nibble ip6.arpa form → 16 bytes; null for a
 * partial or malformed name. `name` is lower-case without a trailing dot (DnsContext.qname).
 */
export function reverseNameToIp(name: string): Uint8Array | null {
  if (name.endsWith(V4_SUFFIX)) {
    const parts = name.slice(0, -V4_SUFFIX.length).split(".");
    return parts.length === 4 ? parseIPv4(parts.reverse().join(".")) : null;
  }
  if (name.endsWith(V6_SUFFIX)) {
    const body = name.slice(0, -V6_SUFFIX.length);
    // 32 nibbles separated by 31 dots.
    if (body.length !== 63) return null;
    const out = new Uint8Array(16);
    for (let i = 0; i < 32; i++) {
      if (i > 0 && body.charCodeAt(i * 2 - 1) !== 0x2e) return null;
      const v = hexNibble(body.charCodeAt(i * 2));
      if (v < 0) return null;
      // Nibble i counts from the least significant end of the address.
      const byte = 15 - (i >> 1);
      out[byte] |= (i & 1) === 0 ? v : v << 4;
    }
    return out;
  }
  return null;
}
