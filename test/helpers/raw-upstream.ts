// Byte-level test upstreams on 127.0.0.1 (UDP and TCP on one port) for the forward/upstream tests:
// they see the exact bytes sent, count TCP connections, and can answer wrongly on purpose.

import dgram from "node:dgram";
import net from "node:net";
import { decodeMessage, encodeMessage, type Message } from "../../src/dns/message.js";
import { answerWith } from "./responder.js";

export interface TcpPeer {
  socket: net.Socket;
  /** Connection number, from 1 in accept order. */
  index: number;
  send(msg: Buffer): void;
  /** Closes the connection from the upstream side. */
  hangUp(): void;
}

export interface RawHandlers {
  udp?: (msg: Buffer, reply: (answer: Buffer) => void, rinfo: dgram.RemoteInfo) => void;
  tcp?: (frame: Buffer, peer: TcpPeer) => void;
}

export interface RawUpstream {
  port: number;
  udpSocket: dgram.Socket;
  udpReceived: Buffer[];
  tcpReceived: Buffer[];
  /** TCP connections accepted so far. */
  accepted: number;
  /** TCP connections open now, and the most ever open at once. */
  open: number;
  maxOpen: number;
  /** TCP connections the client closed. */
  closedByClient: number;
  peers: TcpPeer[];
  close(): Promise<void>;
}

export async function startRawUpstream(handlers: RawHandlers): Promise<RawUpstream> {
  for (let attempt = 0; attempt < 20; attempt++) {
    const udp = dgram.createSocket("udp4");
    await new Promise<void>((r) => udp.bind(0, "127.0.0.1", () => r()));
    const port = udp.address().port;
    const server = net.createServer();
    const ok = await new Promise<boolean>((r) => {
      server.once("error", () => r(false));
      server.listen(port, "127.0.0.1", () => r(true));
    });
    if (!ok) {
      udp.close();
      continue;
    }
    const sockets = new Set<net.Socket>();
    // Delayed replies may fire after the test closed the upstream; they are dropped then.
    let closed = false;
    const up: RawUpstream = {
      port,
      udpSocket: udp,
      udpReceived: [],
      tcpReceived: [],
      accepted: 0,
      open: 0,
      maxOpen: 0,
      closedByClient: 0,
      peers: [],
      close: async () => {
        closed = true;
        for (const s of sockets) s.destroy();
        await Promise.all([new Promise<void>((r) => udp.close(() => r())), new Promise<void>((r) => server.close(() => r()))]);
      },
    };
    udp.on("message", (msg, rinfo) => {
      up.udpReceived.push(msg);
      handlers.udp?.(msg, (answer) => !closed && udp.send(answer, rinfo.port, rinfo.address), rinfo);
    });
    server.on("connection", (socket) => {
      sockets.add(socket);
      up.accepted++;
      up.open++;
      up.maxOpen = Math.max(up.maxOpen, up.open);
      const peer: TcpPeer = {
        socket,
        index: up.accepted,
        send: (msg) => {
          if (socket.destroyed) return;
          const frame = Buffer.alloc(msg.length + 2);
          frame.writeUInt16BE(msg.length, 0);
          msg.copy(frame, 2);
          socket.write(frame);
        },
        hangUp: () => socket.destroy(),
      };
      up.peers.push(peer);
      let ended = false;
      const clientClosed = (): void => {
        if (!ended) up.closedByClient++;
        ended = true;
      };
      peer.hangUp = () => {
        ended = true;
        socket.destroy();
      };
      socket.on("error", () => {
        clientClosed();
        socket.destroy();
      });
      socket.on("end", clientClosed);
      socket.on("close", () => {
        sockets.delete(socket);
        up.open--;
      });
      let pending = Buffer.alloc(0);
      socket.on("data", (chunk: Buffer) => {
        pending = Buffer.concat([pending, chunk]);
        while (pending.length >= 2 && pending.length >= pending.readUInt16BE(0) + 2) {
          const frame = Buffer.from(pending.subarray(2, 2 + pending.readUInt16BE(0)));
          pending = pending.subarray(2 + frame.length);
          up.tcpReceived.push(frame);
          handlers.tcp?.(frame, peer);
        }
      });
    });
    return up;
  }
  throw new Error("could not bind a raw test upstream");
}

export interface AnswerOptions {
  ips?: string[];
  ttl?: number;
  rcode?: number;
  /** Overrides the ID (default: the query's). */
  id?: number;
  /** Overrides the question name. */
  name?: string;
  /** Sets TC. */
  truncated?: boolean;
  /** Clears QR. */
  notResponse?: boolean;
}

/** The wire answer to `query` with the given changes. */
export function answerBytes(query: Buffer, opts: AnswerOptions = {}): Buffer {
  const q = decodeMessage(query);
  const reply: Message = answerWith(q, opts.ips ?? ["192.0.2.1"], opts.ttl ?? 300, opts.rcode ?? 0);
  if (opts.id !== undefined) reply.id = opts.id;
  if (opts.name !== undefined) reply.questions[0].name = opts.name;
  if (opts.truncated) reply.flags |= 0x0200;
  if (opts.notResponse) reply.flags &= ~0x8000;
  return encodeMessage(reply);
}

/** The query ID. */
export const idOf = (msg: Buffer): number => msg.readUInt16BE(0);
