// Sockets shared across runtimes. A reload's new server that listens on the same protocol and
// address takes the existing listener instead of closing and rebinding it, so no query is refused.
// The pool is that handover (found by configured or bound address, claimed once per runtime, closed
// when its last owner lets go); the server plugins open the sockets (src/plugins/servers/listeners.ts).

import type { ListenAddress } from "../config/listen.js";

/** A socket the pool hands over: the owner that starts last sets its handler; its owners are runtimes. */
export interface SharedListener {
  readonly key: string;
  readonly owners: Set<object>;
  handler: unknown;
  address(): { address: string; port: number };
  /** Connections it may hold at once (0 for datagrams), for the file-descriptor budget. */
  maxConns(): number;
  close(): Promise<void>;
}

/** One kind of listener: its protocol (part of the key), how one is opened, and how one is recognised. */
export interface ListenerKind<L extends SharedListener> {
  readonly protocol: string;
  /** Binds a new listener; rejects with the bind error (EADDRINUSE, EACCES). */
  open(addr: ListenAddress, key: string): Promise<L>;
  is(listener: SharedListener): listener is L;
}

export class ListenerPool {
  /** By configured address (`udp|127.0.0.1:0`) and by bound address (`udp|127.0.0.1:40123`). */
  private readonly listeners = new Map<string, SharedListener>();

  private remember(protocol: string, addr: ListenAddress, listener: SharedListener): void {
    this.listeners.set(`${protocol}|${addr.key}`, listener);
    const bound = listener.address();
    const host = bound.address.includes(":") ? `[${bound.address}]` : bound.address;
    this.listeners.set(`${protocol}|${addr.dualStack ? "[::]" : host}:${bound.port}`, listener);
  }

  /** Takes over the listener of that kind and address, or binds one, for `owner` (a runtime). */
  async claim<L extends SharedListener>(kind: ListenerKind<L>, addr: ListenAddress, owner: object): Promise<L> {
    const key = `${kind.protocol}|${addr.key}`;
    const existing = this.listeners.get(key);
    if (existing && kind.is(existing)) return this.own(existing, owner);
    const listener = await kind.open(addr, key);
    this.remember(kind.protocol, addr, listener);
    return this.own(listener, owner);
  }

  private own<L extends SharedListener>(listener: L, owner: object): L {
    if (listener.owners.has(owner)) throw new Error(`two servers in one configuration listen on ${listener.key.replace("|", " ")}`);
    listener.owners.add(owner);
    return listener;
  }

  /** Gives up `owner`'s claim; the socket closes when nobody holds it any more. */
  async release(listener: SharedListener, owner: object): Promise<void> {
    listener.owners.delete(owner);
    if (listener.owners.size > 0) return;
    listener.handler = null;
    for (const [key, l] of this.listeners) if (l === listener) this.listeners.delete(key);
    await listener.close();
  }

  /** Connections all TCP and HTTP listeners may hold at once (for the file-descriptor budget). */
  tcpMaxConns(): number {
    let total = 0;
    for (const l of new Set(this.listeners.values())) total += l.maxConns();
    return total;
  }

  async closeAll(): Promise<void> {
    const all = [...new Set(this.listeners.values())];
    this.listeners.clear();
    await Promise.all(all.map((l) => l.close()));
  }
}
