// An egress profile (network.outbound in the configuration, docs/operations.md#outbound-profiles):
// the local address outgoing connections start from, a SOCKS5 proxy that carries them, and the DNS
// server host names are resolved with. Plugins get one with ctx.outbound(name); `forward`,
// `download`, the upgrade and `http_request` send through it. Without a profile, DIRECT: the
// system's choice of address, no proxy, the system resolver.

import { lookup as systemLookup } from "node:dns/promises";
import http from "node:http";
import https from "node:https";
import net, { isIP, type LookupFunction } from "node:net";
import type { Duplex } from "node:stream";
import tls from "node:tls";
import { parseSocks5, socks5Connect, type Socks5Proxy } from "./socks5.js";

export interface OutboundSettings {
  /** The profile's name in network.outbound ("" for DIRECT). */
  name: string;
  /** Local IP address connections and datagrams start from; null: the system's choice. */
  bind: string | null;
  /** `socks5://[user:pass@]host:port`: TCP connections go through this proxy, which resolves names. */
  socks5: string | null;
  /** `ip[:port]` of the DNS server that resolves host names; null: the system resolver. */
  resolver: string | null;
}

export interface ResolvedAddress {
  address: string;
  family: 4 | 6;
}

/** Resolves `host` (not an IP) to addresses of `family` (0: IPv4, else IPv6) with the profile's resolver. */
export type NameLookup = (host: string, family: 0 | 4 | 6) => Promise<ResolvedAddress[]>;

export interface ConnectOptions {
  /** Deadline of the connection (the proxy's handshake included). */
  timeoutMs?: number;
  signal?: AbortSignal;
}

const SYSTEM_LOOKUP: NameLookup = async (host, family) => {
  const all = await systemLookup(host, { all: true, family });
  return all.map((a) => ({ address: a.address, family: a.family === 6 ? 6 : 4 }));
};

export class Outbound {
  readonly name: string;
  readonly bind: string | null;
  readonly socks5: string | null;
  readonly resolver: string | null;
  readonly proxy: Socks5Proxy | null;
  private readonly resolveName: NameLookup;

  /** `resolveName`: the profile's resolver; omitted, the system resolver (getaddrinfo). */
  constructor(settings: OutboundSettings, resolveName?: NameLookup) {
    this.name = settings.name;
    this.bind = settings.bind;
    this.socks5 = settings.socks5;
    this.resolver = settings.resolver;
    this.proxy = settings.socks5 === null ? null : parseSocks5(settings.socks5);
    this.resolveName = resolveName ?? SYSTEM_LOOKUP;
  }

  /** Addresses of `host` (an IP is its own address), through the profile's resolver. */
  async lookup(host: string, family: 0 | 4 | 6 = 0): Promise<ResolvedAddress[]> {
    const bare = host.replace(/^\[|\]$/g, "");
    const literal = isIP(bare);
    if (literal !== 0) return [{ address: bare, family: literal === 6 ? 6 : 4 }];
    const found = await this.resolveName(bare, family);
    if (found.length === 0) throw Object.assign(new Error(`no address for ${bare}`), { code: "ENOTFOUND" });
    return found;
  }

  /** The profile's name resolution as node:net, node:http and node:dns callers take it (`lookup` option). */
  readonly lookupFunction: LookupFunction = (hostname, options, callback) => {
    const family = options.family === 6 || options.family === "IPv6" ? 6 : options.family === 4 || options.family === "IPv4" ? 4 : 0;
    this.lookup(hostname, family).then(
      (all) => {
        if (options.all) callback(null, all);
        else callback(null, all[0].address, all[0].family);
      },
      (err: NodeJS.ErrnoException) => callback(err, "", 0),
    );
  };

