// Response schemas of the global routes (records, configuration, logs, upgrade); fastify serialises
// with them, /api/openapi.json shows them, and webui/src/shapes.ts derives the dashboard's types from
// them. A property missing from a schema is dropped from the answer; one listed in `required` must
// always be there (the serialiser refuses the answer otherwise). No imports: the dashboard's
// typecheck reads this file.

const int = { type: "integer" } as const;
const nullableInt = { type: ["integer", "null"] } as const;
const str = { type: "string" } as const;
const nullableStr = { type: ["string", "null"] } as const;
const bool = { type: "boolean" } as const;
const strings = { type: "array", items: str } as const;

export const reloadSchema = {
  type: "object",
  required: ["status", "pending", "in_progress", "last_started_ms", "last_completed_ms", "last_success_ms", "last_error", "running_version", "target_version"],
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
      required: ["api", "plugin_init", "server_startup"],
      properties: {
        api: str,
        plugin_init: str,
        server_startup: str,
        redis: { type: "string", enum: ["ok", "down"], description: "Only when Redis is configured (cache redis, cluster): down while a connection is being retried; the instance keeps serving" },
        workers: { type: "string", enum: ["ok", "degraded", "down"], description: "Only with data-plane workers (`workers` > 1): degraded while fewer than expected serve (one is being restarted); ready as long as one serves" },
      },
    },
    plugins: { type: "object", required: ["total", "servers"], properties: { total: int, servers: int } },
    workers: {
      type: "object",
      description: "Only with data-plane workers (`workers` > 1): how many were asked for, how many serve now, and how many restarts there were",
      required: ["expected", "alive", "restarts"],
      properties: { expected: int, alive: int, restarts: int },
    },
  },
} as const;

const buildRecordSchema = {
  type: "object",
  required: ["version", "bundle", "enabled_bundles", "enabled_features", "supported_plugins"],
  properties: {
    version: str,
    bundle: str,
    enabled_bundles: strings,
    enabled_features: strings,
    supported_plugins: { type: "object", required: ["servers", "executors", "matchers", "providers"], properties: { servers: strings, executors: strings, matchers: strings, providers: strings } },
  },
} as const;

export const buildSchema = { type: "object", required: ["ok", "build"], properties: { ok: bool, build: buildRecordSchema } } as const;

export const controlSchema = {
  type: "object",
  required: ["status", "state", "uptime_ms", "config_path", "shutdown_requested", "restart_requested", "generation", "reload"],
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
  required: ["ok", "version", "build", "os", "arch", "uptime_ms", "config_path", "api_enabled", "reload", "process_cpu_percent", "process_memory_mb", "system_memory_total_mb"],
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

/** One actor: GET /api/actors lists them; each `actor` frame of /api/actors/stream carries one without `parent`. */
export const actorSchema = {
  type: "object",
  required: ["id", "parent", "status", "state", "context"],
  properties: { id: str, parent: nullableStr, status: str, state: {}, context: { type: "object", additionalProperties: true } },
} as const;

export const actorsSchema = { type: "object", required: ["ok", "actors"], properties: { ok: bool, actors: { type: "array", items: actorSchema } } } as const;

export const pluginsSchema = {
  type: "object",
  required: ["ok", "generation", "plugins"],
  properties: {
    ok: bool,
    generation: int,
    plugins: {
      type: "array",
      items: {
        type: "object",
        required: ["tag", "type", "kind", "state", "concern", "concern_state", "routes"],
        properties: { tag: str, type: str, kind: str, state: str, concern: nullableStr, concern_state: {}, routes: strings },
      },
    },
  },
} as const;

// Configuration (GET/PUT /api/config, GET /api/config/check, POST /api/config/validate).

/** What the file read and the save report both say about the configuration file. */
const fileFields = { ok: bool, path: str, format: str, version: str, updated_at_ms: int } as const;
const fileRequired = ["ok", "path", "format", "version", "updated_at_ms"] as const;

export const configFileSchema = { type: "object", required: [...fileRequired, "content"], properties: { ...fileFields, content: str } } as const;

export const configSavedSchema = {
  type: "object",
  required: [...fileRequired, "plugin_count", "init_order", "reload", "message", "diagnostics", "diagnostic_details"],
  properties: {
    ...fileFields,
    plugin_count: int,
    init_order: strings,
    reload: { type: ["object", "null"], additionalProperties: true },
    message: str,
    diagnostics: strings,
    diagnostic_details: { type: "array", items: { type: "object", additionalProperties: true } },
  },
} as const;

export const configValidSchema = {
  type: "object",
  required: ["ok", "source", "path", "plugin_count", "dependency_graph", "message"],
  properties: { ok: bool, source: str, path: nullableStr, plugin_count: int, dependency_graph: { type: "object", additionalProperties: true }, message: str },
} as const;

// Logs (GET /api/logs; each `log` frame of /api/logs/stream is one entry).

export const logEntrySchema = {
  type: "object",
  required: ["id", "time_ms", "level", "target", "message", "fields"],
  properties: {
    id: int,
    time_ms: int,
    level: { type: "string", enum: ["trace", "debug", "info", "warn", "error", "fatal"] },
    target: str,
    message: str,
    fields: { type: "object", additionalProperties: true },
  },
} as const;

export const logsSchema = { type: "object", required: ["ok", "total", "entries"], properties: { ok: bool, total: int, entries: { type: "array", items: logEntrySchema } } } as const;

// Upgrade (POST /api/upgrade/check and apply, GET /api/upgrade/status).

export const upgradeCheckSchema = {
  type: "object",
  required: ["ok", "current_version", "latest_version", "update_available", "asset_name", "release_url"],
  properties: { ok: bool, current_version: str, latest_version: str, update_available: bool, asset_name: nullableStr, release_url: str },
} as const;

export const upgradeAcceptedSchema = { type: "object", required: ["ok", "action", "status", "message"], properties: { ok: bool, action: str, status: str, message: str } } as const;

export const upgradeStatusSchema = {
  type: "object",
  required: ["ok", "state", "started_at_ms", "completed_at_ms", "error", "installed_version", "restart_required", "current_version", "target_version", "installed_release", "managed_by_package"],
  properties: {
    ok: { type: "boolean", description: "false only when state is failed" },
    state: { type: "string", enum: ["idle", "running", "restarting", "completed", "skipped", "failed"] },
    started_at_ms: nullableInt,
    completed_at_ms: nullableInt,
    error: nullableStr,
    installed_version: str,
    restart_required: bool,
    current_version: { type: "string", description: "The version this process runs" },
    target_version: nullableStr,
    installed_release: { type: "boolean", description: "true when this process runs from an installed release (or upgrade.install_dir is set), so apply can work; false: apply answers 409 upgrade_not_installed" },
    managed_by_package: { type: "boolean", description: "true when a distribution package (the .deb) installed this program: apply answers 409 upgrade_managed_by_package, the package manager upgrades it" },
  },
} as const;
