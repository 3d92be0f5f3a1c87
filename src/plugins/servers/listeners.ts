// The sockets the server plugins listen on, and how each kind is opened for the pool that hands them
// over from one runtime to the next (src/registry/listener-pool.ts): a reload's new server that
// listens on the same protocol and address takes the existing socket, so no query is refused.
// TCP connections and framing live in stream-conns.ts: it splits frames, the server plugin answers them.
// A TCP listener serves plain DNS or DoT (the TLS setup is the current owner's, so a reload that
// adds, drops or changes a certificate applies to new connections); HTTP listeners: http-listener.ts.

import cluster from "node:cluster";
import dgram from "node:dgram";
import dns from "node:dns";
import net from "node:net";
import tls from "node:tls";
import type { ListenAddress } from "../../config/listen.js";
import { MAX_QUERY_BYTES } from "../../dns/query.js";
import type { ListenerKind } from "../../registry/listener-pool.js";
import { HttpListener } from "./http-listener.js";
import { Listener } from "./listener.js";
import { readStreamHeader, type ProxyPolicy, type StreamPeer } from "./proxy-protocol.js";
import { StreamConnections } from "./stream-conns.js";
import type { StreamHandler } from "./stream-limits.js";

export type UdpHandler = (msg: Buffer, rinfo: dgram.RemoteInfo) => void;
/** Answers one framed TCP query; see StreamHandler. */
export type TcpHandler = StreamHandler;

const EMPTY = Buffer.alloc(0);
const DOT_ALPN = ["dot"];

/** Accept failures (EMFILE, ECONNABORTED) concern one connection; the server keeps listening. */
function ignoreAcceptError(): void {
  /* nothing to undo */
}


export class UdpListener extends Listener<UdpHandler> {
  constructor(
    key: string,
    readonly socket: dgram.Socket,
  ) {
    super(key);
    socket.on("message", (msg, rinfo) => this.handler?.(msg, rinfo));
  }
  address(): { address: string; port: number } {
    const a = this.socket.address();
    return { address: a.address, port: a.port };
  }
  maxConns(): number {
    return 0;
  }
  close(): Promise<void> {
    return new Promise((resolve) => this.socket.close(() => resolve()));
  }
}

export class TcpListener extends Listener<TcpHandler> {
  /** Open connections and their limits; the owner that starts last sets limits and metrics. */
  readonly connections = new StreamConnections(
    (query, remote, reply, oversized) => {
      const handler = this.handler;
      if (handler) handler(query, remote, reply, oversized);
      else reply(EMPTY);
    },
    { maxConns: 256, idleMs: 30_000, frameMs: 5_000, maxFrame: MAX_QUERY_BYTES },
  );

  /** Set by the owner that starts last: new connections speak TLS (DoT) with it; null for plain TCP. */
  tls: tls.SecureContext | null = null;
  /** Set by the owner that starts last: new connections may open with a PROXY header; null: never. */
  proxy: ProxyPolicy | null = null;
  /** Connections whose PROXY header is being read (not yet in `connections`), bounded by max_conns. */
  private awaitingHeader = 0;

  constructor(
    key: string,
    readonly server: net.Server,
  ) {
    super(key);
    server.on("connection", (socket: net.Socket) => this.onConnection(socket));
    server.on("error", ignoreAcceptError);
  }

  private onConnection(socket: net.Socket): void {
    const proxy = this.proxy;
    if (proxy === null) return this.admit(socket, null);
    if (this.awaitingHeader >= this.connections.limits.maxConns) {
      this.connections.stats.refused.value++;
      socket.destroy();
      return;
    }
    this.awaitingHeader++;
    // The header comes before anything else, TLS included; it must arrive within frame_timeout.
    readStreamHeader(socket, proxy, this.connections.limits.frameMs, (client) => {
      this.awaitingHeader--;
      if (client !== null) this.admit(socket, client);
    });
  }

  private admit(socket: net.Socket, client: StreamPeer | null): void {
    const context = this.tls;
    if (context === null) {
      this.connections.accept(socket, false, client);
      // Paused while the header was read.
      if (client !== null) socket.resume();
      return;
    }
    // RFC 7858: ALPN "dot"; a client offering no ALPN at all is served too.
    const secure = new tls.TLSSocket(socket, { isServer: true, secureContext: context, ALPNProtocols: DOT_ALPN });
    this.connections.accept(secure, true, client);
  }

