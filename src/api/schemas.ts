// Response schemas of the global records, one per record; fastify serialises with them and
// /api/openapi.json shows them.

const int = { type: "integer" } as const;
const nullableInt = { type: ["integer", "null"] } as const;
const str = { type: "string" } as const;
const nullableStr = { type: ["string", "null"] } as const;
const bool = { type: "boolean" } as const;
const strings = { type: "array", items: str } as const;

export const reloadSchema = {
  type: "object",
  required: ["status", "pending", "in_progress", "last_started_ms", "last_completed_ms", "last_success_ms", "last_error"],
  properties: {
    status: { type: "string", enum: ["idle", "pending", "in_progress", "ok", "failed"] },
    pending: bool,
    in_progress: bool,
    last_started_ms: nullableInt,
    last_completed_ms: nullableInt,
    last_success_ms: nullableInt,
    last_error: nullableStr,
    running_version: nullableStr,
    target_version: nullableStr,
    follow: {
      type: "object",
      description: "Only on a replica started with --config-from: the primary it follows and what the last poll found",
      properties: {
        source: str,
        state: { type: "string", enum: ["waiting", "polling", "applying", "reloading"] },
        interval_ms: int,
        version: nullableStr,
        applied_version: nullableStr,
        refused_version: nullableStr,
        last_poll_ms: nullableInt,
        last_applied_ms: nullableInt,
        last_error: nullableStr,
        polls: int,
      },
    },
  },
} as const;

export const healthSchema = {
  type: "object",
  required: ["status", "version", "build_bundle", "uptime_ms", "checks", "plugins"],
  properties: {
    status: { type: "string", enum: ["ok", "not_ready"] },
    version: str,
    build_bundle: str,
    uptime_ms: int,
    checks: {
      type: "object",
      properties: {
        api: str,
        plugin_init: str,
        server_startup: str,
        redis: { type: "string", enum: ["ok", "down"], description: "Only when Redis is configured (cache redis, cluster): down while a connection is being retried; the instance keeps serving" },
      },
    },
    plugins: { type: "object", properties: { total: int, servers: int } },
  },
} as const;

const buildRecordSchema = {
  type: "object",
  properties: {
    version: str,
    bundle: str,
    enabled_bundles: strings,
    enabled_features: strings,
    supported_plugins: { type: "object", properties: { servers: strings, executors: strings, matchers: strings, providers: strings } },
  },
} as const;

export const buildSchema = { type: "object", required: ["ok", "build"], properties: { ok: bool, build: buildRecordSchema } } as const;

export const controlSchema = {
  type: "object",
  properties: {
    status: { type: "string", enum: ["running", "shutdown_requested"] },
    state: str,
    uptime_ms: int,
    config_path: str,
    shutdown_requested: bool,
    restart_requested: bool,
    generation: int,
    reload: reloadSchema,
  },
} as const;

export const systemSchema = {
  type: "object",
  properties: {
    ok: bool,
    version: str,
    build: buildRecordSchema,
    os: str,
    arch: str,
    uptime_ms: int,
    config_path: str,
    api_enabled: bool,
    reload: reloadSchema,
    process_cpu_percent: { type: "number" },
    process_memory_mb: { type: "number" },
    system_memory_total_mb: int,
  },
} as const;

export const actorsSchema = {
  type: "object",
  properties: {
    ok: bool,
    actors: {
      type: "array",
      items: {
        type: "object",
        properties: { id: str, parent: nullableStr, status: str, state: {}, context: { type: "object", additionalProperties: true } },
      },
    },
  },
} as const;

export const pluginsSchema = {
  type: "object",
  properties: {
    ok: bool,
    generation: int,
    plugins: {
      type: "array",
      items: {
        type: "object",
        properties: { tag: str, type: str, kind: str, state: str, concern: nullableStr, concern_state: {}, routes: strings },
      },
    },
  },
} as const;
