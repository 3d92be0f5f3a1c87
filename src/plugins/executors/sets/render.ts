// A batch as the text the tools read on stdin: `ipset restore -exist` lines, or an `nft -f -` script.
// Names in it were checked against the schemas' patterns, so no value can start another command.

import { formatIP } from "../../../dns/ip.js";
import type { PrefixKey, QueuedEntry } from "./queue.js";

/** Where one address family goes, and its prefix length. */
export interface Target<N> {
  name: N;
  mask: number;
}

/** `a.b.c.0/24`, `2001:db8::/32`; a full-length prefix is the bare address (what a set without intervals takes). */
export function prefixText(key: PrefixKey, mask: number): string {
  if (typeof key === "number") {
    const text = `${key >>> 24}.${(key >>> 16) & 0xff}.${(key >>> 8) & 0xff}.${key & 0xff}`;
    return mask === 32 ? text : `${text}/${mask}`;
  }
  const bytes = new Uint8Array(16);
  for (let i = 0; i < key.length; i++) bytes[i] = key.charCodeAt(i);
  const text = formatIP(bytes);
  return mask === 128 ? text : `${text}/${mask}`;
}

/** The batch split by family, each entry once (the latest timeout wins). */
export function byFamily(batch: readonly QueuedEntry[]): { v4: QueuedEntry[]; v6: QueuedEntry[] } {
  const v4 = new Map<PrefixKey, QueuedEntry>();
  const v6 = new Map<PrefixKey, QueuedEntry>();
  for (const e of batch) (typeof e.key === "number" ? v4 : v6).set(e.key, e);
  return { v4: [...v4.values()], v6: [...v6.values()] };
}

/** `add <set> <prefix> [timeout <s>]` lines; `-exist` makes an entry already there take the new timeout. */
export function ipsetLines(batch: readonly QueuedEntry[], v4: Target<string> | null, v6: Target<string> | null): string {
  const { v4: four, v6: six } = byFamily(batch);
  let out = "";
  const add = (entries: QueuedEntry[], t: Target<string> | null): void => {
    if (t === null) return;
    for (const e of entries) out += `add ${t.name} ${prefixText(e.key, t.mask)}${e.timeout > 0 ? ` timeout ${e.timeout}` : ""}\n`;
  };
  add(four, v4);
  add(six, v6);
  return out;
}

export interface NftSet {
  family: string;
  table: string;
  set: string;
}

/**
 * One transaction: per set, `add element` (so each entry exists), and for entries with a timeout
 * `delete element` and `add element` again, which gives an entry already there its new timeout (nft's
 * add leaves an existing element's timeout as it was). A failure anywhere applies nothing.
 */
export function nftScript(batch: readonly QueuedEntry[], v4: Target<NftSet> | null, v6: Target<NftSet> | null): string {
  const { v4: four, v6: six } = byFamily(batch);
  let out = "";
  const add = (entries: QueuedEntry[], t: Target<NftSet> | null): void => {
    if (t === null || entries.length === 0) return;
    const where = `${t.name.family} ${t.name.table} ${t.name.set}`;
    const elements = (list: QueuedEntry[]): string => list.map((e) => `${prefixText(e.key, t.mask)}${e.timeout > 0 ? ` timeout ${e.timeout}s` : ""}`).join(", ");
    out += `add element ${where} { ${elements(entries)} }\n`;
    const timed = entries.filter((e) => e.timeout > 0);
    if (timed.length === 0) return;
    out += `delete element ${where} { ${timed.map((e) => prefixText(e.key, t.mask)).join(", ")} }\n`;
    out += `add element ${where} { ${elements(timed)} }\n`;
  };
  add(four, v4);
  add(six, v6);
  return out;
}
