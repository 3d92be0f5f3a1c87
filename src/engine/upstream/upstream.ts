// One configured upstream: address resolution, then UDP (with the TCP retry on a truncated
// answer), TCP, TLS (DoT) or HTTPS (DoH), all inside one deadline per query.

import net from "node:net";
import type { DnsResponse } from "../../dns/response.js";
import type { Outbound } from "../../net/outbound.js";
import { PendingSocket } from "../../net/pending-socket.js";
import { parseSocks5, socks5Connect, type Socks5Proxy } from "../../net/socks5.js";
import { hostPort, parseBootstrap, parseDialAddr, parseUpstreamAddr, DEFAULT_DOH_PATH, type UpstreamAddress } from "./address.js";
import { bootstrapResolver, CachingResolver, StaticResolver, systemLookup, type Resolver } from "./bootstrap.js";
import { Ticket, UpstreamError, type CancelScope } from "./exchange.js";
import { DohTransport } from "./https.js";
import { TcpPool, type Dialer } from "./tcp.js";
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
  /** `ip[:port]` of plain DNS servers that resolve a hostname `addr`, asked in turn. */
  bootstrap?: string | readonly string[];
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
  /** The port to connect to instead of the address's (a `dial_addr` port still wins). */
  port?: number;
  /** TCP/TLS connections (one HTTP/2 session for https) kept open from `warm()` on, ≤ maxConns. */
  minConns?: number;
  /** SOCKS5 proxy for the connections (a udp:// upstream then speaks TCP through it); wins over the outbound's. */
  socks5?: string;
  /** Egress profile: its bind address, its proxy (unless `socks5`), its resolver (unless `bootstrap`). */
  outbound?: Outbound;
}

/** The transports towards one resolved IP. */
interface Target {
  ip: string;
  exchange(query: Buffer, ticket: Ticket): Promise<DnsResponse>;
  /** Opens the connections kept open (min_conns). */
  warm(): void;
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
  private readonly minConns: number;
  /** UDP datagrams and direct connections start from this address (an outbound profile's bind). */
  private readonly bind: string | null;
  private readonly proxy: Socks5Proxy | null;
  /** Non-null when connections are not opened by net.connect itself (bind or proxy). */
  private readonly dial: Dialer | null;
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
    const dialAddr = opts.dialAddr === undefined ? null : parseDialAddr(opts.dialAddr);
    this.port = dialAddr?.port ?? opts.port ?? this.address.port;
    this.bind = opts.outbound?.bind ?? null;
    const proxy = opts.socks5 ?? opts.outbound?.socks5 ?? null;
    this.proxy = proxy === null ? null : parseSocks5(proxy);
    this.dial = this.makeDialer();
    const bootstrap = opts.bootstrap === undefined ? [] : typeof opts.bootstrap === "string" ? [opts.bootstrap] : opts.bootstrap;
    const resolverAddr = opts.outbound?.resolver ?? null;
    if (dialAddr) this.resolver = new StaticResolver(dialAddr.host);
    else if (this.address.hostIsIp) this.resolver = new StaticResolver(host);
    else if (bootstrap.length > 0) this.resolver = bootstrapResolver(host, family, bootstrap.map(parseBootstrap), this.timeoutMs, undefined, this.bind);
    // Through a proxy the name goes as it is: the proxy resolves it (no query for it leaves here).
    else if (this.proxy) this.resolver = new StaticResolver(host);
    else if (resolverAddr !== null) this.resolver = bootstrapResolver(host, family, [parseBootstrap(resolverAddr)], this.timeoutMs, undefined, this.bind);
    else this.resolver = new CachingResolver(systemLookup(host, family));
    const pooled = this.address.protocol !== "udp" || this.proxy !== null;
    this.minConns = pooled ? Math.min(opts.minConns ?? 0, this.maxConns) : 0;
  }

  /** How TCP connections are opened when net.connect alone will not do: through the proxy, or from the bind address. */
  private makeDialer(): Dialer | null {
    const proxy = this.proxy;
    const bind = this.bind;
    const timeoutMs = this.timeoutMs;
    if (proxy) return (host, port) => new PendingSocket((signal) => socks5Connect(proxy, host, port, { bind, timeoutMs, signal }));
    if (bind !== null) return (host, port) => net.connect({ host, port, family: host.includes(":") ? 6 : 4, localAddress: bind });
    return null;
  }

  /** Opens the connections kept open (min_conns): now for a known address, after the first resolution otherwise. */
  warm(): void {
    if (this.minConns === 0 || this.closed) return;
    const ip = this.resolver.current();
    if (ip !== null) return void this.targetFor(ip);
    this.resolver.resolve().then(
      (resolved) => {
        if (!this.closed) this.targetFor(resolved);
      },
      () => undefined,
    );
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
    if (this.minConns > 0) t.warm();
    return t;
  }

  private makeTarget(ip: string): Target {
    const family = ip.includes(":") ? 6 : 4;
    const port = this.port;
    const a = this.address;
    const dial = this.dial ?? undefined;
    const pool = (tls: TlsClientSetup | undefined, minConns: number): TcpPool =>
      new TcpPool({ host: ip, port, family, maxConns: this.maxConns, idleTimeoutMs: this.idleTimeoutMs, pipeline: this.pipeline, connectTimeoutMs: this.timeoutMs, tls, onConnect: this.onConnect, minConns, dial });
    if (a.protocol === "https") {
      const authority = a.port === 443 ? hostPort(a.host, 443).replace(/:443$/, "") : hostPort(a.host, a.port);
      const doh = new DohTransport({ ip, port, authority, path: a.path ?? DEFAULT_DOH_PATH, tls: this.tls as TlsClientSetup, idleTimeoutMs: this.idleTimeoutMs, connectTimeoutMs: this.timeoutMs, onConnect: this.onConnect, keepOpen: this.minConns > 0, dial });
      return { ip, exchange: (q, t) => doh.exchange(q, t), warm: () => doh.fill(), close: (fail) => doh.close(fail) };
    }
    // UDP cannot go through the SOCKS5 proxy (no UDP ASSOCIATE): a proxied udp:// upstream speaks TCP.
    if (a.protocol === "tcp" || a.protocol === "tls" || this.proxy) {
      const tcp = pool(this.tls ?? undefined, this.minConns);
      return { ip, exchange: (q, t) => tcp.exchange(q, t), warm: () => tcp.fill(), close: (fail) => tcp.close(fail) };
    }
    const udp = new UdpTransport(ip, port, family, this.bind);
    const tcp = pool(undefined, 0);
    return {
      ip,
      exchange: (q, t) => udp.exchange(q, t).then((answer) => (answer.truncated ? tcp.exchange(q, t) : answer)),
      warm: () => undefined,
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
