// One configured upstream: address resolution, then UDP (with the TCP retry on a truncated
// answer), TCP, TLS (DoT) or HTTPS (DoH), all inside one deadline per query.

import type { DnsResponse } from "../../dns/response.js";
import { hostPort, parseBootstrap, parseDialAddr, parseUpstreamAddr, DEFAULT_DOH_PATH, type UpstreamAddress } from "./address.js";
import { bootstrapResolver, CachingResolver, StaticResolver, systemLookup, type Resolver } from "./bootstrap.js";
import { Ticket, UpstreamError, type CancelScope } from "./exchange.js";
import { DohTransport } from "./https.js";
import { TcpPool } from "./tcp.js";
import { tlsClientSetup, type TlsClientSetup } from "./tls-client.js";
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
  /** TLS and HTTPS: accept any certificate (testing only). */
  insecureSkipVerify?: boolean;
  /** `ip[:port]` to connect to instead of resolving the host; the host still names the certificate. */
  dialAddr?: string;
  /** TLS and HTTPS: PEM CA certificates to verify against instead of the trust store. */
  ca?: Buffer;
  /** Called for each connection (TCP, TLS or HTTP/2 session) opened. */
  onConnect?: () => void;
  /** Called for each completed TLS handshake. */
  onHandshake?: (resumed: boolean) => void;
}

/** The transports towards one resolved IP. */
interface Target {
  ip: string;
  exchange(query: Buffer, ticket: Ticket): Promise<DnsResponse>;
  close(fail: UpstreamError | null): void;
}

export class Upstream {
  readonly name: string;
  readonly timeoutMs: number;
  readonly address: UpstreamAddress;
  private readonly pipeline: boolean;
  private readonly maxConns: number;
  private readonly idleTimeoutMs: number;
  private readonly resolver: Resolver;
  private readonly port: number;
  private readonly tls: TlsClientSetup | null;
  private readonly onConnect: (() => void) | undefined;
  private target: Target | null = null;
  /** Targets left behind by an address change, finishing their last queries. */
  private readonly retired = new Set<Target>();
  private closed = false;

  constructor(opts: UpstreamOptions) {
    this.name = opts.name;
    this.address = parseUpstreamAddr(opts.addr);
    this.timeoutMs = opts.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    const encrypted = this.address.protocol === "tls" || this.address.protocol === "https";
    // DoT pipelines unless told not to (RFC 7858 §3.3); plain TCP only when asked.
    this.pipeline = this.address.protocol === "tls" ? (opts.pipeline ?? true) : (opts.pipeline ?? false) || this.address.pipeline;
    this.maxConns = opts.maxConns ?? DEFAULT_MAX_CONNS;
    this.idleTimeoutMs = opts.idleTimeoutMs ?? DEFAULT_IDLE_TIMEOUT_MS;
    this.tls = encrypted ? tlsClientSetup(this.address.host, opts.ca, opts.insecureSkipVerify ?? false, opts.onHandshake ?? null) : null;
    this.onConnect = opts.onConnect;
    const family = opts.bootstrapVersion ?? 4;
    const host = this.address.host;
    const dial = opts.dialAddr === undefined ? null : parseDialAddr(opts.dialAddr);
    this.port = dial?.port ?? this.address.port;
    if (dial) this.resolver = new StaticResolver(dial.host);
    else if (this.address.hostIsIp) this.resolver = new StaticResolver(host);
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
    return this.targetFor(ip).exchange(query, ticket);
  }

  private targetFor(ip: string): Target {
    const current = this.target;
    if (current && current.ip === ip) return current;
    if (current) this.retire(current);
    const t = this.makeTarget(ip);
    this.target = t;
    return t;
  }

  private makeTarget(ip: string): Target {
    const family = ip.includes(":") ? 6 : 4;
    const port = this.port;
    const a = this.address;
    const pool = (tls: TlsClientSetup | undefined): TcpPool =>
      new TcpPool({ host: ip, port, family, maxConns: this.maxConns, idleTimeoutMs: this.idleTimeoutMs, pipeline: this.pipeline, connectTimeoutMs: this.timeoutMs, tls, onConnect: this.onConnect });
    if (a.protocol === "https") {
      const authority = a.port === 443 ? hostPort(a.host, 443).replace(/:443$/, "") : hostPort(a.host, a.port);
      const doh = new DohTransport({ ip, port, authority, path: a.path ?? DEFAULT_DOH_PATH, tls: this.tls as TlsClientSetup, idleTimeoutMs: this.idleTimeoutMs, connectTimeoutMs: this.timeoutMs, onConnect: this.onConnect });
      return { ip, exchange: (q, t) => doh.exchange(q, t), close: (fail) => doh.close(fail) };
    }
    if (a.protocol === "tcp" || a.protocol === "tls") {
      const tcp = pool(this.tls ?? undefined);
      return { ip, exchange: (q, t) => tcp.exchange(q, t), close: (fail) => tcp.close(fail) };
    }
    const udp = new UdpTransport(ip, port, family);
    const tcp = pool(undefined);
    return {
      ip,
      exchange: (q, t) => udp.exchange(q, t).then((answer) => (answer.truncated ? tcp.exchange(q, t) : answer)),
      close: (fail) => {
        udp.close(fail);
        tcp.close(fail);
      },
    };
  }

  /** The address changed: old sockets finish what they carry, then close. */
  private retire(t: Target): void {
    t.close(null);
    this.retired.add(t);
    // Nothing on them can outlive one timeout; forget them after that.
    setTimeout(() => this.retired.delete(t), this.timeoutMs + 1000).unref();
  }

  /** Closes every socket and connection; queries in flight fail. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    const reason = new UpstreamError("upstream closed");
    for (const t of [this.target, ...this.retired]) t?.close(reason);
    this.target = null;
    this.retired.clear();
    this.resolver.close();
  }
}
