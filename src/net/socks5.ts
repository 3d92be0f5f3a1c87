// A SOCKS5 client (RFC 1928, user/password auth RFC 1929) for outbound requests (the upgrade's): the proxy
// resolves the host name (socks5h semantics), so no DNS query for the release host leaves here.

import net from "node:net";
import { parseIP } from "../dns/ip.js";

const VERSION = 5;
const REPLIES: Record<number, string> = {
  1: "general failure",
  2: "connection not allowed by ruleset",
  3: "network unreachable",
  4: "host unreachable",
  5: "connection refused",
  6: "TTL expired",
  7: "command not supported",
  8: "address type not supported",
};

/** Reads exactly the bytes asked for from a socket that is still in the handshake. */
class Reader {
  private buf = Buffer.alloc(0);
  private want: { n: number; resolve: (b: Buffer) => void; reject: (e: Error) => void } | null = null;
  private failure: Error | null = null;

  constructor(socket: net.Socket) {
    socket.on("data", (d: Buffer) => {
      this.buf = Buffer.concat([this.buf, d]);
      this.flush();
    });
    const fail = (err: Error): void => {
      this.failure = err;
      this.want?.reject(err);
      this.want = null;
    };
    socket.once("error", fail);
    socket.once("close", () => fail(new Error("the SOCKS5 proxy closed the connection during the handshake")));
  }

  read(n: number): Promise<Buffer> {
    if (this.failure) return Promise.reject(this.failure);
    return new Promise((resolve, reject) => {
      this.want = { n, resolve, reject };
      this.flush();
    });
  }

  private flush(): void {
    if (!this.want || this.buf.length < this.want.n) return;
    const out = this.buf.subarray(0, this.want.n);
    this.buf = this.buf.subarray(this.want.n);
    const w = this.want;
    this.want = null;
    w.resolve(out);
  }
}

/** ATYP and address: IPv4 (1), IPv6 (4), or a name (3) the proxy resolves. */
function addressBytes(host: string): Buffer {
  const ip = parseIP(host);
  if (ip) return Buffer.concat([Buffer.from([ip.length === 4 ? 1 : 4]), ip]);
  const name = Buffer.from(host, "utf8");
  if (name.length > 255) throw new Error(`host name too long for SOCKS5: ${host}`);
  return Buffer.concat([Buffer.from([3, name.length]), name]);
}

/** A TCP connection to host:port through the proxy `socks5://[user:pass@]proxy:port`, handshake done. */
export async function socks5Connect(proxy: string, host: string, port: number): Promise<net.Socket> {
  const url = new URL(proxy);
  const user = decodeURIComponent(url.username);
  const pass = decodeURIComponent(url.password);
  const socket = net.connect({ host: url.hostname.replace(/^\[|\]$/g, ""), port: Number(url.port || 1080) });
  const reader = new Reader(socket);
  try {
    socket.write(Buffer.from(user ? [VERSION, 2, 0, 2] : [VERSION, 1, 0]));
    const [ver, method] = await reader.read(2);
    if (ver !== VERSION) throw new Error("the proxy does not speak SOCKS5");
    if (method === 2) {
      const u = Buffer.from(user, "utf8");
      const p = Buffer.from(pass, "utf8");
      socket.write(Buffer.concat([Buffer.from([1, u.length]), u, Buffer.from([p.length]), p]));
      const [, status] = await reader.read(2);
      if (status !== 0) throw new Error("the SOCKS5 proxy refused the user name and password");
    } else if (method !== 0) {
      throw new Error(user ? "the SOCKS5 proxy accepts none of the offered authentication methods" : "the SOCKS5 proxy requires authentication (socks5://user:pass@host:port)");
    }
    const addr = addressBytes(host.replace(/^\[|\]$/g, ""));
    socket.write(Buffer.concat([Buffer.from([VERSION, 1, 0]), addr, Buffer.from([port >> 8, port & 0xff])]));
    const [, rep, , atyp] = await reader.read(4);
    if (rep !== 0) throw new Error(`the SOCKS5 proxy could not connect to ${host}:${port}: ${REPLIES[rep] ?? `reply ${rep}`}`);
    const rest = atyp === 1 ? 4 : atyp === 4 ? 16 : (await reader.read(1))[0];
    await reader.read(rest + 2);
    socket.removeAllListeners("data");
    socket.removeAllListeners("close");
    socket.removeAllListeners("error");
    return socket;
  } catch (err) {
    socket.destroy();
    throw err;
  }
}
