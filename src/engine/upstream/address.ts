// Upstream addresses (`udp://host[:port]`, `tcp://`, `tcp+pipeline://`, bare `host[:port]` = udp,
// `tls://host[:853]`, `https://host[:443]/path`) and bootstrap server addresses (`ip[:port]`).

import { isIPv4, isIPv6 } from "node:net";
import { checkName } from "../../dns/name.js";
import { formatIP, parseIP } from "../../dns/ip.js";

export type UpstreamProtocol = "udp" | "tcp" | "tls" | "https";

export interface UpstreamAddress {
  protocol: UpstreamProtocol;
  /** Set by the `tcp+pipeline://` scheme. */
  pipeline: boolean;
  /** Canonical IP text, or a lower-case hostname without trailing dot. */
  host: string;
  /** True when `host` is an IP address (no resolution needed). */
  hostIsIp: boolean;
  port: number;
  /** Address family of `host` when it is an IP. */
  family: 4 | 6;
  /** `https://`: the request path (and query), `/dns-query` when the address gives none. */
  path?: string;
}

export const DEFAULT_DNS_PORT = 53;
const DEFAULT_PORTS: Record<UpstreamProtocol, number> = { udp: 53, tcp: 53, tls: 853, https: 443 };
export const DEFAULT_DOH_PATH = "/dns-query";

const SUPPORTED: Record<string, { protocol: UpstreamProtocol; pipeline: boolean }> = {
  udp: { protocol: "udp", pipeline: false },
  tcp: { protocol: "tcp", pipeline: false },
  "tcp+pipeline": { protocol: "tcp", pipeline: true },
  // RFC 7858 §3.3: DoT clients pipeline; `tls+pipeline://` is the same, for configurations of the family.
  tls: { protocol: "tls", pipeline: true },
  "tls+pipeline": { protocol: "tls", pipeline: true },
  https: { protocol: "https", pipeline: false },
};
const SCHEMES = "udp://, tcp://, tcp+pipeline://, tls://, https://";

/** Schemes of the wider family (DoQ, DoH/3, plain HTTP) that this build does not speak. */
const KNOWN_UNSUPPORTED = new Set(["doh", "quic", "doq", "h3", "http"]);

function parsePort(text: string, whole: string): number {
  if (!/^\d{1,5}$/.test(text) || Number(text) < 1 || Number(text) > 65535) {
    throw new Error(`'${whole}' has an invalid port '${text}' (1-65535)`);
  }
  return Number(text);
}

/** Splits `host[:port]` / `[v6][:port]` / bare v6; returns the raw host text and port. */
function splitHostPort(text: string, whole: string, defaultPort = DEFAULT_DNS_PORT): { host: string; port: number; bracketed: boolean } {
  if (text.startsWith("[")) {
    const close = text.indexOf("]");
    if (close < 0) throw new Error(`'${whole}' has an unclosed '['`);
    const host = text.slice(1, close);
    const rest = text.slice(close + 1);
    if (rest === "") return { host, port: defaultPort, bracketed: true };
    if (!rest.startsWith(":")) throw new Error(`'${whole}': expected ':port' after ']'`);
    return { host, port: parsePort(rest.slice(1), whole), bracketed: true };
  }
  const colons = text.split(":").length - 1;
  if (colons > 1) {
    // More than one colon without brackets can only be a bare IPv6 address (no port).
    return { host: text, port: defaultPort, bracketed: false };
  }
  if (colons === 1) {
    const i = text.indexOf(":");
    return { host: text.slice(0, i), port: parsePort(text.slice(i + 1), whole), bracketed: false };
  }
  return { host: text, port: defaultPort, bracketed: false };
}

/** `https://` addresses: the part after the authority, `{?dns}` of a URI template dropped. */
function dohPath(rest: string, addr: string): { authority: string; path: string } {
  const slash = rest.indexOf("/");
  if (slash < 0) {
    if (rest.includes("?") || rest.includes("#")) throw new Error(`'${addr}' must be https://host[:port]/path`);
    return { authority: rest, path: DEFAULT_DOH_PATH };
  }
  const path = rest.slice(slash).replace(/\{\?dns\}$/, "");
  if (!/^\/[\x21-\x7e]*$/.test(path) || path.includes("#") || path.includes("{")) throw new Error(`'${addr}' has an invalid path '${path}' (no spaces, # or templates other than {?dns})`);
  return { authority: rest.slice(0, slash), path };
}

