// `dynamic_domain_set`: a domain set whose rules change at run time, through its API routes and the
// `learn_domain` executor, and are kept in a rule file that survives restarts and reloads. Usable
// wherever a domain_set is (`qname $tag`, another domain_set's `sets`). See docs/plugins.md#dynamic_domain_set.

import type { MetricsHub } from "../../../observability/metrics.js";
import { definePlugin, type ArgProblem } from "../../../registry/types.js";
import { acquireStore } from "./file.js";
import { dynamicSetControl } from "./control.js";
import { DynamicDomainSet, type DynamicSetCells } from "./set.js";
import { parseRule, type ParsedRule } from "./store.js";

export const DEFAULT_MAX_ENTRIES = 100_000;

export interface DynamicDomainSetArgs {
  path: string;
  bootstrap_rules: string[];
  max_entries?: number;
  /** Another name for max_entries. */
  max_rules?: number;
  entry_ttl_seconds?: number;
  flush_interval_ms: number;
  cleanup_interval_seconds: number;
  // Accepted so that an OxiDNS configuration starts unchanged; they change nothing here (docs say why).
  queue_size?: number;
  batch_size?: number;
  metadata_path?: string;
}

const maxSchema = { type: "integer", minimum: 1, maximum: 10_000_000 } as const;

const schema = {
  type: "object",
  additionalProperties: false,
  required: ["path"],
  properties: {
    path: { type: "string", minLength: 1 },
    bootstrap_rules: { type: "array", items: { type: "string" }, default: [] },
    max_entries: maxSchema,
    max_rules: maxSchema,
    entry_ttl_seconds: { type: "integer", minimum: 1, maximum: 365 * 86_400 },
    flush_interval_ms: { type: "integer", minimum: 10, maximum: 3_600_000, default: 1000 },
    cleanup_interval_seconds: { type: "number", minimum: 0.01, maximum: 86_400, default: 60 },
    queue_size: { type: "integer", minimum: 1 },
    batch_size: { type: "integer", minimum: 1 },
    metadata_path: { type: "string" },
  },
} as const;

function bootstrapRules(args: DynamicDomainSetArgs): { rules: Extract<ParsedRule, { ok: true }>[]; problems: ArgProblem[] } {
  const rules: Extract<ParsedRule, { ok: true }>[] = [];
  const problems: ArgProblem[] = [];
  args.bootstrap_rules.forEach((text, i) => {
    const parsed = parseRule(text);
    if (parsed.ok) rules.push(parsed);
    else problems.push({ path: ["bootstrap_rules", i], message: parsed.message });
  });
  return { rules, problems };
}

function check(args: DynamicDomainSetArgs): ArgProblem[] {
  const problems = bootstrapRules(args).problems;
  if (args.max_entries !== undefined && args.max_rules !== undefined) problems.push({ path: ["max_rules"], message: "max_rules is another name for max_entries: give one of them" });
  const max = args.max_entries ?? args.max_rules ?? DEFAULT_MAX_ENTRIES;
  if (args.bootstrap_rules.length > max) problems.push({ path: ["bootstrap_rules"], message: `${args.bootstrap_rules.length} bootstrap rules do not fit in max_entries (${max})` });
  return problems;
}

export const dynamicDomainSet = definePlugin<DynamicDomainSetArgs, "provider", DynamicDomainSet>({
  type: "dynamic_domain_set",
  kind: "provider",
  feature: "core",
  summary: "A domain set changed at run time (API routes, learn_domain) and kept in a rule file; rules may expire.",
  dataFiles: (args) => [{ path: args.path }],
  schema,
  check,
  create(args, ctx) {
    const shift = ctx.services.clockShift;
    const path = ctx.resolvePath(args.path);
    const shared = acquireStore(path, () => Date.now() + shift.ms);
    return new DynamicDomainSet(
      ctx.tag,
      {
        shownPath: args.path,
        path,
        maxEntries: args.max_entries ?? args.max_rules ?? DEFAULT_MAX_ENTRIES,
        entryTtlMs: args.entry_ttl_seconds === undefined ? null : args.entry_ttl_seconds * 1000,
        flushIntervalMs: args.flush_interval_ms,
        cleanupIntervalMs: Math.round(args.cleanup_interval_seconds * 1000),
        bootstrap: bootstrapRules(args).rules,
      },
      shared,
      ctx.log,
      cells(ctx.services.metrics, ctx.tag),
      ctx.control(ctx.tag),
      ctx.services.process,
    );
  },
  control: dynamicSetControl,
});

function cells(m: MetricsHub, tag: string): DynamicSetCells {
  const labels = { plugin_tag: tag };
  const writes = m.counter("dynamic_domain_set_write_total", "dynamic_domain_set: writes of the rule file by result", ["plugin_tag", "result"]);
  return {
    rules: m.gauge("provider_rules", "Rules in the provider's serving snapshot", ["plugin_tag"])(labels),
    expired: m.counter("dynamic_domain_set_expired_total", "dynamic_domain_set: rules removed because they expired", ["plugin_tag"])(labels),
    writeOk: writes({ plugin_tag: tag, result: "ok" }),
    writeError: writes({ plugin_tag: tag, result: "error" }),
  };
}
