// `learn_domain`: adds the query name to a dynamic_domain_set (`full:<name>`, or `domain:<name>` with
// rule_kind: domain), e.g. after an answer whose address matched a geoip set. The add is an in-memory
// insert that the next query sees; the set's actor writes the file later. Nothing here waits, logs above
// debug or sends an event. Bounded by the set's max_entries (a name that does not fit is dropped and
// counted) and by `ttl`, after which a learned rule leaves by itself.

import { parseType } from "../../dns/constants.js";
import type { DnsContext } from "../../engine/context.js";
import { durationProblem, durationSchema, parseDuration } from "../../engine/duration.js";
import { isPromise, runNext, Step, type Continuation, type StepResult } from "../../engine/types.js";
import type { Cell } from "../../observability/metrics.js";
import { ArgError, definePlugin, type ArgProblem, type DependencySpec } from "../../registry/types.js";
import type { LearnOutcome } from "../providers/dynamic-domain-set/store.js";

interface LearnDomainArgs {
  provider: string;
  rule_kind: "full" | "domain";
  ttl?: number | string;
  qtypes: (string | number)[];
  success_only: boolean;
  answer_required: boolean;
  phase: "before" | "after";
  /** OxiDNS's choice of waiting for the write; learning never waits here. */
  async?: boolean;
}

/** What learn_domain needs of its set (a dynamic_domain_set instance). */
interface LearningSet {
  learn(name: string, kind: "full" | "domain", ttlMs: number | undefined): LearnOutcome;
}

const isLearningSet = (p: unknown): p is LearningSet => typeof (p as Partial<LearningSet> | null)?.learn === "function";

const MAX_TTL_MS = 365 * 86_400_000;
const TAG = /^\$?([^\s/?#$&]+)$/;

const schema = {
  type: "object",
  additionalProperties: false,
  required: ["provider"],
  properties: {
    provider: { type: "string", minLength: 1 },
    rule_kind: { type: "string", enum: ["full", "domain"], default: "full" },
    ttl: durationSchema,
    qtypes: { type: "array", items: { type: ["string", "integer"] }, default: [] },
    success_only: { type: "boolean", default: false },
    answer_required: { type: "boolean", default: false },
    phase: { type: "string", enum: ["before", "after"], default: "before" },
    async: { type: "boolean" },
  },
} as const;

function setTag(args: LearnDomainArgs): string {
  const m = TAG.exec(args.provider);
  if (!m) throw new ArgError(`'${args.provider}' is not a provider tag ($tag or tag)`, ["provider"]);
  return m[1];
}

function qtypesOf(args: LearnDomainArgs): { values: Set<number>; problems: ArgProblem[] } {
  const values = new Set<number>();
  const problems: ArgProblem[] = [];
  args.qtypes.forEach((t, i) => {
    const v = typeof t === "number" ? (Number.isInteger(t) && t >= 0 && t <= 0xffff ? t : undefined) : parseType(t);
    if (v === undefined) problems.push({ path: ["qtypes", i], message: `'${t}' is not a query type` });
    else values.add(v);
  });
  return { values, problems };
}

function check(args: LearnDomainArgs): ArgProblem[] {
  const problems = qtypesOf(args).problems;
  try {
    setTag(args);
  } catch (err) {
    if (!(err instanceof ArgError)) throw err;
    problems.push({ path: err.path, message: err.message });
  }
  const ttl = durationProblem("ttl", args.ttl, 1, MAX_TTL_MS);
  if (ttl !== null) problems.push({ path: ["ttl"], message: ttl });
  return problems;
}

function dependencies(args: LearnDomainArgs): DependencySpec[] {
  try {
    return [{ argsPath: ["provider"], target: setTag(args), kind: "provider", pluginType: "dynamic_domain_set" }];
  } catch (err) {
    if (err instanceof ArgError) return [];
    throw err;
  }
}

/** `learn_domain $set [full|domain] [ttl=<duration>]`. */
function quickSetup(param: string): unknown {
  const [provider, ...rest] = param.trim().split(/\s+/);
  const args: Record<string, unknown> = { provider: provider ?? "" };
  for (const word of rest) {
    if (word === "full" || word === "domain") args.rule_kind = word;
    else if (word.startsWith("ttl=")) args.ttl = word.slice(4);
    else throw new ArgError(`'${word}': quick setup takes a $set, then full or domain and ttl=<duration>`);
  }
  return args;
}

export const learnDomain = definePlugin<LearnDomainArgs, "executor">({
  type: "learn_domain",
  kind: "executor",
  feature: "core",
  summary: "Adds the query name (full: or domain:) to a dynamic_domain_set, in memory at once; bounded by the set's max_entries and ttl.",
  schema,
  shorthand: (raw) => (typeof raw === "string" ? { provider: raw } : raw),
  quickSetup,
  check,
  dependencies,
  create(args, ctx) {
    const tag = setTag(args);
    const set = ctx.provider(tag);
    if (!isLearningSet(set)) throw new ArgError(`provider '${tag}' is not a dynamic_domain_set`, ["provider"]);
    const ttlMs = args.ttl === undefined ? undefined : parseDuration(args.ttl);
    const qtypes = qtypesOf(args).values;
    const kind = args.rule_kind;
    const m = ctx.services.metrics;
    const labels = { plugin_tag: ctx.tag };
    const learned: Cell = m.counter("learn_domain_learned_total", "learn_domain: names added to the set (new rules)", ["plugin_tag"])(labels);
    const dropped: Cell = m.counter("learn_domain_dropped_total", "learn_domain: names not added because the set was at max_entries (or the name cannot be a rule)", ["plugin_tag"])(labels);

    const learn = (dns: DnsContext): void => {
      if (dns.qname === "") return;
      if (qtypes.size > 0 && !qtypes.has(dns.qtype)) return;
      if (args.success_only || args.answer_required) {
        const resp = dns.response;
        if (resp === null) return;
        if (args.success_only && resp.rcode !== 0) return;
        if (args.answer_required && resp.answerCount === 0) return;
      }
      const outcome = set.learn(dns.qname, kind, ttlMs);
      if (outcome === "added") learned.value++;
      else if (outcome === "full" || outcome === "invalid") dropped.value++;
    };

    if (args.phase === "before") {
      return {
        execute(dns: DnsContext): StepResult {
          learn(dns);
          return Step.Next;
        },
      };
    }
    // phase: after — the rest of the sequence runs first, then the name is learned from its outcome.
    return {
      continuation: true,
      execute(dns: DnsContext, next: Continuation | null): StepResult {
        const res = runNext(dns, next);
        if (isPromise(res)) {
          return res.then((step) => {
            learn(dns);
            return step;
          });
        }
        learn(dns);
        return res;
      },
    };
  },
});
