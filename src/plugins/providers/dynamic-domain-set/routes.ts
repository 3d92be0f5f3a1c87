// The routes of a dynamic_domain_set under /api/plugins/<tag>/: list, add, remove and clear rules, and
// its status. Rules are parsed here, every one of them, before anything is asked: a request with a bad
// rule changes nothing (400 invalid_rules naming each). Changes go through the set's concern actor.

import type { DynamicSetContext, RuleChange } from "../../../../machines/dynamic-set.machine.js";
import { parseDuration } from "../../../engine/duration.js";
import { bodyField, RouteError, type PluginRoute } from "../../../registry/control.js";
import type { BareRuleKind } from "../../../engine/rules/domain.js";
import type { DynamicDomainSet } from "./set.js";
import { parseRule } from "./store.js";
import { addBody, addedSchema, clearedSchema, removeBody, removedSchema, rulesPageSchema, rulesQuery, setStatusSchema } from "./schemas.js";

/** Longest time a rule may be given to live. */
export const MAX_RULE_TTL_MS = 365 * 86_400_000;

type TtlArg = string | number | null | undefined;

/** The schema lets through `rules` or `rule`, not both. */
interface AddBody {
  rules?: string | (string | { rule: string; ttl?: TtlArg })[];
  rule?: string;
  ttl?: TtlArg;
  rule_kind?: BareRuleKind;
}

interface RemoveBody {
  rules?: string | string[];
  rule?: string;
  rule_kind?: BareRuleKind;
}

/** One refused item of a request: its index in `rules` (null: the request's own `ttl`), its text and why. */
interface RuleProblem {
  index: number | null;
  rule: string | null;
  message: string;
}

/** Messages name at most this many rules; `errors` lists them all. */
const NAMED_IN_MESSAGE = 20;

function refuse(problems: RuleProblem[], count: number): never {
  const named = problems.slice(0, NAMED_IN_MESSAGE).map((p) => (p.index === null ? p.message : `rules[${p.index}]: ${p.message}`));
  const more = problems.length > NAMED_IN_MESSAGE ? `; and ${problems.length - NAMED_IN_MESSAGE} more` : "";
  const what = problems.length === 1 && count === 1 ? "the rule is invalid" : `${problems.length} of ${count} rules are invalid`;
  throw new RouteError("invalid_rules", `${what}; nothing was changed: ${named.join("; ")}${more}`, { errors: problems });
}

/** Milliseconds of a ttl (null: never), or why not. */
function ttlOf(raw: TtlArg): { ms: number | null } | { error: string } {
  if (raw === undefined || raw === null) return { ms: null };
  try {
    const ms = parseDuration(raw);
    if (ms <= 0 || ms > MAX_RULE_TTL_MS) return { error: "ttl must be more than 0 and at most 365d" };
    return { ms };
  } catch (err) {
    return { error: `ttl: ${(err as Error).message}` };
  }
}

const asList = <T>(rules: T | T[] | undefined, rule: string | undefined): (T | string)[] => (rules === undefined ? [rule ?? ""] : Array.isArray(rules) ? rules : [rules]);

/** The request's rules, canonical and deduplicated (the last ttl of a repeated rule wins), or a 400 naming each bad one. */
function parseAdd(body: AddBody): RuleChange[] {
  const problems: RuleProblem[] = [];
  const common = ttlOf(body.ttl);
  if ("error" in common) problems.push({ index: null, rule: null, message: common.error });
  const items = asList(body.rules, body.rule);
  const out = new Map<string, number | null>();
  items.forEach((item, index) => {
    const text = typeof item === "string" ? item : item.rule;
    const parsed = parseRule(text, body.rule_kind ?? "domain");
    if (!parsed.ok) return void problems.push({ index, rule: text, message: parsed.message });
    const ttl = typeof item === "string" || item.ttl === undefined ? common : ttlOf(item.ttl);
    if ("error" in ttl) return void problems.push({ index, rule: text, message: ttl.error });
    out.delete(parsed.key);
    out.set(parsed.key, ttl.ms);
  });
  if (problems.length > 0) refuse(problems, items.length);
  return [...out].map(([rule, ttl_ms]) => ({ rule, ttl_ms }));
}

