// Outbound connections through a SOCKS5 proxy (RFC 1928, user/password auth RFC 1929), by the
// `socks` package: the upgrade's and downloads' requests, forward's TCP, DoT and DoH upstreams, and
// whatever an outbound profile (network.outbound) carries. The proxy resolves host names (socks5h
// semantics), so no DNS query for the destination leaves here. Its errors are put in our words.

import net from "node:net";
import type * as Socks from "socks";
import { lazyModule } from "../lazy-module.js";

const socks = lazyModule<typeof Socks>("socks");

/** A proxy as configured: `socks5://[user:pass@]host[:port]` (also `socks5h://`), or without the scheme. */
export interface Socks5Proxy {
  host: string;
  port: number;
  userId: string;
  password: string;
}

export const DEFAULT_SOCKS5_PORT = 1080;

/** Parses a proxy address; throws an Error naming the problem. */
export function parseSocks5(text: string): Socks5Proxy {
  const withScheme = /^[a-z][a-z0-9+.-]*:\/\//i.test(text) ? text : `socks5://${text}`;
  let url: URL;
  try {
    url = new URL(withScheme);
  } catch {
    throw new Error(`'${text}' is not a SOCKS5 proxy address (socks5://[user:pass@]host:port)`);
  }
  if (url.protocol !== "socks5:" && url.protocol !== "socks5h:") throw new Error(`'${text}': only socks5:// proxies are supported`);
  if (url.hostname === "") throw new Error(`'${text}' has no proxy host`);
  if ((url.pathname !== "" && url.pathname !== "/") || url.search !== "" || url.hash !== "") throw new Error(`'${text}' must be socks5://[user:pass@]host:port (no path or query)`);
  let userId: string;
  let password: string;
  try {
    userId = decodeURIComponent(url.username);
    password = decodeURIComponent(url.password);
  } catch {
    throw new Error(`'${text}' has a badly escaped user name or password`);
  }
  return { host: url.hostname.replace(/^\[|\]$/g, ""), port: Number(url.port || DEFAULT_SOCKS5_PORT), userId, password };
}

export interface Socks5ConnectOptions {
  /** Local address the connection to the proxy starts from. */
  bind?: string | null;
  /** Handshake deadline (connect to the proxy, authentication, CONNECT). */
  timeoutMs?: number;
  /** Ends the attempt: the connection to the proxy is closed. */
  signal?: AbortSignal;
}

/** A TCP connection to host:port through `proxy`, handshake done. */
export async function socks5Connect(proxy: string | Socks5Proxy, host: string, port: number, options: Socks5ConnectOptions = {}): Promise<net.Socket> {
  const p = typeof proxy === "string" ? parseSocks5(proxy) : proxy;
  if (options.signal?.aborted) throw new Error("cancelled");
  const toProxy = net.connect({ host: p.host, port: p.port, ...(options.bind ? { localAddress: options.bind } : {}) });
  const abort = (): void => void toProxy.destroy(new Error("cancelled"));
  options.signal?.addEventListener("abort", abort, { once: true });
  try {
    const { socket } = await socks().SocksClient.createConnection({
      proxy: { host: p.host, port: p.port, type: 5, ...(p.userId ? { userId: p.userId, password: p.password } : {}) },
      command: "connect",
      destination: { host: host.replace(/^\[|\]$/g, ""), port },
      existing_socket: toProxy,
      ...(options.timeoutMs !== undefined ? { timeout: Math.max(1, Math.round(options.timeoutMs)) } : {}),
    });
    return socket;
  } catch (err) {
    toProxy.destroy();
    if (options.signal?.aborted) throw new Error("cancelled", { cause: err });
    const message = (err as Error).message;
    if (/authentication failed/i.test(message)) throw new Error("the SOCKS5 proxy refused the user name and password", { cause: err });
    if (/no acceptable authentication|authentication/i.test(message)) {
      throw new Error(p.userId ? "the SOCKS5 proxy accepts none of the offered authentication methods" : "the SOCKS5 proxy requires authentication (socks5://user:pass@host:port)", { cause: err });
    }
    throw new Error(`the SOCKS5 proxy could not connect to ${host}:${port}: ${message}`, { cause: err });
  } finally {
    options.signal?.removeEventListener("abort", abort);
  }
}
