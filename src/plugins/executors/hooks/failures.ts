// What the hook executors (http_request, script) share: error_mode, their failure counters and a
// failure log that never writes a line per query. As for failed queries (src/plugins/servers/
// failure-log.ts), the first failure of each reason in a period is logged at once with its details,
// the rest are counted, and one line sums them up when the period (`log.failure_summary`) ends; at
// debug level every failure is logged.

import { FailureDigest } from "../../../observability/failure-digest.js";
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
  private readonly digest: FailureDigest;

  constructor(
    log: Logger,
    /** The log line's message, e.g. "http_request failed". */
    title: string,
    periodMs: number,
    /** The counter of each reason (cells made on first use). */
    private readonly counter: (reason: string) => Cell,
  ) {
    this.digest = new FailureDigest(log, periodMs, { debug: title, first: title, more: (total, list, seconds) => `${title}: ${total} more in the last ${seconds}s (${list})` });
  }

  record(err: HookError, details: Record<string, unknown> = {}): void {
    this.counter(err.reason).value++;
    this.digest.record(err.reason, () => ({ err: err.message, ...details }));
  }

  /** The last summary now (the plugin is going away). */
  close(): void {
    this.digest.close();
  }
}
