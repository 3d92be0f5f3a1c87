// Outbound connections through a SOCKS5 proxy (RFC 1928, user/password auth RFC 1929) for the
// upgrade's requests, by the `socks` package. The proxy resolves the host name (socks5h semantics),
// so no DNS query for the release host leaves here. Its errors are put in our words.

import type net from "node:net";
import { SocksClient } from "socks";

/** A TCP connection to host:port through the proxy `socks5://[user:pass@]proxy:port`, handshake done (within `timeoutMs` when given). */
export async function socks5Connect(proxy: string, host: string, port: number, timeoutMs?: number): Promise<net.Socket> {
  const url = new URL(proxy);
  const userId = decodeURIComponent(url.username);
  const password = decodeURIComponent(url.password);
  try {
    const { socket } = await SocksClient.createConnection({
      proxy: { host: url.hostname.replace(/^\[|\]$/g, ""), port: Number(url.port || 1080), type: 5, ...(userId ? { userId, password } : {}) },
      command: "connect",
      destination: { host: host.replace(/^\[|\]$/g, ""), port },
      ...(timeoutMs === undefined ? {} : { timeout: timeoutMs }),
    });
    return socket;
  } catch (err) {
    const message = (err as Error).message;
    if (/authentication failed/i.test(message)) throw new Error("the SOCKS5 proxy refused the user name and password", { cause: err });
    if (/no acceptable authentication|authentication/i.test(message)) {
      throw new Error(userId ? "the SOCKS5 proxy accepts none of the offered authentication methods" : "the SOCKS5 proxy requires authentication (socks5://user:pass@host:port)", { cause: err });
    }
    throw new Error(`the SOCKS5 proxy could not connect to ${host}:${port}: ${message}`, { cause: err });
  }
}