function canonicalIp(text: string, whole: string): string {
  const bytes = parseIP(text);
  if (!bytes) throw new Error(`'${whole}': '${text}' is not a usable IP address (zone ids are not supported)`);
  return formatIP(bytes);
}

/** Parses an upstream `addr`; throws an Error whose message names the problem. */
export function parseUpstreamAddr(addr: string): UpstreamAddress {
  const text = addr.trim();
  if (text === "") throw new Error("upstream address is empty");
  let scheme = "udp";
  let rest = text;
  const sep = text.indexOf("://");
  if (sep >= 0) {
    scheme = text.slice(0, sep).toLowerCase();
    rest = text.slice(sep + 3);
  }
  const kind = SUPPORTED[scheme];
  if (!kind) {
    if (KNOWN_UNSUPPORTED.has(scheme)) throw new Error(`scheme ${scheme}:// is not supported in this build (supported: ${SCHEMES})`);
    throw new Error(`unknown scheme '${scheme}://' in '${addr}' (supported: ${SCHEMES})`);
  }
  let path: string | undefined;
  if (kind.protocol === "https") ({ authority: rest, path } = dohPath(rest, addr));
  if (rest.includes("/") || rest.includes("?") || rest.includes("@")) {
    throw new Error(kind.protocol === "https" ? `'${addr}' must be https://host[:port]/path (no user)` : `'${addr}' must be ${scheme}://host[:port] (no path, query or user)`);
  }
  const { host, port, bracketed } = splitHostPort(rest, addr, DEFAULT_PORTS[kind.protocol]);
  if (host === "") throw new Error(`'${addr}' has no host`);
  const withPath = path === undefined ? kind : { ...kind, path };
  if (isIPv6(host)) return { ...withPath, host: canonicalIp(host, addr), hostIsIp: true, port, family: 6 };
  if (bracketed) throw new Error(`'${addr}': '[${host}]' is not an IPv6 address`);
  if (isIPv4(host)) return { ...withPath, host: canonicalIp(host, addr), hostIsIp: true, port, family: 4 };
  if (/^[\d.]+$/.test(host)) throw new Error(`'${addr}': '${host}' is not a valid IPv4 address`);
  const name = host.toLowerCase().replace(/\.$/, "");
  const problem = checkName(name);
  if (problem !== null || !/^[a-z0-9_.-]+$/.test(name)) {
    throw new Error(`'${addr}': '${host}' is neither an IP address nor a valid hostname`);
  }
  return { ...withPath, host: name, hostIsIp: false, port, family: 4 };
}

export interface DialAddress {
  host: string;
  /** null: the upstream's own port. */
  port: number | null;
  family: 4 | 6;
}

/** Parses `dial_addr`: `ip`, `ip:port`, `[v6]` or `[v6]:port`. */
export function parseDialAddr(text: string): DialAddress {
  const t = text.trim();
  const { host, port } = splitHostPort(t, text, 0);
  if (isIPv4(host)) return { host: canonicalIp(host, text), port: port === 0 ? null : port, family: 4 };
  if (isIPv6(host)) return { host: canonicalIp(host, text), port: port === 0 ? null : port, family: 6 };
  throw new Error(`dial_addr '${text}' must be an IP address with an optional port (ip, ip:port, [v6]:port)`);
}

export interface BootstrapAddress {
  host: string;
  port: number;
  family: 4 | 6;
}

/** Parses a bootstrap server: `ip`, `ip:port`, `[v6]` or `[v6]:port` (port defaults to 53). */
export function parseBootstrap(text: string): BootstrapAddress {
  const t = text.trim();
  const { host, port } = splitHostPort(t, text);
  if (isIPv4(host)) return { host: canonicalIp(host, text), port, family: 4 };
  if (isIPv6(host)) return { host: canonicalIp(host, text), port, family: 6 };
  throw new Error(`bootstrap '${text}' must be an IP address with an optional port (ip:port, [v6]:port)`);
}

/** `host:port` / `[v6]:port` for messages. */
export function hostPort(host: string, port: number): string {
  return host.includes(":") ? `[${host}]:${port}` : `${host}:${port}`;
}
