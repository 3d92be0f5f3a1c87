// Sockets shared across runtimes. A reload's new server that listens on the same protocol and
// address takes the existing socket instead of closing and rebinding it, so no query is refused.
// TCP framing lives here too: the socket layer splits frames, the server plugin answers them.

import dgram from "node:dgram";
import dns from "node:dns";
import net from "node:net";
import type { ListenAddress } from "../../config/listen.js";

export type UdpHandler = (msg: Buffer, rinfo: dgram.RemoteInfo) => void;
/** Answers one framed TCP query; `reply` is a no-op once the connection is gone. */
export type TcpHandler = (query: Buffer, remote: { address: string; port: number }, reply: (answer: Buffer) => void) => void;

const MAX_INFLIGHT_PER_CONNECTION = 128;

abstract class Listener<H> {
  handler: H | null = null;
  readonly owners = new Set<object>();
  constructor(readonly key: string) {}
  abstract address(): { address: string; port: number };
  abstract close(): Promise<void>;
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
  close(): Promise<void> {
    return new Promise((resolve) => this.socket.close(() => resolve()));
  }
}

export class TcpListener extends Listener<TcpHandler> {
  idleTimeoutMs = 30_000;
  private readonly connections = new Set<net.Socket>();

  constructor(
    key: string,
    readonly server: net.Server,
  ) {
    super(key);
    server.on("connection", (socket) => this.accept(socket));
  }

  address(): { address: string; port: number } {
    const a = this.server.address() as net.AddressInfo;
    return { address: a.address, port: a.port };
  }

  private accept(socket: net.Socket): void {
    this.connections.add(socket);
    socket.setNoDelay(true);
    socket.setTimeout(this.idleTimeoutMs, () => socket.destroy());
    socket.on("close", () => this.connections.delete(socket));
    socket.on("error", () => socket.destroy());
    const remote = { address: socket.remoteAddress ?? "", port: socket.remotePort ?? 0 };
    let pending: Buffer = Buffer.alloc(0);
    let inflight = 0;
    const reply = (answer: Buffer): void => {
      inflight--;
      if (socket.destroyed || !socket.writable) return;
      const frame = Buffer.allocUnsafe(answer.length + 2);
      frame.writeUInt16BE(answer.length, 0);
      answer.copy(frame, 2);
      socket.write(frame);
      if (socket.isPaused() && inflight < MAX_INFLIGHT_PER_CONNECTION) socket.resume();
    };
    const drop = (): void => {
      inflight--;
      if (socket.isPaused() && inflight < MAX_INFLIGHT_PER_CONNECTION) socket.resume();
    };
    socket.on("data", (chunk: Buffer) => {
      pending = pending.length === 0 ? chunk : Buffer.concat([pending, chunk]);
      // Answers ready at once (cache, local data) for queries pipelined in one chunk leave in one write.
      socket.cork();
      while (pending.length >= 2) {
        const len = pending.readUInt16BE(0);
        if (pending.length < len + 2) break;
        const query = pending.subarray(2, len + 2);
        pending = pending.subarray(len + 2);
        const handler = this.handler;
        if (!handler) continue;
        inflight++;
        let answered = false;
        handler(query, remote, (answer) => {
          if (answered) return;
          answered = true;
          if (answer.length === 0) drop();
          else reply(answer);
        });
      }
      socket.uncork();
      if (inflight >= MAX_INFLIGHT_PER_CONNECTION) socket.pause();
    });
  }

  close(): Promise<void> {
    return new Promise((resolve) => {
      this.server.close(() => resolve());
      for (const c of this.connections) c.destroy();
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

export class ListenerPool {
  /** By configured address (`udp|127.0.0.1:0`) and by bound address (`udp|127.0.0.1:40123`). */
  private readonly listeners = new Map<string, UdpListener | TcpListener>();

  private find(protocol: "udp" | "tcp", addr: ListenAddress): UdpListener | TcpListener | undefined {
    return this.listeners.get(`${protocol}|${addr.key}`);
  }

  private remember(protocol: "udp" | "tcp", addr: ListenAddress, listener: UdpListener | TcpListener): void {
    this.listeners.set(`${protocol}|${addr.key}`, listener);
    const bound = listener.address();
    const host = bound.address.includes(":") ? `[${bound.address}]` : bound.address;
    this.listeners.set(`${protocol}|${addr.dualStack ? "[::]" : host}:${bound.port}`, listener);
  }

  /** Binds (or takes over) a UDP socket for `owner` (a runtime). */
  async udp(addr: ListenAddress, owner: object): Promise<UdpListener> {
    const key = `udp|${addr.key}`;
    const existing = this.find("udp", addr);
    if (existing instanceof UdpListener) return this.claim(existing, owner);
    const socket = dgram.createSocket(addr.family === 6 ? { type: "udp6", ipv6Only: !addr.dualStack, lookup: literalFirst } : { type: "udp4", lookup: literalFirst });
    await new Promise<void>((resolve, reject) => {
      socket.once("error", reject);
      socket.bind(addr.port, addr.host, () => {
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
    const listener = new UdpListener(key, socket);
    this.remember("udp", addr, listener);
    return this.claim(listener, owner);
  }

  async tcp(addr: ListenAddress, owner: object): Promise<TcpListener> {
    const key = `tcp|${addr.key}`;
    const existing = this.find("tcp", addr);
    if (existing instanceof TcpListener) return this.claim(existing, owner);
    const server = net.createServer({ pauseOnConnect: false });
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen({ port: addr.port, host: addr.host, ipv6Only: !addr.dualStack && addr.family === 6 }, () => {
        server.off("error", reject);
        resolve();
      });
    });
    const listener = new TcpListener(key, server);
    this.remember("tcp", addr, listener);
    return this.claim(listener, owner);
  }

  private claim<L extends UdpListener | TcpListener>(listener: L, owner: object): L {
    if (listener.owners.has(owner)) throw new Error(`two servers in one configuration listen on ${listener.key.replace("|", " ")}`);
    listener.owners.add(owner);
    return listener;
  }

  /** Gives up `owner`'s claim; the socket closes when nobody holds it any more. */
  async release(listener: UdpListener | TcpListener, owner: object): Promise<void> {
    listener.owners.delete(owner);
    if (listener.owners.size > 0) return;
    listener.handler = null;
    for (const [key, l] of this.listeners) if (l === listener) this.listeners.delete(key);
    await listener.close();
  }

  async closeAll(): Promise<void> {
    const all = [...new Set(this.listeners.values())];
    this.listeners.clear();
    await Promise.all(all.map((l) => l.close()));
  }
}
