// Negative answers Sluice makes up itself (black_hole nxdomain/nodata, `reject nxdomain|nodata`, the
// NODATA of hosts and ddr) carry an SOA in the authority section, so that clients and resolvers in
// front of Sluice cache them (RFC 2308 §5: for min(SOA TTL, SOA MINIMUM); both are the given TTL).
//
// The SOA's owner is the question name itself: a pointer to offset 12, like every record block of
// reply.ts, so the block is made once per TTL and copied into each reply as it is. The parent name
// would claim an SOA for a real zone (a resolver in front could cache `example.com SOA
// ns.sluice.invalid.` and answer it later for the unblocked parent); the query's own name is the
// one being refused anyway. MNAME/RNAME are under `.invalid` (RFC 6761), the serial is fixed.

import { QTYPE } from "./constants.js";
import { soaRdata, SYNTHETIC_SOA } from "./rdata.js";
import { recordBlock, type RecordBlock } from "./reply.js";

/** TTL of synthesised negative answers when the configuration does not say. */
export const DEFAULT_NEGATIVE_TTL = 300;

/** RFC 2181 §8: TTLs are 31-bit. */
export const MAX_TTL = 0x7fffffff;

const blocks = new Map<number, RecordBlock>();

/** The authority block of a synthesised negative answer: one SOA, TTL and MINIMUM `ttl`, owned by the question name. */
export function negativeSoaBlock(ttl: number): RecordBlock {
  let block = blocks.get(ttl);
  if (block === undefined) {
    block = recordBlock([{ type: QTYPE.SOA, ttl, data: soaRdata({ ...SYNTHETIC_SOA, minimum: ttl }) }]);
    blocks.set(ttl, block);
  }
  return block;
}
