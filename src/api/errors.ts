// The one JSON error shape, {"ok": false, "code": "<snake_case>", "message": "<text>"}, and the one
// table that gives each error code its HTTP status. Handlers name a code; they never pick a status.

export interface ErrorBody {
  ok: false;
  code: string;
  message: string;
}

/** HTTP status of every error code the API answers with (refusing guards map to codes in guards.ts). */
export const ERROR_STATUS = {
  // The request itself is wrong.
  invalid_request: 400,
  invalid_query: 400,
  invalid_path: 400,
  invalid_utf8_body: 400,
  empty_config_body: 400,
  unsupported_config_format: 400,
  config_validate_failed: 400,
  config_check_failed: 400,
  config_too_complex: 400,
  yaml_alias_limit: 400,
  invalid_matcher_runtime_mode: 400,
  provider_reload_failed: 400,
  invalid_ip: 400,
  invalid_cache_entry_id: 400,
  invalid_cache_dump: 400,
  invalid_download_request: 400,
  invalid_upgrade_config: 400,
  upgrade_field_not_allowed: 400,
  invalid_record_id: 400,
  invalid_rules: 400,
  invalid_client: 400,
  invalid_pause: 400,
  unauthorized: 401,
  invalid_token: 401,
  token_expired: 401,
  token_revoked: 401,
  invalid_session: 401,
  session_expired: 401,
  credentials_too_large: 401,
  forbidden_host: 403,
  forbidden_origin: 403,
  upgrade_requires_auth: 403,
  // Authenticated, but the role (or a token's scopes) does not reach this route.
  forbidden_role: 403,
  forbidden_scope: 403,
  // Nothing there.
  not_found: 404,
  plugin_route_not_found: 404,
  provider_not_found: 404,
  cache_entry_not_found: 404,
  cron_job_not_found: 404,
  download_index_out_of_range: 404,
  record_not_found: 404,
  client_not_found: 404,
  group_not_found: 404,
  token_not_found: 404,
  // A GET on a route that changes state (it takes POST): the answer's Allow header names the methods.
  method_not_allowed: 405,
  not_acceptable: 406,
  // Refused by a guard, or in conflict with the current state.
  config_conflict: 409,
  shutdown_in_progress: 409,
  reload_busy: 409,
  config_save_busy: 409,
  provider_reload_busy: 409,
  cache_busy: 409,
  cron_job_already_running: 409,
  download_busy: 409,
  query_recorder_busy: 409,
  dynamic_set_busy: 409,
  client_exists: 409,
  client_declared: 409,
  token_exists: 409,
  too_many_tokens: 409,
  auth_not_configured: 409,
  upgrade_in_progress: 409,
  upgrade_not_installed: 409,
  upgrade_not_configured: 409,
  // Installed by a distribution package (sluice-package.json beside the program): apt upgrades it.
  upgrade_managed_by_package: 409,
  body_too_large: 413,
  // Too many failed sign-ins from this address or for this user: Retry-After says when to try again.
  too_many_attempts: 429,
  // A dynamic_domain_set at max_entries: the rules did not fit (remove some, or raise the bound).
  dynamic_set_full: 507,
  // The server could not do it.
  internal_error: 500,
  config_read_failed: 500,
  config_save_failed: 500,
  control_command_failed: 500,
  clients_state_write_failed: 500,
  auth_state_write_failed: 500,
  backup_failed: 500,
  // The release host failed or answered something unusable.
  upgrade_check_failed: 502,
  shutting_down: 503,
  config_save_unavailable: 503,
  config_validation_busy: 503,
  plugin_unavailable: 503,
  // Password checks run a few at a time off the event loop; more waiting than that are turned away.
  auth_busy: 503,
  audit_unavailable: 503,
  cron_unavailable: 503,
  query_recorder_unavailable: 503,
  // Work an actor admitted that could not be completed now (not a refusal: retry later).
  query_recorder_read_failed: 503,
  query_recorder_clear_failed: 503,
  audit_read_failed: 503,
} as const satisfies Record<string, number>;

export type ErrorCode = keyof typeof ERROR_STATUS;

export const isErrorCode = (code: string): code is ErrorCode => Object.hasOwn(ERROR_STATUS, code);

/** Readiness probes answer 503 until the process is ready. */
export const PROBE_STATUS = { ready: 200, not_ready: 503 } as const;

/** An error a handler throws: the status comes from ERROR_STATUS. */
export class ApiError extends Error {
  readonly status: number;

  constructor(
    readonly code: ErrorCode,
    message: string,
    /** Extra fields merged into the body (e.g. diagnostics). */
    readonly extra: Record<string, unknown> = {},
  ) {
    super(message);
    this.name = "ApiError";
    this.status = ERROR_STATUS[code];
  }
}

export function errorBody(code: string, message: string): ErrorBody {
  return { ok: false, code, message };
}

/** The response schema every route shares for its error statuses. */
export const errorSchema = {
  type: "object",
  required: ["ok", "code", "message"],
  properties: { ok: { const: false }, code: { type: "string" }, message: { type: "string" } },
  additionalProperties: true,
} as const;

/** Response schemas for a route's error codes, keyed by status (for fastify and OpenAPI). */
export function errorResponses(...codes: ErrorCode[]): Record<number, typeof errorSchema> {
  const out: Record<number, typeof errorSchema> = {};
  for (const code of codes) out[ERROR_STATUS[code]] = errorSchema;
  return out;
}
