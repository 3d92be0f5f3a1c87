// `metrics_collector`: counts the queries that pass through the rest of the sequence, their errors and latency.

import type { DnsContext } from "../../engine/context.js";
import { isPromise, runNext, type Continuation, type StepResult } from "../../engine/types.js";
import { ArgError, definePlugin } from "../../registry/types.js";

interface MetricsCollectorArgs {
  name: string;
}

/** Seconds; DNS answers range from sub-millisecond (local/cached) to multi-second (timeouts). */
const DURATION_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10] as const;

const NAME = /^[^\s"\\]+$/;

/** `metrics_collector`, a name, or `{name}`. */
function shorthand(raw: unknown): unknown {
  if (raw === null || raw === undefined || raw === "") return {};
  if (typeof raw === "string") return { name: raw.trim() };
  return raw;
}

export const metricsCollector = definePlugin<MetricsCollectorArgs, "executor">({
  type: "metrics_collector",
  kind: "executor",
  feature: "core",
  summary: "Counts queries through the rest of the sequence: totals, errors, in-flight, latency (histogram).",
  schema: {
    type: "object",
    additionalProperties: false,
    properties: { name: { type: "string", minLength: 1, maxLength: 64, default: "default" } },
  },
  shorthand,
  quickSetup: (param) => param,
  check: (args) => (NAME.test(args.name) ? [] : [{ path: ["name"], message: `'${args.name}' is not a usable name (no spaces, quotes or backslashes)` }]),
  create(args, ctx) {
    if (!NAME.test(args.name)) throw new ArgError(`'${args.name}' is not a usable name`, ["name"]);
    const labels = { plugin_tag: ctx.tag, name: args.name };
    const names = ["plugin_tag", "name"];
    const m = ctx.services.metrics;
    const total = m.counter("query_total", "metrics_collector: queries observed", names)(labels);
    const errors = m.counter("query_error_total", "metrics_collector: queries that ended without a response or with an error", names)(labels);
    const inflight = m.gauge("query_inflight", "metrics_collector: queries in progress", names)(labels);
    const duration = m.histogram("query_duration_seconds", "metrics_collector: time to answer, seconds", names, DURATION_BUCKETS)(labels);

    const finish = (dns: DnsContext, started: number): void => {
      inflight.value--;
      if (dns.response === null) {
        errors.value++;
        return;
      }
      duration.observe((performance.now() - started) / 1000);
    };
    const failed = (err: unknown): never => {
      inflight.value--;
      errors.value++;
      throw err;
    };

    return {
      continuation: true,
      execute(dns: DnsContext, next: Continuation | null): StepResult {
        total.value++;
        inflight.value++;
        const started = performance.now();
        let res: StepResult;
        try {
          res = runNext(dns, next);
        } catch (err) {
          return failed(err);
        }
        if (isPromise(res)) {
          return res.then((step) => {
            finish(dns, started);
            return step;
          }, failed);
        }
        finish(dns, started);
        return res;
      },
    };
  },
});
