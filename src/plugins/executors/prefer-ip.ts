// `prefer_ipv4` / `prefer_ipv6`: for dual-stack names, answer the other family with empty NOERROR so clients use the preferred one.

import { QCLASS, QTYPE, RCODE } from "../../dns/constants.js";
import { replyTo } from "../../dns/message.js";
import { syntheticSoa } from "../../dns/rdata.js";
import { DnsResponse } from "../../dns/response.js";
import { SECTION_ANSWER } from "../../dns/view.js";
import type { DnsContext } from "../../engine/context.js";
import { durationSchema, parseDuration } from "../../engine/duration.js";
import { isPromise, runNext, Step, type Continuation, type StepResult } from "../../engine/types.js";
import type { Cell } from "../../observability/metrics.js";
import { ArgError, definePlugin, type AnyDefinition, type ArgProblem } from "../../registry/types.js";

interface PreferArgs {
  cache: boolean;
  cache_ttl: number | string;
}

/** Names remembered at most; the oldest goes first. */
const CACHE_CAPACITY = 4096;
/** How long a finished non-preferred query waits for its probe. */
const PROBE_GRACE_MS = 500;
/** TTL of the SOA on the synthesized NODATA, as for `hosts`: clients cache the absence briefly. */
const NODATA_SOA_TTL = 300;

/** "Does this name have records of the preferred family?", per name, for a fixed time. */
class PreferenceCache {
  private readonly entries = new Map<string, { exists: boolean; expires: number }>();
  constructor(private readonly ttlMs: number) {}

  get(name: string, now: number): boolean | undefined {
    const e = this.entries.get(name);
    if (e === undefined) return undefined;
    if (e.expires > now) return e.exists;
    this.entries.delete(name);
    return undefined;
  }

  set(name: string, exists: boolean, now: number): void {
    const entries = this.entries;
    entries.delete(name);
    // Every entry lives equally long, so insertion order is expiry order: drop from the front.
    for (const [key, e] of entries) {
      if (entries.size < CACHE_CAPACITY && e.expires > now) break;
      entries.delete(key);
    }
    entries.set(name, { exists, expires: now + this.ttlMs });
  }
}

type Outcome = { ok: true; step: Step } | { ok: false; err: unknown };
const succeeded = (step: Step): Outcome => ({ ok: true, step });
const failed = (err: unknown): Outcome => ({ ok: false, err });

/** Runs the rest of the sequence on `branch`, never throwing: failures become an Outcome. */
function settle(branch: DnsContext, next: Continuation | null): Outcome | Promise<Outcome> {
  try {
    const r = runNext(branch, next);
    return isPromise(r) ? r.then(succeeded, failed) : succeeded(r);
  } catch (err) {
    return failed(err);
  }
}

/** true: the answer has the preferred type; false: a definite answer without it; undefined: no verdict. */
function verdict(resp: DnsResponse | null, preferred: number): boolean | undefined {
  if (resp === null || resp.truncated) return undefined;
  for (const r of resp.index.records) if (r.section === SECTION_ANSWER && r.type === preferred) return true;
  const rcode = resp.rcode;
  return rcode === RCODE.NOERROR || rcode === RCODE.NXDOMAIN ? false : undefined;
}

function waitAtMost<T>(p: Promise<T>, ms: number): Promise<T | undefined> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<undefined>((resolve) => {
    timer = setTimeout(resolve, ms, undefined);
  });
  return Promise.race([p, timeout]).finally(() => clearTimeout(timer));
}

class PreferIp {
  private readonly cache: PreferenceCache | null;

  constructor(
    private readonly preferred: number,
    private readonly other: number,
    args: PreferArgs,
    private readonly suppressed: Cell,
    private readonly probes: Cell,
  ) {
    this.cache = args.cache ? new PreferenceCache(parseDuration(args.cache_ttl)) : null;
  }

  execute(ctx: DnsContext, next: Continuation | null): StepResult {
    const qs = ctx.query.questions;
    if (qs.length !== 1 || qs[0].class !== QCLASS.IN) return runNext(ctx, next);
    const type = qs[0].type;
    if (type === this.preferred) return this.preferredQuery(ctx, next);
    if (type !== this.other) return runNext(ctx, next);
    const known = this.cache?.get(ctx.qname, performance.now());
    if (known === true) return this.suppress(ctx);
    if (known === false) return runNext(ctx, next);
    return this.probe(ctx, next);
  }

  private remember(name: string, exists: boolean | undefined): void {
    if (this.cache !== null && exists !== undefined) this.cache.set(name, exists, performance.now());
  }