  /**
   * A TCP connection to host:port: through the proxy when the profile has one (the proxy resolves
   * the name), otherwise from `bind` to the first address the resolver gives.
   */
  async connect(host: string, port: number, options: ConnectOptions = {}): Promise<net.Socket> {
    if (this.proxy) return socks5Connect(this.proxy, host, port, { bind: this.bind, timeoutMs: options.timeoutMs, signal: options.signal });
    const [first] = await this.lookup(host);
    return new Promise<net.Socket>((resolve, reject) => {
      const socket = net.connect({ host: first.address, port, family: first.family, ...(this.bind ? { localAddress: this.bind } : {}) });
      let timer: NodeJS.Timeout | null = null;
      const fail = (err: Error): void => {
        cleanup();
        socket.destroy();
        reject(err);
      };
      const onAbort = (): void => fail(new Error("cancelled"));
      const cleanup = (): void => {
        if (timer) clearTimeout(timer);
        options.signal?.removeEventListener("abort", onAbort);
        socket.off("error", fail);
      };
      if (options.timeoutMs !== undefined) timer = setTimeout(() => fail(new Error(`connect timed out after ${options.timeoutMs}ms`)), options.timeoutMs);
      options.signal?.addEventListener("abort", onAbort, { once: true });
      socket.once("error", fail);
      socket.once("connect", () => {
        cleanup();
        resolve(socket);
      });
    });
  }

  /**
   * An HTTP(S) agent whose connections go out through this profile (keep-alive and the other agent
   * options as given). Through a proxy, `https:` connections are TLS over the proxied socket with
   * the request's server name and the TLS options given here.
   */
  agent(protocol: "http:" | "https:", options: https.AgentOptions = {}): http.Agent {
    const route = { ...(this.bind ? { localAddress: this.bind } : {}), lookup: this.lookupFunction };
    const proxied = this.proxy !== null;
    const via = (req: http.ClientRequestArgs, defaultPort: number, wrap: ((socket: net.Socket) => Duplex) | null, done: (err: Error | null, stream: Duplex) => void): void =>
      this.viaProxy(req, defaultPort, wrap, done);
    if (protocol === "http:") {
      if (!proxied) return new http.Agent({ ...options, ...route });
      return new (class extends http.Agent {
        override createConnection(req: http.ClientRequestArgs, done: (err: Error | null, stream: Duplex) => void): undefined {
          via(req, 80, null, done);
          return undefined;
        }
      })(options);
    }
    if (!proxied) return new https.Agent({ ...options, ...route });
    return new (class extends https.Agent {
      override createConnection(req: https.RequestOptions, done: (err: Error | null, stream: Duplex) => void): undefined {
        const host = req.hostname ?? req.host ?? "localhost";
        const servername = req.servername ?? (isIP(host) === 0 ? host : undefined);
        const own: tls.ConnectionOptions = { ca: req.ca, cert: req.cert, key: req.key, rejectUnauthorized: req.rejectUnauthorized, checkServerIdentity: req.checkServerIdentity };
        // `host` names what the certificate must match when there is no server name (an IP).
        const settings = { ...options, ...Object.fromEntries(Object.entries(own).filter(([, v]) => v !== undefined)), host, ...(servername ? { servername } : {}) };
        via(req, 443, (socket) => tls.connect({ ...settings, socket }), done);
        return undefined;
      }
    })(options);
  }

  private viaProxy(req: http.ClientRequestArgs, defaultPort: number, wrap: ((socket: net.Socket) => Duplex) | null, done: (err: Error | null, stream: Duplex) => void): void {
    const host = req.hostname ?? req.host ?? "localhost";
    this.connect(host, Number(req.port ?? defaultPort), { timeoutMs: req.timeout }).then(
      (socket) => done(null, wrap ? wrap(socket) : socket),
      (err: Error) => done(err, undefined as unknown as Duplex),
    );
  }
}

/** No profile: the system's source address, no proxy, the system resolver. */
export const DIRECT = new Outbound({ name: "", bind: null, socks5: null, resolver: null });
