// Queries sent from a chosen local address (127.0.0.0/8 is all local on Linux), so that each test client
// has an address of its own.

import dgram from "node:dgram";
import { decodeMessage } from "../../src/dns/message.js";
import { buildQuery, rcodeOf } from "./dns.js";

/** Sends one A query for `name` from `source` to 127.0.0.1:`port` over UDP; resolves with the answer's rcode. */
export function rcodeFrom(source: string, port: number, name = "other.test"): Promise<number> {
  return new Promise((resolve, reject) => {
    const sock = dgram.createSocket("udp4");
    const timer = setTimeout(() => {
      sock.close();
      reject(new Error(`no answer for a query from ${source}`));
    }, 2000);
    sock.on("error", (err) => {
      clearTimeout(timer);
      sock.close();
      reject(err);
    });
    sock.on("message", (msg) => {
      clearTimeout(timer);
      sock.close();
      resolve(rcodeOf(decodeMessage(msg)));
    });
    sock.bind(0, source, () => sock.send(buildQuery(name, "A"), port, "127.0.0.1"));
  });
}
