// `http_request`: a webhook per query, before or after the rest of the sequence. Asynchronous (the
// default): the query captures the template values it needs and queues the call (bounded by
// queue_size, sent by max_concurrent senders); a full queue drops the call, counts it and applies
// error_mode, so DNS never waits for HTTP. Synchronous: the query awaits the call (within timeout)
// and a failure applies error_mode. See docs/plugins.md#http_request.

import type { DnsContext } from "../../../engine/context.js";
import { isPromise, runNext, Step, type Continuation, type StepResult } from "../../../engine/types.js";
import { HookClient, SendError } from "../../../net/http-send.js";
import { Outbound } from "../../../net/outbound.js";
import { definePlugin, type ExecutorPlugin } from "../../../registry/types.js";
import { failedStep, HookError, HookFailureLog } from "../hooks/failures.js";
import { WorkQueue } from "../hooks/work-queue.js";
import { buildRequest, checkRequest, compileRequest, httpRequestSchema, type HttpRequestArgs } from "./request.js";

const asHookError = (err: unknown): HookError =>
  err instanceof HookError ? err : err instanceof SendError ? new HookError(err.message, err.kind) : new HookError(err instanceof Error ? err.message : String(err), "network");

export const httpRequest = definePlugin<HttpRequestArgs, "executor">({
  type: "http_request",
  kind: "executor",
  feature: "webhook",
  summary: "Sends an HTTP request (a webhook) per query, rendered from ${key} templates, before or after the rest of the sequence; asynchronous through a bounded queue, or awaited.",
  schema: httpRequestSchema,
  check: (args, env) => checkRequest(args, env),
  create(args, ctx): ExecutorPlugin {
    const compiled = compileRequest(args);
    const m = ctx.services.metrics;
    const labels = { plugin_tag: ctx.tag };
    const dispatched = m.counter("http_request_dispatch_total", "http_request: requests sent (each attempt, redirects not counted)", ["plugin_tag"])(labels);
    const dropped = m.counter("http_request_dropped_total", "http_request: requests not sent because the queue was full or the plugin was stopping", ["plugin_tag"])(labels);
    const errorCell = m.counter("http_request_error_total", "http_request: requests that failed, by reason (timeout, status, network, refused, redirects, invalid, cancelled)", ["plugin_tag", "reason"]);
    // A drop is logged like a failure (first one of a period, then a summary) but counted as dropped.
    const failures = new HookFailureLog(ctx.log, "http_request failed", ctx.failureSummaryMs, (reason) => (reason === "dropped" ? dropped : errorCell({ ...labels, reason })));
    // The egress profile (none: direct); the plugin's own socks5 replaces only its proxy (OxiDNS's rule).
    const profile = ctx.outbound(args.outbound);
    const outbound =
      compiled.socks5 === null ? profile : new Outbound({ name: profile.name, bind: profile.bind, socks5: compiled.socks5, resolver: profile.resolver }, (host, family) => profile.lookup(host, family));
    const client = new HookClient({ timeoutMs: compiled.timeoutMs, maxRedirects: args.max_redirects, insecureSkipVerify: args.insecure_skip_verify, outbound, maxSockets: args.max_concurrent });
    const queued = m.gauge("http_request_queued", "http_request: requests waiting for a sender (at most queue_size)", ["plugin_tag"])(labels);
    const queue = new WorkQueue(args.queue_size, args.max_concurrent, () => dropped.value++, queued);
    const mode = args.error_mode;
    const set = compiled.set;

    // When the queue gives up on its running calls (destroy), the client's connections close under them:
    // one listener for the plugin, not one per call.
    queue.signal.addEventListener("abort", () => client.close(), { once: true });

    /** One call for captured values; rejects with a HookError (counted and logged here). */
    const send = async (values: string[], signal: AbortSignal | undefined): Promise<void> => {
      try {
        const req = buildRequest(compiled, values);
        dispatched.value++;
        await client.send(req, signal);
      } catch (err) {
        const e = asHookError(err);
        failures.record(e, { method: compiled.method, url: compiled.url.constant ?? undefined });
        throw e;
      }
    };

    const queueFull = new HookError("the request queue is full (queue_size); the request was dropped", "dropped");
    /** The hook itself: Next when the call was queued or succeeded, else what error_mode says. */
    const fire = (dns: DnsContext): StepResult => {
      if (args.async) {
        // A full queue is checked first: a dropped call reads nothing from the query.
        if (queue.full) {
          failures.record(queueFull);
          return failedStep(mode, queueFull);
        }
        const values = set.capture(dns);
        queue.offer(() => send(values, undefined).catch(() => undefined));
        return Step.Next;
      }
      const values = set.capture(dns);
      // A background run (cron) that is cancelled stops its call.
      return send(values, dns.signal ?? undefined).then(
        () => Step.Next,
        (err: unknown) => failedStep(mode, asHookError(err)),
      );
    };

    /** After the rest: its step stands unless the hook says Stop (or fails). */
    const after = (dns: DnsContext, step: Step): StepResult => {
      const r = fire(dns);
      if (isPromise(r)) return r.then((s) => (s === Step.Next ? step : s));
      return r === Step.Next ? step : r;
    };

    const lifecycle = {
      async destroy(): Promise<void> {
        // Calls already queued still go out, within one timeout; then what is left is dropped.
        await queue.close(compiled.timeoutMs);
        client.close();
        failures.close();
      },
    };
    if (args.phase === "before") return { ...lifecycle, execute: (dns) => fire(dns) };
    return {
      ...lifecycle,
      continuation: true,
      execute(dns: DnsContext, next: Continuation | null): StepResult {
        const res = runNext(dns, next);
        return isPromise(res) ? res.then((step) => after(dns, step)) : after(dns, res);
      },
    };
  },
});
