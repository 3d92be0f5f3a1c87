// The data path of `ipset` and `nftset`: the answer's A and AAAA records, masked to their prefix,
// queued for the writer unless written recently. Reads the response's wire bytes in place (nothing is
// decoded or copied), one clock read per response with addresses; no I/O, no actor.

import { QTYPE } from "../../../dns/constants.js";
import { SECTION_ANSWER, type RecordSlot } from "../../../dns/view.js";
import type { DnsContext } from "../../../engine/context.js";
import type { Cell } from "../../../observability/metrics.js";
import type { ClockShift } from "../../../registry/services.js";
import type { PrefixKey, RecentPrefixes, SetQueue } from "./queue.js";
import type { TimeoutPolicy } from "./settings.js";

/** A prefix without a timeout of ours is queued again after this long at the earliest (a set's own default timeout is refreshed). */
export const REWRITE_WITHOUT_TIMEOUT_MS = 60_000;

export interface ObserveOptions {
  /** Prefix lengths; null when the plugin has no target for that family. */
  mask4: number | null;
  mask6: number | null;
  timeout: TimeoutPolicy;
  queue: SetQueue;
  recent: RecentPrefixes;
  clockShift: ClockShift;
  entries: Cell;
  dropped: Cell;
}

/** The masked IPv4 address as an unsigned number. */
const v4Mask = (bits: number): number => (bits === 0 ? 0 : (0xffffffff << (32 - bits)) >>> 0);

/** The bytes of an IPv6 address up to the mask (the last one masked), as a latin1 string. */
function v6Key(wire: Buffer, at: number, bits: number): string {
  const whole = bits >>> 3;
  const rest = bits & 7;
  const head = wire.toString("latin1", at, at + whole);
  return rest === 0 ? head : head + String.fromCharCode(wire[at + whole] & ((0xff << (8 - rest)) & 0xff));
}

export function observer(o: ObserveOptions): (dns: DnsContext) => void {
  const mask4 = o.mask4 === null ? 0 : v4Mask(o.mask4);
  const policy = o.timeout;
  const timeoutOf = (ttl: number): number => (policy.kind === "none" ? 0 : policy.kind === "fixed" ? policy.seconds : Math.min(policy.max, Math.max(policy.min, ttl)));
  // Half the entry's timeout: a prefix still in answers is written again before its entry runs out.
  const keepFor = (timeout: number): number => (timeout === 0 ? REWRITE_WITHOUT_TIMEOUT_MS : Math.max(1000, timeout * 500));

  const offer = (key: PrefixKey, ttl: number, now: number): void => {
    if (o.recent.fresh(key, now)) return;
    const timeout = timeoutOf(ttl);
    if (!o.queue.offer({ key, timeout })) {
      o.dropped.value++;
      return;
    }
    o.recent.remember(key, now + keepFor(timeout));
    o.entries.value++;
  };

  return (dns) => {
    const resp = dns.response;
    if (resp === null || resp.answerCount === 0) return;
    let wire: Buffer;
    let records: readonly RecordSlot[];
    try {
      wire = resp.toWire();
      records = resp.index.records;
    } catch {
      return; // a malformed answer has nothing to add
    }
    let now = -1;
    for (let i = 0; i < records.length; i++) {
      const r = records[i];
      if (r.section !== SECTION_ANSWER) break;
      const data = r.fixed + 10;
      const len = r.end - data;
      if (r.type === QTYPE.A && len === 4 && o.mask4 !== null) {
        if (now < 0) now = performance.now() + o.clockShift.ms;
        offer((wire.readUInt32BE(data) & mask4) >>> 0, wire.readUInt32BE(r.fixed + 4), now);
      } else if (r.type === QTYPE.AAAA && len === 16 && o.mask6 !== null) {
        if (now < 0) now = performance.now() + o.clockShift.ms;
        offer(v6Key(wire, data, o.mask6), wire.readUInt32BE(r.fixed + 4), now);
      }
    }
  };
}
