// Reads the EDNS option codes of a response from its wire form, so pass-through answers are not decoded.

import type { DnsResponse } from "../../dns/response.js";

/** Option codes in the response's OPT record, in order; null when it has no OPT record. */
export function responseOptionCodes(resp: DnsResponse): number[] | null {
  const index = resp.index;
  if (index.opt < 0) return null;
  const wire = resp.toWire();
  const opt = index.records[index.opt];
  const codes: number[] = [];
  // indexMessage bounded the record; a truncated option header simply ends the walk.
  for (let pos = opt.fixed + 10; pos + 4 <= opt.end; pos += 4 + wire.readUInt16BE(pos + 2)) codes.push(wire.readUInt16BE(pos));
  return codes;
}
