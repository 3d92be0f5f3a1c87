// The shape of a Sluice configuration file (everything but each plugin's args, which its own
// definition describes).

import { auditSchema, type AuditConfig } from "./audit.js";
import { clusterSchema, type ClusterConfig } from "./cluster.js";
import { configLimitsProperties, type ConfigLimitsConfig } from "./limits.js";
import { networkSchema, type NetworkConfig } from "./network.js";
import { upgradeSchema, type UpgradeConfig } from "./upgrade.js";

export const LOG_LEVELS = ["off", "trace", "debug", "info", "warn", "error"] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

export interface LogConfig {
  level: LogLevel;
  file?: string;
  /** How often the DNS servers log a summary of failed queries (a duration, default 10s). */
  failure_summary?: string;
}

export interface AuthConfig {
  type?: "basic";
  /** The single user of earlier versions (an admin); both or neither. */
  username?: string;
  password?: string;
  users?: { name: string; password_hash: string; role: "metrics" | "viewer" | "operator" | "admin" }[];
  /** Tokens and sessions (default data/auth.json, relative to the working directory). */
  state_file?: string;
  session?: { idle?: number | string; absolute?: number | string };
  throttle?: { window?: number | string; address_failures?: number; user_failures?: number; first_lock?: number | string; max_lock?: number | string };
}

export interface ApiConfig {
  listen: string;
  ssl?: { cert?: string; key?: string; client_ca?: string; require_client_cert?: boolean };
  auth?: AuthConfig;
  cors?: { allowed_origins?: string[] };
  /** Omitted or true: the built-in dashboard; false: no WebUI; an object: static files from `root`. */
  webui?: boolean | { root: string; index: string };
  /** Host names the API answers besides IP literals (and localhost on loopback); `*`: any. */
  allowed_hosts?: string[];
  limits?: ConfigLimitsConfig & { max_conns?: number };
  /** Interval of the `: heartbeat` comment on idle SSE streams (a duration, default 15s). */
  sse_heartbeat?: string;
  /** The audit trail of management requests: false = off; omitted or true = SQLite at data/audit.db (docs/api.md "Audit trail"). */
  audit?: boolean | AuditConfig;
}

export interface RawPlugin {
  tag: string;
  type: string;
  args?: unknown;
}

export interface RawConfig {
  log?: LogConfig;
  api?: { http?: ApiConfig };
  include?: string[];
  runtime?: { worker_threads?: number };
  /** Data-plane worker processes (src/app/workers/): a count or `auto`; 1 (the default) runs everything in one process. */
  workers?: number | "auto";
  upgrade?: UpgradeConfig;
  cluster?: ClusterConfig;
  network?: NetworkConfig;
  plugins?: RawPlugin[];
}

const nonEmpty = { type: "string", minLength: 1 } as const;

/** Most data-plane workers `workers` may ask for; `auto` is the available cores up to this. */
export const MAX_WORKERS = 32;
const duration = { type: ["integer", "string"], minimum: 0 } as const;

const authSchema = {
  type: "object",
  additionalProperties: false,
  anyOf: [{ required: ["username", "password"] }, { required: ["users"] }],
  dependentRequired: { username: ["password"], password: ["username"] },
  properties: {
    type: { type: "string", enum: ["basic"], default: "basic" },
    username: { type: "string", minLength: 1, maxLength: 128 },
    password: { type: "string", minLength: 1, maxLength: 1024 },
    users: {
      type: "array",
      minItems: 1,
      maxItems: 1000,
      items: {
        type: "object",
        additionalProperties: false,
        required: ["name", "password_hash", "role"],
        properties: {
          name: { type: "string", minLength: 1, maxLength: 128, pattern: "^[^:\\s]+$" },
          password_hash: nonEmpty,
          role: { type: "string", enum: ["metrics", "viewer", "operator", "admin"] },
        },
      },
    },
    state_file: nonEmpty,
    session: { type: "object", additionalProperties: false, properties: { idle: duration, absolute: duration } },
    throttle: {
      type: "object",
      additionalProperties: false,
      properties: {
        window: duration,
        address_failures: { type: "integer", minimum: 1, maximum: 10000 },
        user_failures: { type: "integer", minimum: 1, maximum: 10000 },
        first_lock: duration,
        max_lock: duration,
      },
    },
  },
} as const;

export const apiHttpSchema = {
  type: "object",
  additionalProperties: false,
  required: ["listen"],
  properties: {
    listen: nonEmpty,
    ssl: {
      type: "object",
      additionalProperties: false,
      properties: { cert: nonEmpty, key: nonEmpty, client_ca: nonEmpty, require_client_cert: { type: "boolean", default: false } },
    },
    auth: authSchema,
    cors: {
      type: "object",
      additionalProperties: false,
      properties: { allowed_origins: { type: "array", items: nonEmpty } },
    },
    // true/false switch the built-in dashboard on (the default) or off; an object serves another directory.
    webui: {
      type: ["boolean", "object"],
      additionalProperties: false,
      required: ["root"],
      properties: { root: nonEmpty, index: { type: "string", minLength: 1, pattern: "^[^/\\\\]+$", default: "index.html" } },
    },
    allowed_hosts: { type: "array", items: nonEmpty },
    sse_heartbeat: nonEmpty,
    audit: auditSchema,
    limits: {
      type: "object",
      additionalProperties: false,
      properties: { ...configLimitsProperties, max_conns: { type: "integer", minimum: 1, maximum: 65535 } },
    },
  },
} as const;

export const configSchema = {
  type: "object",
  additionalProperties: false,
  properties: {
    log: {
      type: "object",
      additionalProperties: false,
      properties: { level: { type: "string", enum: LOG_LEVELS, default: "info" }, file: nonEmpty, failure_summary: nonEmpty },
      default: {},
    },
    api: {
      type: "object",
      additionalProperties: false,
      properties: { http: apiHttpSchema },
    },
    include: { type: "array", items: nonEmpty, default: [] },
    runtime: {
      type: "object",
      additionalProperties: false,
      properties: { worker_threads: { type: "integer", minimum: 1 } },
    },
    workers: { oneOf: [{ type: "integer", minimum: 1, maximum: MAX_WORKERS }, { type: "string", enum: ["auto"] }], default: 1 },
    upgrade: upgradeSchema,
    cluster: clusterSchema,
    network: networkSchema,
    plugins: {
      type: "array",
      default: [],
      items: {
        type: "object",
        additionalProperties: false,
        required: ["tag", "type"],
        properties: { tag: nonEmpty, type: nonEmpty, args: {} },
      },
    },
  },
} as const;
