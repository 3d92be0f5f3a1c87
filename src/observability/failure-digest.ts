// Failures that must not write a line each (an outage would log from the DNS thread per query): the
// first failure of each reason in a period is logged at once with its details, the rest are counted,
// and one line sums them up when the period ends. At debug level every failure is logged. A period
// starts with a failure and lasts `periodMs`; with no failure nothing is logged and no timer runs.
// Used by the servers' failed queries and the hook executors' failed calls.

import type { Logger } from "./logger.js";

export interface DigestWords {
  /** Message of the per-failure debug line. */
  debug: string;
  /** Message of the first failure of a reason in a period. */
  first: string;
  /** Message of the closing line: `total` more failures, `list` as "reason: n, reason: n". */
  more(total: number, list: string, seconds: number): string;
}

export class FailureDigest {
  /** Failures of each reason in the current period (the first was logged). */
  private readonly counts = new Map<string, number>();
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly log: Logger,
    private readonly periodMs: number,
    private readonly words: DigestWords,
  ) {}

  /** One failure; `details` builds the line's fields, called only when a line is written. */
  record(reason: string, details: () => Record<string, unknown>): void {
    if (this.log.isLevelEnabled("debug")) this.log.debug({ reason, ...details() }, this.words.debug);
    const n = this.counts.get(reason) ?? 0;
    this.counts.set(reason, n + 1);
    if (n > 0) return;
    this.log.warn({ reason, ...details(), summary_every_ms: this.periodMs }, this.words.first);
    if (this.timer === null) {
      this.timer = setTimeout(() => this.summarise(), this.periodMs);
      this.timer.unref();
    }
  }

  /** Ends the period: one line for the failures not logged one by one. */
  private summarise(): void {
    this.timer = null;
    const more = [...this.counts].filter(([, n]) => n > 1).map(([reason, n]) => [reason, n - 1] as const);
    this.counts.clear();
    if (more.length === 0) return;
    const total = more.reduce((sum, [, n]) => sum + n, 0);
    this.log.warn({ failed: Object.fromEntries(more), period_ms: this.periodMs }, this.words.more(total, more.map(([r, n]) => `${r}: ${n}`).join(", "), this.periodMs / 1000));
  }

  /** The last summary now (the owner is going away). */
  close(): void {
    if (this.timer === null) return;
    clearTimeout(this.timer);
    this.summarise();
  }
}
