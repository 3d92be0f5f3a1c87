// The `log` section's settings besides the level and file: `failure_summary`, how often the DNS
// servers sum up the queries that failed (each reason's first failure is logged at once, the rest
// are counted: src/plugins/servers/failure-log.ts).

import { durationProblem, parseDuration } from "../engine/duration.js";
import type { LogConfig } from "./schema.js";

export const DEFAULT_FAILURE_SUMMARY_MS = 10_000;

/** What the schema cannot say about the `log` section; each problem names its key below `log`. */
export function logProblems(log: Partial<LogConfig> | undefined): { key: string; message: string }[] {
  const problem = durationProblem("log.failure_summary", log?.failure_summary, 100, 3_600_000);
  return problem === null ? [] : [{ key: "failure_summary", message: problem }];
}

/** The summary period of the (validated) `log` section in force. */
export function failureSummaryMs(log: Partial<LogConfig> | undefined): number {
  const value = log?.failure_summary;
  return value === undefined ? DEFAULT_FAILURE_SUMMARY_MS : parseDuration(value);
}
