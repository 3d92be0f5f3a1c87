// What a probe found for an address, remembered for a while (successes `ttl`, failures `failure_ttl`)
// in a bounded map whose order is recency order: a hit moves its entry to the end, and an insert over
// the bound drops the least recently used.

import type { Cell } from "../../../observability/metrics.js";

/** A probe's verdict: connected after `ms`, or did not connect by any method. */
export type Score = { ok: true; ms: number } | { ok: false };

interface Entry {
  score: Score;
  /** Monotonic ms (clock shift included). */
  expires: number;
}

export class ScoreCache {
  private readonly map = new Map<string, Entry>();

  constructor(
    private readonly size: number,
    private readonly ttlMs: number,
    private readonly failureTtlMs: number,
    private readonly entries: Cell,
  ) {}

  get(address: string, now: number): Score | undefined {
    const e = this.map.get(address);
    if (e === undefined) return undefined;
    this.map.delete(address);
    if (e.expires <= now) {
      this.entries.value = this.map.size;
      return undefined;
    }
    this.map.set(address, e);
    return e.score;
  }

  set(address: string, score: Score, now: number): void {
    const ttl = score.ok ? this.ttlMs : this.failureTtlMs;
    this.map.delete(address);
    if (ttl <= 0) {
      this.entries.value = this.map.size;
      return;
    }
    this.map.set(address, { score, expires: now + ttl });
    if (this.map.size > this.size) {
      const oldest = this.map.keys().next();
      if (oldest.done !== true) this.map.delete(oldest.value);
    }
    this.entries.value = this.map.size;
  }

  clear(): void {
    this.map.clear();
    this.entries.value = 0;
  }
}
