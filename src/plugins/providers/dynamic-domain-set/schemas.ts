// Request and response schemas of the dynamic_domain_set routes (routes.ts); they are also the
// OpenAPI document's. No imports, so that the dashboard's typecheck can read this file.

/** Longest rule text the API takes (a regexp may be long; a name is at most 253 characters). */
export const RULE_MAX_LENGTH = 1024;
/** Most rules one request may add or remove. */
export const RULES_PER_REQUEST = 10_000;
export const MAX_PAGE = 500;
export const DEFAULT_PAGE = 100;

const duration = { type: ["string", "integer"], description: 'How long the rule lives: seconds, or "<n><unit>" with unit ms, s, m, h, d ("10m", "24h"); at most 365d. Absent: until removed.' } as const;
const ruleText = { type: "string", minLength: 1, maxLength: RULE_MAX_LENGTH } as const;
const ruleKind = { type: "string", enum: ["full", "domain"], description: "What a rule without a kind: prefix means (default domain)" } as const;

export const rulesQuery = {
  type: "object",
  additionalProperties: false,
  properties: {
    limit: { type: "integer", minimum: 1, maximum: MAX_PAGE, default: DEFAULT_PAGE },
    cursor: { type: "string", pattern: "^[0-9]{1,16}$", description: "next_cursor of the previous page" },
    q: { type: "string", maxLength: 255, description: "Only rules whose text contains this (case-insensitive)" },
  },
} as const;

/** `rules` (one or many) or `rule` (one): exactly one of them. */
const rulesOrRule = { oneOf: [{ required: ["rules"] }, { required: ["rule"] }] } as const;

export const addBody = {
  type: "object",
  additionalProperties: false,
  ...rulesOrRule,
  properties: {
    rule: { ...ruleText, description: "One rule (instead of rules)" },
    rules: {
      description: "One rule, or a list of rules, each a string or {rule, ttl}",
      anyOf: [
        ruleText,
        {
          type: "array",
          minItems: 1,
          maxItems: RULES_PER_REQUEST,
          items: {
            anyOf: [ruleText, { type: "object", additionalProperties: false, required: ["rule"], properties: { rule: ruleText, ttl: duration } }],
          },
        },
      ],
    },
    ttl: duration,
    rule_kind: ruleKind,
  },
} as const;

export const removeBody = {
  type: "object",
  additionalProperties: false,
  ...rulesOrRule,
  properties: {
    rule: { ...ruleText, description: "One rule (instead of rules)" },
    rules: { description: "One rule, or a list of rules", anyOf: [ruleText, { type: "array", minItems: 1, maxItems: RULES_PER_REQUEST, items: ruleText }] },
    rule_kind: ruleKind,
  },
} as const;

export const rulesPageSchema = {
  type: "object",
  required: ["ok", "rules", "next_cursor", "total"],
  properties: {
    ok: { type: "boolean" },
    rules: {
      type: "array",
      items: {
        type: "object",
        required: ["rule", "expires_at_ms", "ttl_left_ms", "added_at_ms", "source"],
        properties: {
          rule: { type: "string", description: "Canonical text: full:, domain:, keyword: or regexp: and the pattern" },
          expires_at_ms: { type: ["integer", "null"], description: "When the rule leaves (Unix ms); null: never" },
          ttl_left_ms: { type: ["integer", "null"], description: "Milliseconds until then; null: never" },
          added_at_ms: { type: "integer" },
          source: { type: "string", enum: ["api", "learned", "bootstrap", "file"], description: "api: POST rules; learned: learn_domain; bootstrap: bootstrap_rules; file: a line written by hand" },
        },
      },
    },
    next_cursor: { type: ["string", "null"] },
    total: { type: "integer", description: "Live rules matching q, on all pages" },
  },
} as const;

export const addedSchema = {
  type: "object",
  required: ["ok", "added", "updated", "total"],
  properties: {
    ok: { type: "boolean" },
    added: { type: "integer", description: "Rules that were not in the set" },
    updated: { type: "integer", description: "Rules already there whose expiry (and source) the request set" },
    total: { type: "integer", description: "Live rules now" },
  },
} as const;

export const removedSchema = {
  type: "object",
  required: ["ok", "removed", "missing", "total"],
  properties: {
    ok: { type: "boolean" },
    removed: { type: "integer" },
    missing: { type: "array", items: { type: "string" }, description: "Rules of the request that were not in the set (canonical text)" },
    total: { type: "integer" },
  },
} as const;

export const clearedSchema = {
  type: "object",
  required: ["ok", "removed", "total"],
  properties: { ok: { type: "boolean" }, removed: { type: "integer" }, total: { type: "integer" } },
} as const;

export const setStatusSchema = {
  type: "object",
  required: ["ok", "provider", "path", "rules", "by_source", "max_entries", "unsaved_changes", "flush_interval_ms", "last_write_at_ms", "last_write_error", "expired"],
  properties: {
    ok: { type: "boolean" },
    provider: { type: "string" },
    path: { type: "string", description: "The rule file as configured" },
    rules: { type: "integer", description: "Live rules" },
    by_source: {
      type: "object",
      required: ["api", "learned", "bootstrap", "file"],
      properties: { api: { type: "integer" }, learned: { type: "integer" }, bootstrap: { type: "integer" }, file: { type: "integer" } },
    },
    max_entries: { type: "integer" },
    unsaved_changes: { type: "boolean", description: "The rules changed since the file was last written (it is written every flush_interval_ms)" },
    flush_interval_ms: { type: "integer" },
    last_write_at_ms: { type: ["integer", "null"] },
    last_write_error: { type: ["string", "null"], description: "Why the last write failed; null after a success" },
    expired: { type: "integer", description: "Rules the sweeps removed since this configuration was loaded" },
  },
} as const;
