// A small DNS responder on 127.0.0.1 (UDP and TCP on the same port) that tests use as an upstream.

import dgram from "node:dgram";
import net from "node:net";
import { decodeMessage, encodeMessage, replyTo, type Message, type ResourceRecord } from "../../src/dns/message.js";
import { addressRecord } from "../../src/dns/rdata.js";
import { parseIP } from "../../src/dns/ip.js";

/** What a test's handler returns: a message, raw bytes, or null for "stay silent". */
export type Reply = Message | Buffer | null;
export type ReplyHandler = (query: Message, via: "udp" | "tcp") => Reply | Promise<Reply>;

export interface Responder {
  port: number;
  /** Queries seen, in arrival order. */
  seen: { query: Message; via: "udp" | "tcp" }[];
  close(): Promise<void>;
}

export async function startResponder(handler: ReplyHandler): Promise<Responder> {
  for (let attempt = 0; attempt < 20; attempt++) {
    const udp = dgram.createSocket("udp4");
    await new Promise<void>((r) => udp.bind(0, "127.0.0.1", () => r()));
    const port = udp.address().port;
    const tcp = net.createServer();
    const ok = await new Promise<boolean>((r) => {
      tcp.once("error", () => r(false));
      tcp.listen(port, "127.0.0.1", () => r(true));
    });
    if (!ok) {
      udp.close();
      continue;
    }
    const seen: Responder["seen"] = [];
    const connections = new Set<net.Socket>();
    const answer = async (raw: Buffer, via: "udp" | "tcp"): Promise<Buffer | null> => {
      let query: Message;
      try {
        query = decodeMessage(raw);
      } catch {
        return null;
      }
      seen.push({ query, via });
      const r = await handler(query, via);
      if (r === null) return null;
      return Buffer.isBuffer(r) ? r : encodeMessage(r);
    };
    let closed = false;
    udp.on("message", (msg, rinfo) => {
      // A delayed answer may come due after the test closed the responder: it is simply not sent.
      void answer(msg, "udp").then((a) => {
        if (a && !closed) udp.send(a, rinfo.port, rinfo.address);
      });
    });
    tcp.on("connection", (sock) => {
      connections.add(sock);
      sock.on("close", () => connections.delete(sock));
      sock.on("error", () => sock.destroy());
      let pending = Buffer.alloc(0);
      sock.on("data", (chunk: Buffer) => {
        pending = Buffer.concat([pending, chunk]);
        while (pending.length >= 2 && pending.length >= pending.readUInt16BE(0) + 2) {
          const frame = pending.subarray(2, 2 + pending.readUInt16BE(0));
          pending = pending.subarray(2 + frame.length);
          void answer(Buffer.from(frame), "tcp").then((a) => {
            if (!a || sock.destroyed) return;
            const out = Buffer.alloc(a.length + 2);
            out.writeUInt16BE(a.length, 0);
            a.copy(out, 2);
            sock.write(out);
          });
        }
      });
    });
    return {
      port,
      seen,
      close: async () => {
        closed = true;
        for (const c of connections) c.destroy();
        await Promise.all([new Promise<void>((r) => udp.close(() => r())), new Promise<void>((r) => tcp.close(() => r()))]);
      },
    };
  }
  throw new Error("could not bind a test responder");
}

/** A reply carrying the given addresses (A or AAAA chosen per address), TTL `ttl`. */
export function answerWith(query: Message, ips: string[], ttl = 300, rcode = 0): Message {
  const reply = replyTo(query, rcode);
  const q = query.questions[0];
  reply.answers = ips.map((ip): ResourceRecord => addressRecord(q.name, parseIP(ip) as Uint8Array, ttl));
  return reply;
}

/** A UDP port on 127.0.0.1 with nothing listening on it (bound, read back, released). */
export async function deadUdpPort(): Promise<number> {
  const sock = dgram.createSocket("udp4");
  await new Promise<void>((r) => sock.bind(0, "127.0.0.1", () => r()));
  const port = sock.address().port;
  await new Promise<void>((r) => sock.close(() => r()));
  return port;
}
