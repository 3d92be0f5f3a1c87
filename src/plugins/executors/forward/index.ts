// `forward`: sends the query to one or more upstream DNS servers and passes their answer through.
// response_selection `fastest` (the default) races them (src/engine/upstream/racing.ts); the other
// selections ask through src/engine/upstream/selection.ts.

import { readFile } from "node:fs/promises";
import { encodeMessage } from "../../../dns/message.js";
import type { DnsResponse } from "../../../dns/response.js";
import type { DnsContext } from "../../../engine/context.js";
import { parseDuration } from "../../../engine/duration.js";
import { Step, type StepResult } from "../../../engine/types.js";
import { UpstreamError } from "../../../engine/upstream/exchange.js";
import { describeFailure, ForwardError, race, type Entrant } from "../../../engine/upstream/racing.js";
import { Balancer, consensus, firstDefinite, gather, preferPositive } from "../../../engine/upstream/selection.js";
import { Upstream } from "../../../engine/upstream/upstream.js";
import { ArgError, definePlugin } from "../../../registry/types.js";
import { checkArgs, quickSetupArgs, schema, type ForwardArgs, type UpstreamArgs } from "./args.js";
import { callStats, connStats, MeteredUpstream, noConsensusCell } from "./metrics.js";

/** Metric names per upstream: its tag or addr, `#<index>` added to repeats. */
function upstreamNames(list: readonly UpstreamArgs[]): string[] {
  const seen = new Set<string>();
  return list.map((u, i) => {
    const base = u.tag ?? u.addr;
    const name = seen.has(base) ? `${base}#${i}` : base;
    seen.add(base);
    return name;
  });
}

/** The `ca` file of an upstream, read when the plugin is created. */
async function readCa(path: string | undefined, i: number, resolvePath: (p: string) => string): Promise<Buffer | undefined> {
  if (path === undefined) return undefined;
  let pem: Buffer;
  try {
    pem = await readFile(resolvePath(path));
  } catch (err) {
    throw new ArgError(`cannot read ca '${path}': ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`, ["upstreams", i, "ca"]);
  }
  if (!pem.includes("-----BEGIN CERTIFICATE-----")) throw new ArgError(`ca '${path}' holds no PEM certificate (-----BEGIN CERTIFICATE-----)`, ["upstreams", i, "ca"]);
  return pem;
}

/** Every index, from a random one round the list (the wave starts there). */
function randomOrder(n: number): number[] {
  const first = Math.floor(Math.random() * n);
  return Array.from({ length: n }, (_, k) => (first + k) % n);
}

type Ask = (query: Buffer) => Promise<DnsResponse>;

export const forward = definePlugin<ForwardArgs, "executor">({
  type: "forward",
  kind: "executor",
  feature: "core",
  summary: "Forwards the query to upstream DNS servers (UDP, TCP, pipelined TCP, TLS, HTTPS) and passes the answer through.",
  schema,
  quickSetup: (param) => quickSetupArgs(param),
  check: (args, env) => checkArgs(args, env),
  async create(args, ctx) {
    const metrics = ctx.services.metrics;
    const names = upstreamNames(args.upstreams);
    const cas = await Promise.all(args.upstreams.map((u, i) => readCa(u.ca, i, (p) => ctx.resolvePath(p))));
    const entrants = args.upstreams.map((u, i) => {
      const conn = connStats(metrics, { plugin_tag: ctx.tag, upstream: names[i] });
      const outbound = u.outbound ?? args.outbound;
      const upstream = new Upstream({
        addr: u.addr,
        name: names[i],
        timeoutMs: u.timeout === undefined ? undefined : parseDuration(u.timeout),
        bootstrap: u.bootstrap,
        bootstrapVersion: u.bootstrap_version,
        pipeline: u.enable_pipeline,
        maxConns: u.max_conns,
        minConns: u.min_conns,
        idleTimeoutMs: u.idle_timeout === undefined ? undefined : parseDuration(u.idle_timeout),
        insecureSkipVerify: u.insecure_skip_verify,
        dialAddr: u.dial_addr,
        port: u.port,
        ca: cas[i],
        socks5: u.socks5,
        ...(outbound === undefined ? {} : { outbound: ctx.outbound(outbound) }),
        onConnect: () => conn.opened.value++,
        onHandshake: (resumed) => {
          if (resumed) conn.resumed.value++;
        },
      });
      return new MeteredUpstream(upstream, callStats(metrics, "forward_upstream", "Per upstream", { plugin_tag: ctx.tag, upstream: names[i] }));
    });
    const stats = callStats(metrics, "forward", "Forward calls", { plugin_tag: ctx.tag });
    const only = entrants.length === 1 ? entrants[0] : null;
    const concurrent = args.concurrent;
    const done = args.short_circuit ? Step.Stop : Step.Next;
    // null: fastest, today's race, kept as its own code path.
    const ask = only ? null : selector(args, entrants, () => performance.now() + ctx.services.clockShift.ms, () => noConsensusCell(metrics, ctx.tag));

    const fail = (err: unknown): never => {
      stats.error.value++;
      const timedOut = err instanceof ForwardError ? err.timedOut : err instanceof UpstreamError && err.kind === "timeout";
      if (timedOut) stats.timeout.value++;
      if (err instanceof ForwardError) throw err;
      throw new ForwardError(describeFailure(only ? only.name : ctx.tag, err), timedOut);
    };

    return {
      execute(dns: DnsContext): StepResult {
        // The client's bytes go out as received (EDNS included); each exchange copies them with its own ID.
        const query = dns.queryWire ?? encodeMessage(dns.query);
        stats.query.value++;
        const started = performance.now();
        const pending = only ? only.exchange(query, null) : ask === null ? race(entrants, concurrent, query) : ask(query);
        return pending.then((answer) => {
          stats.success.value++;
          stats.duration.observe((performance.now() - started) / 1000);
          dns.response = answer;
          return done;
        }, fail);
      },
      init() {
        // min_conns: the kept connections open before the first query.
        for (const e of entrants) e.upstream.warm();
      },
      destroy() {
        for (const e of entrants) e.upstream.close();
      },
    };
  },
});

/** How a response_selection other than fastest asks several upstreams; null for fastest. */
function selector(args: ForwardArgs, entrants: readonly Entrant[], now: () => number, noConsensus: () => { value: number }): Ask | null {
  const n = entrants.length;
  const wave = Math.min(args.concurrent, n);
  switch (args.response_selection) {
    case "fastest":
      return null;
    case "balanced": {
      const balancer = new Balancer(n, now);
      const tracked = entrants.map((e, i) => balancer.track(e, i));
      return (query) => gather(tracked, balancer.order(), wave, query, firstDefinite());
    }
    case "prefer_positive":
      return (query) => gather(entrants, randomOrder(n), wave, query, preferPositive());
    case "consensus": {
      const needed = Math.floor(wave / 2) + 1;
      const cell = noConsensus();
      return (query) =>
        gather(entrants, randomOrder(n), wave, query, consensus(needed, () => void cell.value++));
    }
  }
}
