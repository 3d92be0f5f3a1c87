// Host names of seen clients: one PTR query per address (in-addr.arpa / ip6.arpa) over UDP to the
// resolver `hostnames` names (the router, usually, which knows its DHCP leases). A few at a time, each
// with a timeout; no answer, an error or no PTR record leaves the client without a name.

import { randomInt } from "node:crypto";
import dgram from "node:dgram";
import { FLAG, QCLASS, QTYPE, RCODE } from "../../../dns/constants.js";
import { parseIP, unmapIPv4 } from "../../../dns/ip.js";
import { decodeMessage, encodeMessage, messageRcode } from "../../../dns/message.js";
import { readName } from "../../../dns/name.js";
import type { BootstrapAddress } from "../../../engine/upstream/address.js";

/** Lookups in flight at once. */
const CONCURRENCY = 4;
const TIMEOUT_MS = 2000;

/** The PTR name of an address (`7.1.168.192.in-addr.arpa`), or null when `address` is not one. */
export function reverseName(address: string): string | null {
  const ip = parseIP(address.split("%")[0]);
  if (ip === null) return null;
  const bytes = unmapIPv4(ip);
  if (bytes.length === 4) return `${[...bytes].reverse().join(".")}.in-addr.arpa`;
  const nibbles: string[] = [];
  for (let i = bytes.length - 1; i >= 0; i--) nibbles.push((bytes[i] & 0x0f).toString(16), (bytes[i] >> 4).toString(16));
  return `${nibbles.join(".")}.ip6.arpa`;
}

/** The first PTR name the resolver answers for `address` (without the final dot), or null. */
export function lookupPtr(server: BootstrapAddress, address: string, timeoutMs = TIMEOUT_MS): Promise<string | null> {
  const name = reverseName(address);
  if (name === null) return Promise.resolve(null);
  const id = randomInt(0x10000);
  const query = encodeMessage({ id, flags: FLAG.RD, questions: [{ name, type: QTYPE.PTR, class: QCLASS.IN }], answers: [], authorities: [], additionals: [], edns: null });
  return new Promise((resolve) => {
    const socket = dgram.createSocket(server.family === 6 ? "udp6" : "udp4");
    const done = (result: string | null): void => {
      clearTimeout(timer);
      socket.close();
      resolve(result);
    };
    const timer = setTimeout(() => done(null), timeoutMs);
    socket.on("error", () => done(null));
    socket.on("message", (msg, rinfo) => {
      if (rinfo.port !== server.port || msg.length < 12 || msg.readUInt16BE(0) !== id) return;
      try {
        const answer = decodeMessage(msg);
        if (messageRcode(answer) !== RCODE.NOERROR) return done(null);
        const ptr = answer.answers.find((rr) => rr.type === QTYPE.PTR);
        done(ptr ? readName(ptr.data, 0).name.replace(/\.$/, "") || null : null);
      } catch {
        done(null);
      }
    });
    socket.send(query, server.port, server.host, (err) => {
      if (err) done(null);
    });
  });
}

/** Runs `work` on every item, at most CONCURRENCY at a time. */
export async function eachLimited<T>(items: readonly T[], work: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) await work(items[next++]);
  };
  await Promise.all(Array.from({ length: Math.min(CONCURRENCY, items.length) }, worker));
}