function parseRemove(body: RemoveBody): string[] {
  const problems: RuleProblem[] = [];
  const items = asList(body.rules, body.rule);
  const keys = new Set<string>();
  items.forEach((text, index) => {
    const parsed = parseRule(text, body.rule_kind ?? "domain");
    if (parsed.ok) keys.add(parsed.key);
    else problems.push({ index, rule: text, message: parsed.message });
  });
  if (problems.length > 0) refuse(problems, items.length);
  return [...keys];
}

const listRoute: PluginRoute<DynamicDomainSet> = {
  method: "GET",
  role: "viewer",
  path: "rules",
  summary: "A page of this set's live rules, in the order they were added, with their expiry and source",
  description: "Paging with the cursor visits every rule that stays in the set exactly once; rules added meanwhile come on later pages.",
  schema: { querystring: rulesQuery, response: { 200: rulesPageSchema } },
  handle(req, plugin) {
    const q = req.query as { limit: number; cursor?: string; q?: string };
    return { ok: true, ...plugin.view.list({ cursor: q.cursor === undefined ? 0 : Number(q.cursor), limit: q.limit, q: q.q ?? null }) };
  },
};

const addRoute: PluginRoute<DynamicDomainSet> = {
  method: "POST",
  role: "operator",
  path: "rules",
  audit: (req) => `add rules: ${bodyField(req.body, "rules") || bodyField(req.body, "rule")}`,
  summary: "Add rules (each may expire); the next query sees them, no reload needed",
  description:
    "Every rule is checked first: one bad rule (or ttl) and nothing is added (400 invalid_rules, with `errors` naming each). " +
    "A rule already in the set takes the request's expiry and becomes an api rule. The file is written within flush_interval_ms.",
  errors: ["invalid_rules", "dynamic_set_full", "dynamic_set_busy"],
  schema: { body: addBody, response: { 200: addedSchema } },
  async handle(req, plugin) {
    const rules = parseAdd(req.body as AddBody);
    const out = (await plugin.concern.ask({ type: "DYNSET.ADD", rules, at: plugin.view.now() })) as { added: number; updated: number; total: number };
    return { ok: true, ...out };
  },
};

const removeRoute: PluginRoute<DynamicDomainSet> = {
  method: "DELETE",
  role: "operator",
  path: "rules",
  audit: (req) => `remove rules: ${bodyField(req.body, "rules") || bodyField(req.body, "rule")}`,
  summary: "Remove rules (written as they were added; a bare name is domain: unless rule_kind says full)",
  errors: ["invalid_rules", "dynamic_set_busy"],
  schema: { body: removeBody, response: { 200: removedSchema } },
  async handle(req, plugin) {
    const rules = parseRemove(req.body as RemoveBody);
    const out = (await plugin.concern.ask({ type: "DYNSET.REMOVE", rules })) as { removed: number; missing: string[]; total: number };
    return { ok: true, ...out };
  },
};

const clearRoute: PluginRoute<DynamicDomainSet> = {
  method: "POST",
  role: "operator",
  path: "rules/clear",
  audit: () => "clear every rule",
  summary: "Remove every rule",
  changesState: true,
  errors: ["dynamic_set_busy"],
  schema: { response: { 200: clearedSchema } },
  async handle(_req, plugin) {
    const out = (await plugin.concern.ask({ type: "DYNSET.CLEAR" })) as { removed: number; total: number };
    return { ok: true, ...out };
  },
};

const statusRoute: PluginRoute<DynamicDomainSet> = {
  method: "GET",
  role: "viewer",
  path: "rules/status",
  summary: "This set's rule counts by source, its bound, and the state of its file",
  schema: { response: { 200: setStatusSchema } },
  handle(_req, plugin) {
    const ctx = plugin.concern.snapshot().context as DynamicSetContext;
    const set = plugin.view;
    return {
      ok: true,
      provider: plugin.tag,
      path: set.settings.shownPath,
      ...set.status(),
      max_entries: set.settings.maxEntries,
      flush_interval_ms: set.settings.flushIntervalMs,
      last_write_at_ms: ctx.last_persist_at_ms,
      last_write_error: ctx.last_persist_error,
      expired: ctx.expired,
    };
  },
};

export const dynamicSetRoutes: readonly PluginRoute<DynamicDomainSet>[] = [listRoute, addRoute, removeRoute, clearRoute, statusRoute];
