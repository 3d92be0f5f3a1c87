// Listen addresses: `ip:port`, `[ipv6]:port`, and `:port` (dual-stack `[::]:port`).

import { isIPv4, isIPv6 } from "node:net";

export interface ListenAddress {
  host: string;
  port: number;
  /** `:port` form: one IPv6 socket that also accepts IPv4. */
  dualStack: boolean;
  family: 4 | 6;
  /** Normalised text, used as the identity of a listener across reloads. */
  key: string;
}

export function parseListen(text: string): ListenAddress {
  const t = text.trim();
  const colon = t.lastIndexOf(":");
  if (colon < 0) throw new Error(`listen address '${text}' must be ip:port, [ipv6]:port or :port`);
  const portText = t.slice(colon + 1);
  if (!/^\d{1,5}$/.test(portText) || Number(portText) > 65535) throw new Error(`listen address '${text}' has an invalid port`);
  const port = Number(portText);
  let host = t.slice(0, colon);
  if (host === "") return { host: "::", port, dualStack: true, family: 6, key: `[::]:${port}` };
  if (host.startsWith("[") && host.endsWith("]")) {
    host = host.slice(1, -1);
    if (!isIPv6(host)) throw new Error(`listen address '${text}' has an invalid IPv6 address`);
    return { host, port, dualStack: false, family: 6, key: `[${host.toLowerCase()}]:${port}` };
  }
  if (!isIPv4(host)) throw new Error(`listen address '${text}' needs an IP address (IPv6 in brackets)`);
  return { host, port, dualStack: false, family: 4, key: `${host}:${port}` };
}

export function listenProblem(text: string): string | null {
  try {
    parseListen(text);
    return null;
  } catch (err) {
    return (err as Error).message;
  }
}
