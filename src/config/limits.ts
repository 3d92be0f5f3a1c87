// `api.http.limits` for request bodies and configuration parsing: the largest /api request body,
// and the time and heap a validation worker may use (docs/operations.d/config-limits.md).

import { parseDuration } from "../engine/duration.js";

export const DEFAULT_BODY_BYTES = 8 * 1024 * 1024;
export const DEFAULT_CONFIG_PARSE_TIMEOUT = "10s";
export const DEFAULT_CONFIG_PARSE_MEMORY_MB = 256;

/** Bounds of config_parse_timeout: shorter cannot even start a worker, longer holds a slot for ages. */
const MIN_PARSE_TIMEOUT_MS = 100;
const MAX_PARSE_TIMEOUT_MS = 600_000;

export interface ConfigLimitsConfig {
  body_bytes?: number;
  config_parse_timeout?: string;
  config_parse_memory_mb?: number;
}

/** Schema properties of `api.http.limits` owned by this module (merged into that object's schema). */
export const configLimitsProperties = {
  body_bytes: { type: "integer", minimum: 1024, maximum: 1024 * 1024 * 1024 },
  config_parse_timeout: { type: "string", minLength: 1 },
  // Below ~32 MiB a worker cannot even load the validator.
  config_parse_memory_mb: { type: "integer", minimum: 32, maximum: 16384 },
} as const;

export interface ConfigLimits {
  bodyBytes: number;
  parseTimeoutMs: number;
  parseMemoryMb: number;
}

/** The limits in force for a (validated) `api.http.limits` section, defaults filled in. */
export function configLimits(limits: ConfigLimitsConfig | undefined): ConfigLimits {
  return {
    bodyBytes: limits?.body_bytes ?? DEFAULT_BODY_BYTES,
    parseTimeoutMs: parseDuration(limits?.config_parse_timeout ?? DEFAULT_CONFIG_PARSE_TIMEOUT),
    parseMemoryMb: limits?.config_parse_memory_mb ?? DEFAULT_CONFIG_PARSE_MEMORY_MB,
  };
}

/** What the schema cannot say about these keys; each problem names its key below `api.http.limits`. */
export function configLimitsProblems(limits: ConfigLimitsConfig | undefined): { key: string; message: string }[] {
  const timeout = limits?.config_parse_timeout;
  if (timeout === undefined) return [];
  let ms: number;
  try {
    ms = parseDuration(timeout);
  } catch (err) {
    return [{ key: "config_parse_timeout", message: `api.http.limits.config_parse_timeout: ${(err as Error).message}` }];
  }
  if (ms < MIN_PARSE_TIMEOUT_MS || ms > MAX_PARSE_TIMEOUT_MS) {
    return [{ key: "config_parse_timeout", message: `api.http.limits.config_parse_timeout must be between ${MIN_PARSE_TIMEOUT_MS}ms and ${MAX_PARSE_TIMEOUT_MS / 60_000}m` }];
  }
  return [];
}

/** "8 MiB" for whole MiB, else bytes: for messages. */
export function formatBytes(n: number): string {
  return n % (1024 * 1024) === 0 ? `${n / (1024 * 1024)} MiB` : `${n} bytes`;
}
