// @ts-check
// The physical limit of Node's socket path on this machine: a responder that copies the query
// (header and question, no parsing beyond the header) and appends one fixed A record.
// It answers on UDP and, for the TCP scenario, on TCP (2-byte length framing) at the same port.
//   node bench/ceiling.mjs <port>      prints "listening <port>" once both are bound
import dgram from "node:dgram";
import net from "node:net";

const port = Number(process.argv[2] ?? 0);
// Name pointer to the question (0xc00c), A, IN, TTL 300, 4 bytes, 192.0.2.1.
const ANSWER = Buffer.from([0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 1, 44, 0, 4, 192, 0, 2, 1]);

/**
 * The answer to `msg[start, end)`, written after `prefix` bytes of room (0 for UDP, 2 for the TCP length).
 * @param {Buffer} msg @param {number} start @param {number} end @param {number} prefix
 */
function answer(msg, start, end, prefix) {
  const len = end - start;
  const out = Buffer.allocUnsafe(prefix + len + ANSWER.length);
  msg.copy(out, prefix, start, end);
  ANSWER.copy(out, prefix + len);
  out[prefix + 2] = 0x80 | (msg[start + 2] & 0x01); // QR, keep RD
  out[prefix + 3] = 0x80; // RA, NOERROR
  out[prefix + 6] = 0;
  out[prefix + 7] = 1; // ANCOUNT 1 (queries carry no answers; an OPT record would follow, so send without EDNS)
  if (prefix === 2) out.writeUInt16BE(len + ANSWER.length, 0);
  return out;
}

// Sends go to the literal address a query came from; skipping dns.lookup's regexp test and next-tick answer is
// the fastest way Node offers to send (Sluice's servers do the same, src/plugins/servers/listeners.ts).
const sock = dgram.createSocket({ type: "udp4", lookup: (address, _options, callback) => callback(null, address, 4) });
sock.on("message", (msg, rinfo) => {
  if (msg.length < 12) return;
  sock.send(answer(msg, 0, msg.length, 0), rinfo.port, rinfo.address);
});

const tcp = net.createServer((conn) => {
  conn.setNoDelay(true);
  /** @type {Buffer} */
  let pending = Buffer.alloc(0);
  conn.on("data", (chunk) => {
    pending = pending.length === 0 ? chunk : Buffer.concat([pending, chunk]);
    let at = 0;
    /** @type {Buffer[]} */
    const replies = [];
    while (pending.length - at >= 2) {
      const len = pending.readUInt16BE(at);
      if (pending.length - at - 2 < len) break;
      if (len >= 12) replies.push(answer(pending, at + 2, at + 2 + len, 2));
      at += 2 + len;
    }
    pending = pending.subarray(at);
    // One write per batch of queries that arrived together, as a real server would coalesce them.
    if (replies.length > 0) conn.write(replies.length === 1 ? replies[0] : Buffer.concat(replies));
  });
  conn.on("error", () => conn.destroy());
});

sock.bind(port, "127.0.0.1", () => {
  try {
    sock.setRecvBufferSize(4 * 1024 * 1024);
    sock.setSendBufferSize(4 * 1024 * 1024);
  } catch {
    /* system limit */
  }
  const bound = sock.address().port;
  tcp.listen(bound, "127.0.0.1", () => console.log(`listening ${bound}`));
});