  private preferredQuery(ctx: DnsContext, next: Continuation | null): StepResult {
    const name = ctx.qname;
    const r = runNext(ctx, next);
    if (this.cache === null) return r;
    const after = (step: Step): Step => {
      this.remember(name, verdict(ctx.response, this.preferred));
      return step;
    };
    return isPromise(r) ? r.then(after) : after(r);
  }

  /** Empty NOERROR (with a placeholder SOA) for the non-preferred family; ends the pipeline. */
  private suppress(ctx: DnsContext): Step {
    this.suppressed.value++;
    const reply = replyTo(ctx.query);
    reply.authorities = [syntheticSoa(ctx.query.questions[0].name, NODATA_SOA_TTL)];
    ctx.response = DnsResponse.fromMessage(reply);
    return Step.Stop;
  }

  /** Uses the original branch's result (its error included). */
  private useMain(ctx: DnsContext, main: DnsContext, out: Outcome): Step {
    if (!out.ok) throw out.err;
    ctx.adopt(main);
    return out.step;
  }

  /** Unknown name: the rest runs twice, as asked and as a probe for the preferred type, each on a copy. */
  private probe(ctx: DnsContext, next: Continuation | null): StepResult {
    this.probes.value++;
    const name = ctx.qname;
    const main = ctx.copy();
    const probe = ctx.copy();
    probe.query.questions[0].type = this.preferred;
    probe.queryChanged();
    const mainOut = settle(main, next);
    const probeOut = settle(probe, next);
    const probeVerdict = (o: Outcome): boolean | undefined => {
      const v = o.ok ? verdict(probe.response, this.preferred) : undefined;
      this.remember(name, v);
      return v;
    };
    if (!isPromise(mainOut) && !isPromise(probeOut)) {
      return probeVerdict(probeOut) === true ? this.suppress(ctx) : this.useMain(ctx, main, mainOut);
    }
    return this.race(ctx, main, Promise.resolve(mainOut), Promise.resolve(probeOut).then(probeVerdict));
  }

  private async race(ctx: DnsContext, main: DnsContext, mainP: Promise<Outcome>, probeP: Promise<boolean | undefined>): Promise<Step> {
    const probeFirst = await Promise.race([mainP.then(() => false), probeP.then(() => true)]);
    if (probeFirst) {
      if ((await probeP) === true) return this.suppress(ctx);
      return this.useMain(ctx, main, await mainP);
    }
    const mainOut = await mainP;
    if ((await waitAtMost(probeP, PROBE_GRACE_MS)) === true) return this.suppress(ctx);
    return this.useMain(ctx, main, mainOut);
  }
}

function preferDefinition(type: "prefer_ipv4" | "prefer_ipv6"): AnyDefinition {
  const v4 = type === "prefer_ipv4";
  const preferred = v4 ? QTYPE.A : QTYPE.AAAA;
  const other = v4 ? QTYPE.AAAA : QTYPE.A;
  return definePlugin<PreferArgs, "executor">({
    type,
    kind: "executor",
    feature: "core",
    summary: `For names with ${v4 ? "IPv4" : "IPv6"} addresses, answers ${v4 ? "AAAA" : "A"} queries with empty NOERROR.`,
    schema: {
      type: "object",
      additionalProperties: false,
      properties: {
        cache: { type: "boolean", default: true },
        cache_ttl: { ...durationSchema, default: 3600 },
      },
    },
    shorthand: (raw) => raw ?? {},
    quickSetup(param) {
      if (param.length > 0) throw new ArgError(`${type} takes no parameter (got '${param}'); declare it under plugins to set cache options`);
      return {};
    },
    check(args) {
      const problems: ArgProblem[] = [];
      try {
        if (args.cache && parseDuration(args.cache_ttl) <= 0) problems.push({ path: ["cache_ttl"], message: "cache_ttl must be greater than zero while cache is on" });
      } catch (err) {
        problems.push({ path: ["cache_ttl"], message: (err as Error).message });
      }
      return problems;
    },
    create(args, ctx) {
      const labels = { plugin_tag: ctx.tag };
      const metrics = ctx.services.metrics;
      const suppressed = metrics.counter("prefer_ip_suppressed_total", "Queries for the non-preferred family answered with empty NOERROR", ["plugin_tag"])(labels);
      const probes = metrics.counter("prefer_ip_probe_total", "Non-preferred queries that probed the preferred family", ["plugin_tag"])(labels);
      const impl = new PreferIp(preferred, other, args, suppressed, probes);
      return { continuation: true, execute: (dns, next) => impl.execute(dns, next) };
    },
  });
}

export const preferIpv4 = preferDefinition("prefer_ipv4");
export const preferIpv6 = preferDefinition("prefer_ipv6");
