// `ip_selector`: after the rest of the sequence, puts the answer's A/AAAA addresses in the order a TCP
// connect reaches them (fastest first), or keeps only the first `top_n`. Scores are remembered per
// address, so a known address costs a map lookup; unknown ones are probed, and the answer waits for
// them up to `max_wait` (first_success, best_within_budget) or not at all (background). Fail-open: when
// no address is known to connect, the answer goes out unchanged.

import { EDNS_DO, QCLASS, QTYPE } from "../../../dns/constants.js";
import type { DnsResponse } from "../../../dns/response.js";
import type { DnsContext } from "../../../engine/context.js";
import { isPromise, runNext, type Continuation, type Step, type StepResult } from "../../../engine/types.js";
import type { Outbound } from "../../../net/outbound.js";
import { DNS_DURATION_BUCKETS, type Cell } from "../../../observability/metrics.js";
import type { ClockShift } from "../../../registry/services.js";
import { definePlugin, type CreateContext } from "../../../registry/types.js";
import { compileOptions, ipSelectorSchema, optionProblems, parseQuickSetup, type IpSelectorArgs, type SelectorOptions } from "./options.js";
import { Prober, type ProbeMetrics, type ProbeOutcome } from "./prober.js";
import { ScoreCache, type Score } from "./scores.js";
import { answerAddresses, rank, rewrite, type Candidate } from "./select.js";

type Source = "probe" | "cache" | "fallback";

class IpSelector {
  private readonly cache: ScoreCache | null;
  readonly prober: Prober;

  constructor(
    private readonly opts: SelectorOptions,
    private readonly shift: ClockShift,
    private readonly selected: Record<Source, Cell>,
    entries: Cell,
    metrics: ProbeMetrics,
    via: Outbound | null,
  ) {
    const c = opts.cache;
    this.cache = c.enabled ? new ScoreCache(c.size, c.ttlMs, c.failureTtlMs, entries) : null;
    this.prober = new Prober(opts, metrics, (address, outcome) => this.remember(address, outcome), via);
  }

  private now(): number {
    return performance.now() + this.shift.ms;
  }

  private remember(address: string, outcome: ProbeOutcome): void {
    if (this.cache !== null && !("skipped" in outcome)) this.cache.set(address, outcome, this.now());
  }

  execute(ctx: DnsContext, next: Continuation | null): StepResult {
    const r = runNext(ctx, next);
    return isPromise(r) ? r.then((step) => this.select(ctx, step)) : this.select(ctx, r);
  }

  private select(ctx: DnsContext, step: Step): StepResult {
    const resp = ctx.response;
    const qs = ctx.query.questions;
    if (resp === null || this.opts.methods.length === 0 || qs.length !== 1 || qs[0].class !== QCLASS.IN) return step;
    const qtype = qs[0].type;
    if (qtype !== QTYPE.A && qtype !== QTYPE.AAAA) return step;
    let found: ReturnType<typeof answerAddresses>;
    try {
      found = answerAddresses(resp, qtype);
    } catch {
      // Not ours to judge: a malformed answer goes out as it came.
      return step;
    }
    const candidates = found.candidates;
    if (candidates.length < 2) return step;
    const dnssec = found.signed || ((ctx.query.edns?.flags ?? 0) & EDNS_DO) !== 0;
    if (dnssec && this.opts.dnssecSkip) return step;
    const topN = dnssec ? 0 : this.opts.topN;

    const now = this.now();
    const scores: (Score | undefined)[] = candidates.map((c) => this.cache?.get(c.address, now));
    const live: boolean[] = candidates.map(() => false);
    const missing: number[] = [];
    scores.forEach((s, i) => s === undefined && missing.push(i));
    const apply = (): Step => this.apply(ctx, resp, candidates, scores, live, topN, step);
    if (missing.length === 0) return apply();
    const probes = missing.map((i) => this.prober.probe(candidates[i].address));
    const mode = this.opts.mode;
    if (mode === "background" || (mode === "first_success" && scores.some((s) => s?.ok === true))) return apply();
    return new Promise<Step>((resolve) => {
      let pending = probes.length;
      let over = false;
      const end = (): void => {
        if (over) return;
        over = true;
        clearTimeout(timer);
        resolve(apply());
      };
      const timer = setTimeout(end, this.opts.maxWaitMs);
      probes.forEach((p, k) => {
        void p.then((outcome) => {
          if (over) return;
          const i = missing[k];
          if (!("skipped" in outcome)) {
            scores[i] = outcome;
            live[i] = true;
          }
          pending--;
          if (pending === 0 || (mode === "first_success" && outcome.ok)) end();
        });
      });
    });
  }