  address(): { address: string; port: number } {
    const a = this.server.address() as net.AddressInfo;
    return { address: a.address, port: a.port };
  }

  maxConns(): number {
    return this.connections.limits.maxConns;
  }

  close(): Promise<void> {
    return new Promise((resolve) => {
      this.server.close(() => resolve());
      this.connections.closeAll();
    });
  }
}

/**
 * dgram resolves the destination of every send, even an address literal: `dns.lookup` tests it with
 * a regexp and answers on the next tick. Replies always go to the literal a query came from, so a
 * literal is passed straight through; anything else (a host name to bind) goes to `dns.lookup`.
 */
export function literalFirst(address: string, options: dns.LookupOneOptions | number, callback: (err: NodeJS.ErrnoException | null, address: string, family: number) => void): void {
  const family = literalFamily(address);
  if (family !== 0) callback(null, address, family);
  else dns.lookup(address, typeof options === "number" ? { family: options } : options, callback);
}

/** 4 for digits and dots only, 6 for anything with a colon, 0 for a host name. */
export function literalFamily(s: string): 0 | 4 | 6 {
  if (s.length === 0) return 0;
  let v4 = true;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c === 0x3a) return 6;
    if (c !== 0x2e && (c < 0x30 || c > 0x39)) v4 = false;
  }
  return v4 ? 4 : 0;
}

/** Binds a stream server; rejects with the bind error (EADDRINUSE, EACCES). */
export function listenOn(server: net.Server, addr: ListenAddress): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen({ port: addr.port, host: addr.host, ipv6Only: !addr.dualStack && addr.family === 6 }, () => {
      server.off("error", reject);
      resolve();
    });
  });
}

/**
 * SO_REUSEPORT for UDP arrived in Node 22.12 (and 23.1): a data-plane worker then binds a socket of
 * its own and the kernel spreads flows over the workers by hashing addresses. Before that (and for
 * port 0, where each socket would get a port of its own) the workers share the primary's socket
 * through node:cluster and the kernel wakes one reader per datagram.
 */
function ownSocketPerWorker(addr: ListenAddress): boolean {
  if (!cluster.isWorker || addr.port === 0) return false;
  const [major, minor] = process.versions.node.split(".").map(Number);
  return major > 23 || (major === 23 && minor >= 1) || (major === 22 && minor >= 12);
}

async function bindUdp(addr: ListenAddress, key: string): Promise<UdpListener> {
  const reusePort = ownSocketPerWorker(addr);
  const options: dgram.SocketOptions & { reusePort?: boolean } =
    addr.family === 6 ? { type: "udp6", ipv6Only: !addr.dualStack, lookup: literalFirst } : { type: "udp4", lookup: literalFirst };
  if (reusePort) options.reusePort = true;
  const socket = dgram.createSocket(options);
  await new Promise<void>((resolve, reject) => {
    socket.once("error", reject);
    socket.bind({ port: addr.port, address: addr.host, exclusive: reusePort }, () => {
      socket.off("error", reject);
      resolve();
    });
  });
  // A deeper receive queue absorbs bursts; the kernel caps it at net.core.rmem_max.
  try {
    socket.setRecvBufferSize(4 * 1024 * 1024);
    socket.setSendBufferSize(4 * 1024 * 1024);
  } catch {
    /* keep the system default */
  }
  socket.on("error", () => {
    /* ICMP errors for unreachable clients surface here; nothing to do */
  });
  return new UdpListener(key, socket);
}

/** A UDP socket. */
export const UDP: ListenerKind<UdpListener> = { protocol: "udp", open: bindUdp, is: (l) => l instanceof UdpListener };

/** A TCP listener for plain DNS or DoT. */
export const TCP: ListenerKind<TcpListener> = {
  protocol: "tcp",
  async open(addr, key) {
    // Half-open: a client that shuts down its sending side still gets its answers (stream-conns.ts ends the connection).
    const server = net.createServer({ pauseOnConnect: false, allowHalfOpen: true });
    await listenOn(server, addr);
    return new TcpListener(key, server);
  },
  is: (l) => l instanceof TcpListener,
};

/** An HTTP (DoH) listener: cleartext or TLS as its owner sets it at start. */
export const HTTP: ListenerKind<HttpListener> = {
  protocol: "http",
  async open(addr, key) {
    const server = net.createServer({ pauseOnConnect: false });
    await listenOn(server, addr);
    return new HttpListener(key, server);
  },
  is: (l) => l instanceof HttpListener,
};
