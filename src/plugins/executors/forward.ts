// `forward`: sends the query to one or more upstream DNS servers and passes their answer through.

import { readFile } from "node:fs/promises";
import { encodeMessage } from "../../dns/message.js";
import type { DnsResponse } from "../../dns/response.js";
import type { DnsContext } from "../../engine/context.js";
import { durationSchema, parseDuration } from "../../engine/duration.js";
import { Step, type StepResult } from "../../engine/types.js";
import { parseBootstrap, parseDialAddr, parseUpstreamAddr } from "../../engine/upstream/address.js";
import { UpstreamError, type CancelScope } from "../../engine/upstream/exchange.js";
import { describeFailure, ForwardError, race, type Entrant } from "../../engine/upstream/racing.js";
import { Upstream } from "../../engine/upstream/upstream.js";
import { DNS_DURATION_BUCKETS, type Cell, type MetricsHub, type Observer } from "../../observability/metrics.js";
import { ArgError, definePlugin, type ArgProblem } from "../../registry/types.js";

interface UpstreamArgs {
  addr: string;
  tag?: string;
  timeout?: number | string;
  bootstrap?: string;
  bootstrap_version?: 4 | 6;
  enable_pipeline?: boolean;
  max_conns?: number;
  idle_timeout?: number | string;
  insecure_skip_verify?: boolean;
  dial_addr?: string;
  ca?: string;
}

interface ForwardArgs {
  upstreams: UpstreamArgs[];
  concurrent: number;
  short_circuit: boolean;
}

/** How many upstreams a quick setup with several addresses asks at once. */
const QUICK_SETUP_CONCURRENT = 3;

const schema = {
  type: "object",
  additionalProperties: false,
  required: ["upstreams"],
  properties: {
    upstreams: {
      type: "array",
      minItems: 1,
      items: {
        type: "object",
        additionalProperties: false,
        required: ["addr"],
        properties: {
          addr: { type: "string", minLength: 1 },
          tag: { type: "string", minLength: 1 },
          timeout: durationSchema,
          bootstrap: { type: "string", minLength: 1 },
          bootstrap_version: { enum: [4, 6] },
          enable_pipeline: { type: "boolean" },
          max_conns: { type: "integer", minimum: 1, maximum: 1024 },
          idle_timeout: durationSchema,
          insecure_skip_verify: { type: "boolean" },
          dial_addr: { type: "string", minLength: 1 },
          ca: { type: "string", minLength: 1 },
        },
      },
    },
    concurrent: { type: "integer", minimum: 1, maximum: 3, default: 1 },
    short_circuit: { type: "boolean", default: false },
  },
} as const;

function checkUpstream(u: UpstreamArgs, i: number): ArgProblem[] {
  const problems: ArgProblem[] = [];
  const at = (field: string): (string | number)[] => ["upstreams", i, field];
  const attempt = (field: string, fn: () => void): void => {
    try {
      fn();
    } catch (err) {
      problems.push({ path: at(field), message: (err as Error).message });
    }
  };
  let encrypted = true;
  attempt("addr", () => {
    const protocol = parseUpstreamAddr(u.addr).protocol;
    encrypted = protocol === "tls" || protocol === "https";
  });
  for (const field of ["insecure_skip_verify", "ca"] as const) {
    if (u[field] !== undefined && !encrypted) problems.push({ path: at(field), message: `${field} applies to tls:// and https:// upstreams only` });
  }
  if (u.dial_addr !== undefined) attempt("dial_addr", () => parseDialAddr(u.dial_addr as string));
  if (u.bootstrap !== undefined) attempt("bootstrap", () => parseBootstrap(u.bootstrap as string));
  if (u.timeout !== undefined) {
    attempt("timeout", () => {
      if (parseDuration(u.timeout as number | string) <= 0) throw new Error("timeout must be greater than zero");
    });
  }
  if (u.idle_timeout !== undefined) attempt("idle_timeout", () => parseDuration(u.idle_timeout as number | string));
  return problems;
}

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

interface ConnStats {
  opened: Cell;
  resumed: Cell;
}

interface CallStats {
  query: Cell;
  success: Cell;
  error: Cell;
  timeout: Cell;
  duration: Observer;
}