  private apply(ctx: DnsContext, resp: DnsResponse, candidates: Candidate[], scores: (Score | undefined)[], live: boolean[], topN: number, step: Step): Step {
    let order = rank(scores);
    if (order === null) {
      this.selected.fallback.value++;
      return step;
    }
    this.selected[live[order[0]] ? "probe" : "cache"].value++;
    if (topN > 0 && order.length > topN) order = order.slice(0, topN);
    const out = rewrite(resp, candidates, order);
    if (out !== null) ctx.response = out;
    return step;
  }

  destroy(): void {
    this.prober.close();
    this.cache?.clear();
  }
}

function probeMetrics(ctx: CreateContext): ProbeMetrics {
  const m = ctx.services.metrics;
  const tag = ctx.tag;
  const probes = m.counter("ip_selector_probe_total", "Probe attempts by method and result (success, failure, timeout, unavailable)", ["plugin_tag", "method", "result"]);
  const seconds = m.histogram("ip_selector_probe_duration_seconds", "Connect time of successful probe attempts", ["plugin_tag", "method"], DNS_DURATION_BUCKETS);
  const dropped = m.counter("ip_selector_dropped_probe_total", "Probes not started: max_parallel_probes reached, or the address was being probed already", ["plugin_tag", "reason"]);
  const byMethod = new Map<string, ReturnType<ProbeMetrics["method"]>>();
  return {
    method(label) {
      let cells = byMethod.get(label);
      if (cells === undefined) {
        const cell = (result: string): Cell => probes({ plugin_tag: tag, method: label, result });
        cells = { success: cell("success"), failure: cell("failure"), timeout: cell("timeout"), unavailable: cell("unavailable"), seconds: seconds({ plugin_tag: tag, method: label }) };
        byMethod.set(label, cells);
      }
      return cells;
    },
    droppedLimit: dropped({ plugin_tag: tag, reason: "parallel_limit" }),
    droppedInflight: dropped({ plugin_tag: tag, reason: "inflight" }),
  };
}

export const ipSelector = definePlugin<IpSelectorArgs, "executor">({
  type: "ip_selector",
  kind: "executor",
  feature: "core",
  summary: "Orders (or trims to top_n) the answer's A/AAAA records by TCP connect time, probed and remembered per address; fail-open.",
  schema: ipSelectorSchema,
  shorthand: (raw) => raw ?? {},
  quickSetup: parseQuickSetup,
  check(args, env) {
    const problems = optionProblems(args);
    const unknown = args.outbound === undefined ? null : env.outboundProblem(args.outbound);
    return unknown === null ? problems : [...problems, { path: ["outbound"], message: unknown }];
  },
  create(args, ctx) {
    const opts = compileOptions(args);
    const profile = ctx.outbound(args.outbound);
    if (opts.methods.some((m) => m.kind === "unavailable")) ctx.log.warn({ plugin: ctx.tag }, "ip_selector: ping probes are not supported by Sluice; that method counts as unavailable and the next one is tried");
    const m = ctx.services.metrics;
    const source = m.counter("ip_selector_selected_total", "Answers shaped from probe results of this query (probe), remembered results only (cache), or left unchanged as no address was known to connect (fallback)", ["plugin_tag", "source"]);
    const selected: Record<Source, Cell> = { probe: source({ plugin_tag: ctx.tag, source: "probe" }), cache: source({ plugin_tag: ctx.tag, source: "cache" }), fallback: source({ plugin_tag: ctx.tag, source: "fallback" }) };
    const entries = m.gauge("ip_selector_cache_entries", "Addresses with a remembered probe result", ["plugin_tag"])({ plugin_tag: ctx.tag });
    const probes = probeMetrics(ctx);
    for (const method of opts.methods) probes.method(method.label);
    const impl = new IpSelector(opts, ctx.services.clockShift, selected, entries, probes, profile.proxy !== null || profile.bind !== null ? profile : null);
    return { continuation: true, execute: (dns, next) => impl.execute(dns, next), destroy: () => impl.destroy() };
  },
});
