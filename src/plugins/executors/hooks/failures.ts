// What the hook executors (http_request, script) share: error_mode, their failure counters and a
// failure log that never writes a line per query. As for failed queries (src/plugins/servers/
// failure-log.ts), the first failure of each reason in a period is logged at once with its details,
// the rest are counted, and one line sums them up when the period (`log.failure_summary`) ends; at
// debug level every failure is logged.

import type { Logger } from "../../../observability/logger.js";
import type { Cell } from "../../../observability/metrics.js";
import { Step } from "../../../engine/types.js";

export type ErrorMode = "continue" | "stop" | "fail";
export const ERROR_MODES: readonly ErrorMode[] = ["continue", "stop", "fail"];

export const errorModeSchema = { type: "string", enum: ERROR_MODES, default: "continue" } as const;

/** A hook's failure as the query sees it. */
export class HookError extends Error {
  constructor(
    message: string,
    readonly reason: string,
  ) {
    super(message);
    this.name = "HookError";
  }
}

/** The step error_mode gives for a failure: continue → Next, stop → Stop, fail → the error (SERVFAIL in a query). */
export function failedStep(mode: ErrorMode, err: HookError): Step {
  if (mode === "continue") return Step.Next;
  if (mode === "stop") return Step.Stop;
  throw err;
}

export class HookFailureLog {
  private readonly counts = new Map<string, number>();
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly log: Logger,
    /** The log line's message, e.g. "http_request failed". */
    private readonly title: string,
    private readonly periodMs: number,
    /** The counter of each reason (cells made on first use). */
    private readonly counter: (reason: string) => Cell,
  ) {}

  record(err: HookError, details: Record<string, unknown> = {}): void {
    this.counter(err.reason).value++;
    if (this.log.isLevelEnabled("debug")) this.log.debug({ reason: err.reason, err: err.message, ...details }, this.title);
    const n = this.counts.get(err.reason) ?? 0;
    this.counts.set(err.reason, n + 1);
    if (n > 0) return;
    this.log.warn({ reason: err.reason, err: err.message, ...details, summary_every_ms: this.periodMs }, this.title);
    if (this.timer === null) {
      this.timer = setTimeout(() => this.summarise(), this.periodMs);
      this.timer.unref();
    }
  }

  private summarise(): void {
    this.timer = null;
    const more = [...this.counts].filter(([, n]) => n > 1).map(([reason, n]) => [reason, n - 1] as const);
    this.counts.clear();
    if (more.length === 0) return;
    const total = more.reduce((sum, [, n]) => sum + n, 0);
    this.log.warn({ failed: Object.fromEntries(more), period_ms: this.periodMs }, `${this.title}: ${total} more in the last ${this.periodMs / 1000}s (${more.map(([r, n]) => `${r}: ${n}`).join(", ")})`);
  }

  /** The last summary now (the plugin is going away). */
  close(): void {
    if (this.timer === null) return;
    clearTimeout(this.timer);
    this.summarise();
  }
}