function callStats(metrics: MetricsHub, prefix: string, what: string, labels: Record<string, string>): CallStats {
  const names = Object.keys(labels);
  const c = (suffix: string, help: string): Cell => metrics.counter(`${prefix}_${suffix}`, help, names)(labels);
  return {
    query: c("query_total", `${what}: queries started`),
    success: c("success_total", `${what}: queries that produced an answer`),
    error: c("error_total", `${what}: queries that failed (timeouts included)`),
    timeout: c("timeout_total", `${what}: queries that failed by timing out`),
    duration: metrics.histogram(`${prefix}_query_duration_seconds`, `${what}: time to an answer, seconds`, names, DNS_DURATION_BUCKETS)(labels),
  };
}

function connStats(metrics: MetricsHub, labels: Record<string, string>): ConnStats {
  const names = Object.keys(labels);
  return {
    opened: metrics.counter("forward_upstream_connections_total", "Per upstream: connections opened (TCP, TLS, or HTTP/2 sessions for https://)", names)(labels),
    resumed: metrics.counter("forward_upstream_tls_resumed_total", "Per upstream: TLS handshakes that resumed an earlier session", names)(labels),
  };
}

/** An upstream that counts its own exchanges. */
class MeteredUpstream implements Entrant {
  constructor(
    readonly upstream: Upstream,
    private readonly stats: CallStats,
  ) {}

  get name(): string {
    return this.upstream.name;
  }

  get timeoutMs(): number {
    return this.upstream.timeoutMs;
  }

  exchange(query: Buffer, scope: CancelScope | null, budgetMs?: number): Promise<DnsResponse> {
    const s = this.stats;
    s.query.value++;
    const started = performance.now();
    return this.upstream.exchange(query, scope, budgetMs).then(
      (answer) => {
        s.success.value++;
        s.duration.observe((performance.now() - started) / 1000);
        return answer;
      },
      (err: unknown) => {
        // A race loser that was cancelled neither succeeded nor failed.
        const kind = err instanceof UpstreamError ? err.kind : "error";
        if (kind !== "cancelled") s.error.value++;
        if (kind === "timeout") s.timeout.value++;
        throw err;
      },
    );
  }
}

export const forward = definePlugin<ForwardArgs, "executor">({
  type: "forward",
  kind: "executor",
  feature: "core",
  summary: "Forwards the query to upstream DNS servers (UDP, TCP, pipelined TCP, TLS, HTTPS) and passes the answer through.",
  schema,
  quickSetup(param) {
    const addrs: string[] = [];
    let shortCircuit = false;
    for (const token of param.split(/[\s,]+/).filter((t) => t.length > 0)) {
      const m = /^short_circuit(?:=(.*))?$/.exec(token);
      if (!m) {
        addrs.push(token);
        continue;
      }
      if (m[1] !== undefined && m[1] !== "true" && m[1] !== "false") throw new ArgError(`'${token}': short_circuit takes true or false`);
      shortCircuit = m[1] !== "false";
    }
    if (addrs.length === 0) throw new ArgError("forward needs at least one upstream address (forward <addr> [<addr>...] [short_circuit])");
    return { upstreams: addrs.map((addr) => ({ addr })), concurrent: addrs.length > 1 ? QUICK_SETUP_CONCURRENT : 1, short_circuit: shortCircuit };
  },
  check: (args) => args.upstreams.flatMap(checkUpstream),
  async create(args, ctx) {
    const metrics = ctx.services.metrics;
    const names = upstreamNames(args.upstreams);
    const cas = await Promise.all(args.upstreams.map((u, i) => readCa(u.ca, i, (p) => ctx.resolvePath(p))));
    const entrants = args.upstreams.map((u, i) => {
      const conn = connStats(metrics, { plugin_tag: ctx.tag, upstream: names[i] });
      const upstream = new Upstream({
        addr: u.addr,
        name: names[i],
        timeoutMs: u.timeout === undefined ? undefined : parseDuration(u.timeout),
        bootstrap: u.bootstrap,
        bootstrapVersion: u.bootstrap_version,
        pipeline: u.enable_pipeline,
        maxConns: u.max_conns,
        idleTimeoutMs: u.idle_timeout === undefined ? undefined : parseDuration(u.idle_timeout),
        insecureSkipVerify: u.insecure_skip_verify,
        dialAddr: u.dial_addr,
        ca: cas[i],
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
        const pending = only ? only.exchange(query, null) : race(entrants, concurrent, query);
        return pending.then((answer) => {
          stats.success.value++;
          stats.duration.observe((performance.now() - started) / 1000);
          dns.response = answer;
          return done;
        }, fail);
      },
      destroy() {
        for (const e of entrants) e.upstream.close();
      },
    };
  },
});
