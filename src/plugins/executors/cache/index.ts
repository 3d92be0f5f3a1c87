// `cache`: answers repeated questions from stored wire bytes, runs the rest of the sequence on a miss and stores its answer.

import type { ProcessRole } from "../../../registry/process-role.js";
import { ArgError, argProblems, definePlugin } from "../../../registry/types.js";
import { redisUrlProblem } from "../../../cluster/redis-url.js";
import { cacheControl } from "./control.js";
import { CacheExecutor } from "./executor.js";
import { RedisTier, redisTierStats } from "./redis-tier.js";

export { CacheExecutor } from "./executor.js";
export type { CacheEntriesPage, CacheEntriesQuery, CacheEntryRow } from "./api.js";
export { CacheApiError, InvalidDumpError, InvalidEntryIdError, InvalidQueryError } from "./errors.js";

interface CacheArgs {
  size: number;
  lazy_cache_ttl?: number;
  dump_file?: string;
  dump_interval: number;
  short_circuit: boolean;
  cache_negative: boolean;
  max_negative_ttl: number;
  negative_ttl_without_soa: number;
  max_positive_ttl?: number;
  min_positive_ttl?: number;
  ecs_in_key: boolean;
  prefetch: boolean;
  prefetch_min_hits?: number;
  prefetch_threshold_percent?: number;
  prefetch_concurrency?: number;
  redis?: RedisArgs;
}

interface RedisArgs {
  url: string;
  prefix: string;
  read_budget_ms: number;
  load_at_start: boolean;
  max_pending_writes: number;
}

const MAX_TTL = 0x7fffffff;

const schema = {
  type: "object",
  additionalProperties: false,
  properties: {
    size: { type: "integer", minimum: 1, maximum: 100_000_000, default: 1024 },
    lazy_cache_ttl: { type: "integer", minimum: 0, maximum: MAX_TTL },
    dump_file: { type: "string", minLength: 1 },
    dump_interval: { type: "integer", minimum: 0, maximum: 31_536_000, default: 600 },
    short_circuit: { type: "boolean", default: false },
    cache_negative: { type: "boolean", default: true },
    max_negative_ttl: { type: "integer", minimum: 1, maximum: MAX_TTL, default: 300 },
    negative_ttl_without_soa: { type: "integer", minimum: 0, maximum: MAX_TTL, default: 60 },
    max_positive_ttl: { type: "integer", minimum: 1, maximum: MAX_TTL },
    min_positive_ttl: { type: "integer", minimum: 0, maximum: MAX_TTL },
    ecs_in_key: { type: "boolean", default: false },
    // Refresh popular entries before they expire. The three below have no schema default, so setting one
    // without `prefetch: true` can be reported.
    prefetch: { type: "boolean", default: false },
    prefetch_min_hits: { type: "integer", minimum: 1, maximum: 1_000_000 },
    prefetch_threshold_percent: { type: "integer", minimum: 1, maximum: 100 },
    prefetch_concurrency: { type: "integer", minimum: 1, maximum: 10_000 },
    // A second level shared by every instance that names the same Redis and prefix.
    redis: {
      type: "object",
      additionalProperties: false,
      required: ["url"],
      properties: {
        url: { type: "string", minLength: 1 },
        prefix: { type: "string", minLength: 1, maxLength: 200, default: "sluice:cache:" },
        read_budget_ms: { type: "integer", minimum: 1, maximum: 1000, default: 20 },
        load_at_start: { type: "boolean", default: true },
        max_pending_writes: { type: "integer", minimum: 1, maximum: 100_000, default: 1000 },
      },
    },
  },
} as const;

/** Prefetch defaults: Unbound and CoreDNS refresh in the last 10 % of the TTL. */
const PREFETCH_DEFAULTS = { minHits: 2, thresholdPercent: 10, concurrency: 16 };
const PREFETCH_KEYS = ["prefetch_min_hits", "prefetch_threshold_percent", "prefetch_concurrency"] as const;

