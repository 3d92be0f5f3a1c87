// One configured upstream: address resolution, then UDP (with the TCP retry on a truncated
// answer) or TCP, all inside one deadline per query.

import type { DnsResponse } from "../../dns/response.js";
import { parseBootstrap, parseUpstreamAddr, type UpstreamAddress } from "./address.js";
import { bootstrapResolver, CachingResolver, StaticResolver, systemLookup, type Resolver } from "./bootstrap.js";
import { Ticket, UpstreamError, type CancelScope } from "./exchange.js";
import { TcpPool } from "./tcp.js";
import { UdpTransport } from "./udp.js";

export const DEFAULT_TIMEOUT_MS = 5_000;
export const DEFAULT_MAX_CONNS = 2;
export const DEFAULT_IDLE_TIMEOUT_MS = 10_000;

export interface UpstreamOptions {
  addr: string;
  /** Name used in messages and the `upstream` metric label. */
  name: string;
  timeoutMs?: number;
  /** `ip[:port]` of a plain DNS server that resolves a hostname `addr`. */
  bootstrap?: string;
  bootstrapVersion?: 4 | 6;
  pipeline?: boolean;
  maxConns?: number;
  idleTimeoutMs?: number;
}

/** The transports towards one resolved IP. */
interface Target {
  ip: string;
  udp: UdpTransport;
  tcp: TcpPool;
}

export class Upstream {
  readonly name: string;
  readonly timeoutMs: number;
  readonly address: UpstreamAddress;
  private readonly pipeline: boolean;
  private readonly maxConns: number;
  private readonly idleTimeoutMs: number;
  private readonly resolver: Resolver;
  private target: Target | null = null;
  /** Targets left behind by an address change, finishing their last queries. */
  private readonly retired = new Set<Target>();
  private closed = false;

  constructor(opts: UpstreamOptions) {
    this.name = opts.name;
    this.address = parseUpstreamAddr(opts.addr);
    this.timeoutMs = opts.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.pipeline = (opts.pipeline ?? false) || this.address.pipeline;
    this.maxConns = opts.maxConns ?? DEFAULT_MAX_CONNS;
    this.idleTimeoutMs = opts.idleTimeoutMs ?? DEFAULT_IDLE_TIMEOUT_MS;
    const family = opts.bootstrapVersion ?? 4;
    const host = this.address.host;
    if (this.address.hostIsIp) this.resolver = new StaticResolver(host);
    else if (opts.bootstrap) this.resolver = bootstrapResolver(host, family, parseBootstrap(opts.bootstrap), this.timeoutMs);
    else this.resolver = new CachingResolver(systemLookup(host, family));
  }

  /**
   * One query, bounded by this upstream's timeout (or the smaller `budgetMs`), including address
   * resolution and the TCP retry. `query` is not changed: each attempt sends a copy with our ID.
   */
  exchange(query: Buffer, scope: CancelScope | null, budgetMs = Infinity): Promise<DnsResponse> {
    const ms = Math.max(1, Math.min(this.timeoutMs, budgetMs));
    const ticket = new Ticket(ms, () => new UpstreamError(`no answer within ${Math.round(ms)}ms`, "timeout"));
    scope?.track(ticket);
    const ip = this.resolver.current();
    const answer = ip !== null ? this.send(ip, query, ticket) : ticket.guard(this.resolver.resolve()).then((resolved) => this.send(resolved, query, ticket));
    return answer.then(
      (a) => {
        ticket.finish();
        return a;
      },
      (err: unknown) => {
        ticket.finish();
        throw err instanceof UpstreamError ? err : new UpstreamError(err instanceof Error ? err.message : String(err));
      },
    );
  }

  private send(ip: string, query: Buffer, ticket: Ticket): Promise<DnsResponse> {
    if (this.closed) return Promise.reject(new UpstreamError("upstream closed"));
    const t = this.targetFor(ip);
    if (this.address.protocol === "tcp") return t.tcp.exchange(query, ticket);
    return t.udp.exchange(query, ticket).then((a) => (a.truncated ? t.tcp.exchange(query, ticket) : a));
  }

  private targetFor(ip: string): Target {
    const current = this.target;
    if (current && current.ip === ip) return current;
    if (current) this.retire(current);
    const family = ip.includes(":") ? 6 : 4;
    const port = this.address.port;
    const t: Target = {
      ip,
      udp: new UdpTransport(ip, port, family),
      tcp: new TcpPool({ host: ip, port, family, maxConns: this.maxConns, idleTimeoutMs: this.idleTimeoutMs, pipeline: this.pipeline, connectTimeoutMs: this.timeoutMs }),
    };
    this.target = t;
    return t;
  }

  /** The address changed: old sockets finish what they carry, then close. */
  private retire(t: Target): void {
    t.udp.close(null);
    t.tcp.close(null);
    this.retired.add(t);
    // Nothing on them can outlive one timeout; forget them after that.
    setTimeout(() => this.retired.delete(t), this.timeoutMs + 1000).unref();
  }

  /** Closes every socket and connection; queries in flight fail. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    const reason = new UpstreamError("upstream closed");
    for (const t of [this.target, ...this.retired]) {
      if (!t) continue;
      t.udp.close(reason);
      t.tcp.close(reason);
    }
    this.target = null;
    this.retired.clear();
    this.resolver.close();
  }
}
