// What the data plane hands the manager: the A/AAAA addresses of a NOERROR answer, read from the wire
// through the structural index (no decode), and the bounded intake they wait in. The intake holds one
// entry per address (a repeat coalesces, keeping the longest TTL); an address beyond its capacity is
// dropped and counted, so a query never waits for room. When an address lands in an empty intake the
// doorbell rings once, on the next turn of the event loop (never inside the query).

import { QTYPE } from "../../../dns/constants.js";
import { formatIP } from "../../../dns/ip.js";
import type { DnsResponse } from "../../../dns/response.js";
import { SECTION_ANSWER } from "../../../dns/view.js";
import type { Cell } from "../../../observability/metrics.js";

export interface Observation {
  family: 4 | 6;
  /** As RouterOS lists it (formatIP of the address). */
  address: string;
  /** Seconds the row should live; null: no RouterOS timeout (fixed_ttl 0). */
  ttl: number | null;
  /** The question name that brought it (for the row's comment). */
  domain: string;
}

/** An address waiting for the manager, with the sync-mode queries waiting for its first attempt. */
export interface Pending extends Observation {
  key: string;
  /** Failed attempts so far (transient failures). */
  attempts: number;
  waiters: (() => void)[] | null;
}

export const keyOf = (family: 4 | 6, address: string): string => `${family}|${address}`;

/** The longer of two lifetimes (null, no timeout, is the longest). */
export const longer = (a: number | null, b: number | null): number | null => (a === null || b === null ? null : Math.max(a, b));

/**
 * The answer's A (when `v4`) and AAAA (when `v6`) addresses with their record TTLs, the largest kept
 * for an address listed twice. Null when there is nothing to take (no response, not NOERROR, malformed).
 */
export function answerAddresses(resp: DnsResponse | null, v4: boolean, v6: boolean): Map<string, { family: 4 | 6; address: string; ttl: number }> | null {
  if (resp === null) return null;
  try {
    if (resp.rcode !== 0 || resp.answerCount === 0) return null;
    const wire = resp.toWire();
    const records = resp.index.records;
    let out: Map<string, { family: 4 | 6; address: string; ttl: number }> | null = null;
    for (let i = 0; i < records.length; i++) {
      const r = records[i];
      if (r.section !== SECTION_ANSWER) break;
      const data = r.fixed + 10;
      const len = r.end - data;
      let family: 4 | 6;
      if (r.type === QTYPE.A && len === 4 && v4) family = 4;
      else if (r.type === QTYPE.AAAA && len === 16 && v6) family = 6;
      else continue;
      const address = formatIP(wire.subarray(data, r.end));
      const ttl = wire.readUInt32BE(r.fixed + 4);
      const key = keyOf(family, address);
      out ??= new Map();
      const seen = out.get(key);
      if (seen === undefined) out.set(key, { family, address, ttl });
      else if (ttl > seen.ttl) seen.ttl = ttl;
    }
    return out;
  } catch {
    return null; // a malformed answer gives nothing
  }
}

export interface IntakeCounters {
  dropped: Cell;
  depth: Cell;
}

export class Intake {
  private readonly items = new Map<string, Pending>();
  private ringing = false;
  /** Set by the manager's actor while it runs (machines/ros-address-list.machine.ts `doorbell`). */
  doorbell: (() => void) | null = null;

  constructor(
    readonly capacity: number,
    private readonly counters: IntakeCounters,
  ) {}

  get size(): number {
    return this.items.size;
  }

  /** Queues `obs` (or merges it into the same address waiting already); false when dropped for lack of room. */
  offer(key: string, obs: Observation, waiter: (() => void) | null): boolean {
    const seen = this.items.get(key);
    if (seen !== undefined) {
      seen.ttl = longer(seen.ttl, obs.ttl);
      if (waiter) (seen.waiters ??= []).push(waiter);
      return true;
    }
    if (this.items.size >= this.capacity) {
      this.counters.dropped.value++;
      return false;
    }
    this.items.set(key, { ...obs, key, attempts: 0, waiters: waiter ? [waiter] : null });
    this.counters.depth.value = this.items.size;
    if (this.items.size === 1) this.ring();
    return true;
  }

  /** Keeps an address whose call failed transiently (the retry backlog); false when dropped for lack of room. */
  putBack(p: Pending): boolean {
    const seen = this.items.get(p.key);
    if (seen !== undefined) {
      seen.ttl = longer(seen.ttl, p.ttl);
      seen.attempts = Math.max(seen.attempts, p.attempts);
      return true;
    }
    if (this.items.size >= this.capacity) {
      this.counters.dropped.value++;
      return false;
    }
    this.items.set(p.key, p);
    this.counters.depth.value = this.items.size;
    return true;
  }

  /** The oldest `n` addresses, taken out. */
  take(n: number): Pending[] {
    const out: Pending[] = [];
    for (const [key, p] of this.items) {
      if (out.length >= n) break;
      out.push(p);
      this.items.delete(key);
    }
    this.counters.depth.value = this.items.size;
    return out;
  }

  /** Empties the intake (the plugin goes): every waiting query goes on. */
  clear(): void {
    for (const p of this.items.values()) release(p);
    this.items.clear();
    this.counters.depth.value = 0;
  }

  private ring(): void {
    if (this.ringing || this.doorbell === null) return;
    this.ringing = true;
    setImmediate(() => {
      this.ringing = false;
      this.doorbell?.();
    });
  }
}

/** Lets the sync-mode queries waiting for `p` go on. */
export function release(p: Pending): void {
  const waiters = p.waiters;
  p.waiters = null;
  if (waiters) for (const w of waiters) w();
}