function validate(args: CacheArgs): void {
  if (args.dump_file !== undefined && args.dump_interval <= 0) {
    throw new ArgError("dump_interval must be greater than 0 when dump_file is set", ["dump_interval"]);
  }
  const min = args.min_positive_ttl;
  if (min !== undefined && args.max_positive_ttl !== undefined && min > args.max_positive_ttl) {
    throw new ArgError(`min_positive_ttl (${min}) must not exceed max_positive_ttl (${args.max_positive_ttl})`, ["min_positive_ttl"]);
  }
  const stray = args.prefetch ? undefined : PREFETCH_KEYS.find((k) => args[k] !== undefined);
  if (stray !== undefined) throw new ArgError(`${stray} has no effect without prefetch: true`, [stray]);
  const url = args.redis ? redisUrlProblem(args.redis.url) : null;
  if (url !== null) throw new ArgError(url, ["redis", "url"]);
}

/** The process that loads and writes a cache's dump_file: the only one, or worker 1 of several. */
const keepsDumpFile = (role: ProcessRole): boolean => role.kind === "single" || (role.kind === "worker" && role.index === 1);

export const cache = definePlugin<CacheArgs, "executor", CacheExecutor>({
  type: "cache",
  kind: "executor",
  feature: "cache",
  summary: "Caches answers by question, DO/CD bits (and optionally ECS); serve-stale, prefetch, negative caching, dumps.",
  dataFiles: (args) => (args.dump_file === undefined ? [] : [{ path: args.dump_file }]),
  schema,
  // Quick setup: `cache`, `cache short_circuit`, `cache short_circuit=true|false`.
  quickSetup(param) {
    const text = param.trim();
    if (text === "") return {};
    const m = /^short_circuit(?:=(true|false))?$/.exec(text);
    if (!m) throw new ArgError(`unknown cache quick-setup parameter '${text}' (only short_circuit or short_circuit=true|false)`);
    return { short_circuit: m[1] !== "false" };
  },
  check: (args) => argProblems(() => validate(args)),
  control: cacheControl,
  create(args, ctx) {
    validate(args);
    const lazy = args.lazy_cache_ttl ?? 0;
    const owner = {};
    const redis = args.redis;
    const link = redis ? ctx.services.redis.acquire(redis.url, owner) : null;
    const tier =
      redis && link
        ? new RedisTier(link, { prefix: redis.prefix, readBudgetMs: redis.read_budget_ms, maxPendingWrites: redis.max_pending_writes }, redisTierStats(ctx.services.metrics, ctx.tag), ctx.log)
        : null;
    return new CacheExecutor(
      {
        tag: ctx.tag,
        size: args.size,
        shortCircuit: args.short_circuit,
        ecsInKey: args.ecs_in_key,
        policy: {
          maxPositiveTtl: args.max_positive_ttl ?? null,
          minPositiveTtl: args.min_positive_ttl ?? 0,
          cacheNegative: args.cache_negative,
          maxNegativeTtl: args.max_negative_ttl,
          negativeTtlWithoutSoa: args.negative_ttl_without_soa,
          lazyMs: lazy * 1000,
        },
        // With data-plane workers, worker 1 keeps the dump file (the primary answers no query; two writers would race).
        dumpFile: args.dump_file === undefined || !keepsDumpFile(ctx.services.process) ? null : ctx.resolvePath(args.dump_file),
        dumpIntervalMs: args.dump_interval * 1000,
        tier,
        loadAtStart: redis?.load_at_start ?? false,
        releaseTier: () => (link ? ctx.services.redis.release(link, owner) : Promise.resolve()),
        clockShift: ctx.services.clockShift,
        role: ctx.services.process,
        prefetch: args.prefetch
          ? {
              minHits: args.prefetch_min_hits ?? PREFETCH_DEFAULTS.minHits,
              windowMsPerTtlSecond: (args.prefetch_threshold_percent ?? PREFETCH_DEFAULTS.thresholdPercent) * 10,
              concurrency: args.prefetch_concurrency ?? PREFETCH_DEFAULTS.concurrency,
            }
          : null,
      },
      ctx.services.metrics,
      ctx.log,
      ctx.control(ctx.tag),
    );
  },
});
