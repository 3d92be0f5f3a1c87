// What `ipset` and `nftset` share beyond their targets: the entry timeout, batching, the queue and the
// program they run. These args are Sluice's (the reference engine writes over netlink with neither).

import { durationSchema, parseDuration } from "../../../engine/duration.js";
import { ArgError } from "../../../registry/types.js";

export interface WriterArgs {
  /** 0 (no timeout of ours), a duration, or "ttl". */
  timeout: number | string;
  min_timeout: number | string;
  max_timeout: number | string;
  batch_interval: number | string;
  batch_size: number;
  queue_size: number;
  command?: string | string[];
}

/** The largest entry timeout ipset takes, seconds (nft takes the same bound here). */
export const MAX_TIMEOUT_S = 2_147_483;

export type TimeoutPolicy = { kind: "none" } | { kind: "fixed"; seconds: number } | { kind: "ttl"; min: number; max: number };

export interface WriterSettings {
  timeout: TimeoutPolicy;
  batchIntervalMs: number;
  batchSize: number;
  queueSize: number;
  /** The program and its leading arguments as configured, or null for the default. */
  command: string[] | null;
}

export const writerProperties = {
  timeout: { type: ["integer", "string"], minimum: 0, default: 0 },
  min_timeout: { ...durationSchema, default: 60 },
  max_timeout: { ...durationSchema, default: 3600 },
  batch_interval: { ...durationSchema, default: "200ms" },
  batch_size: { type: "integer", minimum: 1, maximum: 100_000, default: 256 },
  queue_size: { type: "integer", minimum: 1, maximum: 1_000_000, default: 1024 },
  command: {
    oneOf: [
      { type: "string", minLength: 1, maxLength: 4096 },
      { type: "array", minItems: 1, maxItems: 64, items: { type: "string", minLength: 1, maxLength: 4096 } },
    ],
  },
} as const;

/** Whole seconds between 1 s and MAX_TIMEOUT_S. */
function seconds(value: number | string, key: string): number {
  let ms: number;
  try {
    ms = parseDuration(value);
  } catch (err) {
    throw new ArgError((err as Error).message, [key]);
  }
  if (ms % 1000 !== 0) throw new ArgError(`${key} must be whole seconds (kernel set timeouts are)`, [key]);
  if (ms < 1000 || ms > MAX_TIMEOUT_S * 1000) throw new ArgError(`${key} must be between 1s and ${MAX_TIMEOUT_S}s`, [key]);
  return ms / 1000;
}

function timeoutPolicy(args: WriterArgs): TimeoutPolicy {
  if (typeof args.timeout === "string" && args.timeout.trim().toLowerCase() === "ttl") {
    const min = seconds(args.min_timeout, "min_timeout");
    const max = seconds(args.max_timeout, "max_timeout");
    if (min > max) throw new ArgError(`min_timeout (${min}s) is above max_timeout (${max}s)`, ["min_timeout"]);
    return { kind: "ttl", min, max };
  }
  if (args.timeout === 0 || args.timeout === "0") return { kind: "none" };
  try {
    return { kind: "fixed", seconds: seconds(args.timeout, "timeout") };
  } catch (err) {
    if (err instanceof ArgError && /not a duration/.test(err.message)) throw new ArgError(`timeout '${String(args.timeout)}' is neither 0, a duration (30m, 1h) nor ttl`, ["timeout"]);
    throw err;
  }
}

/** Throws an ArgError located in args. */
export function writerSettings(args: WriterArgs): WriterSettings {
  const timeout = timeoutPolicy(args);
  let batchIntervalMs: number;
  try {
    batchIntervalMs = parseDuration(args.batch_interval);
  } catch (err) {
    throw new ArgError((err as Error).message, ["batch_interval"]);
  }
  if (batchIntervalMs < 1 || batchIntervalMs > 3_600_000) throw new ArgError("batch_interval must be between 1ms and 1h", ["batch_interval"]);
  if (args.batch_size > args.queue_size) throw new ArgError(`batch_size (${args.batch_size}) is larger than queue_size (${args.queue_size})`, ["batch_size"]);
  const command = args.command === undefined ? null : typeof args.command === "string" ? [args.command] : [...args.command];
  return { timeout, batchIntervalMs, batchSize: args.batch_size, queueSize: args.queue_size, command };
}

/** Prefix lengths as configured: 1–32 for IPv4, 1–128 for IPv6. */
export const mask4Schema = { type: "integer", minimum: 1, maximum: 32 } as const;
export const mask6Schema = { type: "integer", minimum: 1, maximum: 128 } as const;

/** An address family of a quick-setup token's mask, checked as the schema would. */
export function quickMask(text: string | undefined, family: 4 | 6, fallback: number, token: string): number {
  if (text === undefined || text === "") return fallback;
  const n = Number(text);
  const max = family === 4 ? 32 : 128;
  if (!/^\d+$/.test(text) || n < 1 || n > max) throw new ArgError(`'${token}': the mask must be 1–${max} (got '${text}')`);
  return n;
}
