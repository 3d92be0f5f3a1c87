// DNS over UDP to one upstream address: a few connected sockets shared by all queries,
// multiplexed by our random IDs. Connected sockets let the kernel drop datagrams from any other
// source and report ICMP "port unreachable" as ECONNREFUSED, so a dead upstream fails fast.

import dgram from "node:dgram";
import type { DnsResponse } from "../../dns/response.js";
import { acceptAnswer, freeId, packetWithId, UpstreamError, type Ticket } from "./exchange.js";

/** Sockets per upstream address; each has its own random source port. */
const SOCKETS = 4;
/** Queries in flight per socket (IDs must stay easy to find among 65 536). */
const MAX_PENDING = 4096;
/** A socket is replaced after this many queries, so source ports keep changing. */
const ROTATE_AFTER = 1024;

interface Pending {
  query: Buffer;
  ticket: Ticket;
  resolve(answer: DnsResponse): void;
  reject(err: UpstreamError): void;
}

class UdpSlot {
  readonly socket: dgram.Socket;
  readonly pending = new Map<number, Pending>();
  used = 0;
  retired = false;
  closed = false;
  /** Packets sent before the socket finished connecting; null once connected. */
  private queued: { id: number; packet: Buffer }[] | null = [];

  constructor(
    private readonly transport: UdpTransport,
    host: string,
    port: number,
    family: 4 | 6,
    bind: string | null,
  ) {
    this.socket = dgram.createSocket(family === 6 ? "udp6" : "udp4");
    // An outbound profile's source address: bound first, the connect below waits for it.
    if (bind !== null) this.socket.bind({ address: bind, port: 0 });
    this.socket.on("message", (msg, rinfo) => {
      if (rinfo.port === port && rinfo.address === host) this.onMessage(msg);
    });
    this.socket.on("error", (err: NodeJS.ErrnoException) => {
      // Errors on a connected UDP socket cannot be tied to one ID; they concern every query on it.
      this.failAll(new UpstreamError(`udp: ${err.code ?? err.message}`));
      // A socket that never connected (its bind failed) is replaced by the next query.
      if (this.queued !== null) this.close();
    });
    this.socket.connect(port, host, (err?: Error) => {
      const queued = this.queued ?? [];
      this.queued = null;
      if (err) return this.failAll(new UpstreamError(`udp: ${(err as NodeJS.ErrnoException).code ?? err.message}`));
      for (const q of queued) if (this.pending.has(q.id)) this.transmit(q.packet);
    });
    this.socket.unref();
  }

  private onMessage(msg: Buffer): void {
    if (msg.length < 12) return;
    const id = (msg[0] << 8) | msg[1];
    const p = this.pending.get(id);
    if (!p) return;
    const answer = acceptAnswer(msg, p.query, id);
    if (!answer) return;
    this.pending.delete(id);
    p.ticket.release();
    p.resolve(answer);
    this.closeIfDone();
  }

  send(p: Pending): void {
    const id = freeId(this.pending);
    this.pending.set(id, p);
    this.used++;
    p.ticket.wait((reason) => {
      if (this.pending.get(id) !== p) return;
      this.pending.delete(id);
      p.reject(reason);
      this.closeIfDone();
    });
    const packet = packetWithId(p.query, id, false);
    if (this.queued) this.queued.push({ id, packet });
    else this.transmit(packet);
  }

  /** No completion callback (it costs on every query): a failed send surfaces as the socket's `error`. */
  private transmit(packet: Buffer): void {
    this.socket.send(packet);
  }

  failAll(err: UpstreamError): void {
    const all = [...this.pending.values()];
    this.pending.clear();
    for (const p of all) {
      p.ticket.release();
      p.reject(err);
    }
    this.closeIfDone();
  }

  /** A retired socket closes once its last query is over. */
  closeIfDone(): void {
    if ((this.retired || this.transport.closing) && this.pending.size === 0) this.close();
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.transport.retiredSlots.delete(this);
    try {
      this.socket.close();
    } catch {
      // Already closed by an error: nothing left to release.
    }
  }
}

export class UdpTransport {
  private readonly slots: (UdpSlot | null)[] = new Array<UdpSlot | null>(SOCKETS).fill(null);
  private next = 0;
  /** Replaced sockets still waiting for their last answers. */
  readonly retiredSlots = new Set<UdpSlot>();
  closing = false;

  constructor(
    readonly host: string,
    readonly port: number,
    readonly family: 4 | 6,
    /** Local address the sockets bind to (an outbound profile's `bind`); null: the system's choice. */
    readonly bind: string | null = null,
  ) {}

  /** Sends `query` (its ID is replaced by ours) and resolves with the matching answer. */
  exchange(query: Buffer, ticket: Ticket): Promise<DnsResponse> {
    return new Promise<DnsResponse>((resolve, reject) => {
      if (ticket.reason) return reject(ticket.reason);
      if (this.closing) return reject(new UpstreamError("udp: upstream closed"));
      const slot = this.pickSlot();
      if (!slot) return reject(new UpstreamError("udp: too many queries in flight"));
      slot.send({ query, ticket, resolve, reject });
    });
  }

  private pickSlot(): UdpSlot | null {
    for (let tries = 0; tries < SOCKETS; tries++) {
      const i = this.next;
      this.next = (this.next + 1) % SOCKETS;
      let slot = this.slots[i];
      if (slot && (slot.closed || slot.used >= ROTATE_AFTER)) {
        slot.retired = true;
        this.retiredSlots.add(slot);
        slot.closeIfDone();
        slot = null;
      }
      if (!slot) {
        slot = new UdpSlot(this, this.host, this.port, this.family, this.bind);
        this.slots[i] = slot;
      }
      if (slot.pending.size < MAX_PENDING) return slot;
    }
    return null;
  }

  /** Stops taking queries; sockets close as their pending queries finish (or now, with `fail`). */
  close(fail: UpstreamError | null): void {
    this.closing = true;
    for (const slot of [...this.slots, ...this.retiredSlots]) {
      if (!slot) continue;
      if (fail) slot.failAll(fail);
      slot.closeIfDone();
    }
  }
}
