// Client-side helpers for tests: build queries, send them over real UDP/TCP sockets, decode answers.

import dgram from "node:dgram";
import net from "node:net";
import { parseType, QTYPE } from "../../src/dns/constants.js";
import { formatIP } from "../../src/dns/ip.js";
import { decodeMessage, encodeMessage, type Edns, type Message } from "../../src/dns/message.js";

export interface QueryOptions {
  id?: number;
  /** Adds an OPT record with this UDP size. */
  edns?: number | Partial<Edns>;
  /** DNSSEC OK bit (implies EDNS). */
  dnssecOk?: boolean;
  rd?: boolean;
  qclass?: number;
}

export function buildQuery(name: string, type: string | number = "A", opts: QueryOptions = {}): Buffer {
  const qtype = typeof type === "number" ? type : (parseType(type) ?? QTYPE.A);
  let edns: Edns | null = null;
  if (opts.edns !== undefined || opts.dnssecOk) {
    const base: Edns = { udpSize: 1232, extRcode: 0, version: 0, flags: opts.dnssecOk ? 0x8000 : 0, options: [] };
    edns = typeof opts.edns === "object" ? { ...base, ...opts.edns } : { ...base, udpSize: opts.edns ?? 1232 };
  }
  const msg: Message = {
    id: opts.id ?? Math.floor(Math.random() * 0xffff),
    flags: opts.rd === false ? 0 : 0x0100,
    questions: [{ name, type: qtype, class: opts.qclass ?? 1 }],
    answers: [],
    authorities: [],
    additionals: [],
    edns,
  };
  return encodeMessage(msg);
}

/** Sends raw bytes over UDP and resolves with the first datagram back, or null after `timeoutMs`. */
export function udpExchange(port: number, packet: Buffer, timeoutMs = 2000, host = "127.0.0.1"): Promise<Buffer | null> {
  return new Promise((resolve) => {
    const sock = dgram.createSocket(host.includes(":") ? "udp6" : "udp4");
    const timer = setTimeout(() => {
      sock.close();
      resolve(null);
    }, timeoutMs);
    sock.on("message", (msg) => {
      clearTimeout(timer);
      sock.close();
      resolve(msg);
    });
    sock.send(packet, port, host);
  });
}

/** Opens a TCP connection, sends framed packets, collects `expect` framed answers. */
export function tcpExchange(port: number, packets: Buffer[], expect = packets.length, timeoutMs = 3000): Promise<Buffer[]> {
  return new Promise((resolve, reject) => {
    const sock = net.connect(port, "127.0.0.1");
    const answers: Buffer[] = [];
    let pending = Buffer.alloc(0);
    const timer = setTimeout(() => {
      sock.destroy();
      reject(new Error(`tcp: got ${answers.length} of ${expect} answers before the timeout`));
    }, timeoutMs);
    sock.on("error", (err) => {
      clearTimeout(timer);
      reject(err);
    });
    sock.on("connect", () => {
      for (const p of packets) {
        const frame = Buffer.alloc(p.length + 2);
        frame.writeUInt16BE(p.length, 0);
        p.copy(frame, 2);
        sock.write(frame);
      }
    });
    sock.on("data", (chunk: Buffer) => {
      pending = Buffer.concat([pending, chunk]);
      while (pending.length >= 2 && pending.length >= pending.readUInt16BE(0) + 2) {
        const len = pending.readUInt16BE(0);
        answers.push(Buffer.from(pending.subarray(2, 2 + len)));
        pending = pending.subarray(2 + len);
      }
      if (answers.length >= expect) {
        clearTimeout(timer);
        sock.destroy();
        resolve(answers);
      }
    });
  });
}

/** Query over UDP (default) or TCP and decode the answer; throws when nothing comes back. */
export async function query(port: number, name: string, type: string | number = "A", opts: QueryOptions & { tcp?: boolean; timeoutMs?: number } = {}): Promise<Message> {
  const packet = buildQuery(name, type, opts);
  const raw = opts.tcp ? (await tcpExchange(port, [packet], 1, opts.timeoutMs))[0] : await udpExchange(port, packet, opts.timeoutMs);
  if (!raw) throw new Error(`no answer for ${name} ${String(type)} on port ${port}`);
  return decodeMessage(raw);
}

export function rcodeOf(m: Message): number {
  return ((m.edns?.extRcode ?? 0) << 4) | (m.flags & 0x0f);
}

/** IPv4/IPv6 addresses in the answer section, as text. */
export function answerIps(m: Message): string[] {
  return m.answers
    .filter((r) => r.type === QTYPE.A || r.type === QTYPE.AAAA)
    .map((r) => formatIP(r.data));
}

/**
 * Sends many queries from one UDP socket (ids must be distinct), paced `perTick` per event-loop
 * turn, and collects answers by id until all arrived or `timeoutMs` passed.
 */
export function udpBurst(port: number, packets: Buffer[], opts: { timeoutMs?: number; perTick?: number; sink?: Map<number, Buffer> } = {}): Promise<Map<number, Buffer>> {
  return new Promise((resolve) => {
    const sock = dgram.createSocket("udp4");
    const answers = opts.sink ?? new Map<number, Buffer>();
    const finish = (): void => {
      clearTimeout(timer);
      sock.close();
      resolve(answers);
    };
    const timer = setTimeout(finish, opts.timeoutMs ?? 5000);
    sock.on("message", (msg) => {
      answers.set(msg.readUInt16BE(0), msg);
      if (answers.size === packets.length) finish();
    });
    const perTick = opts.perTick ?? 50;
    let i = 0;
    const pump = (): void => {
      for (let n = 0; n < perTick && i < packets.length; n++, i++) sock.send(packets[i], port, "127.0.0.1");
      if (i < packets.length) setImmediate(pump);
    };
    sock.bind(0, "127.0.0.1", pump);
  });
}
