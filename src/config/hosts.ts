// Host names as the API's Host check and the `allowed_hosts` setting spell them.

import { isIPv6 } from "node:net";

const NAME = /^[a-z0-9_-]+(\.[a-z0-9_-]+)*\.?$/;

/** The host of a Host header value: lower case, no brackets, port or trailing dot; null when malformed. */
export function hostOfHeader(value: string): string | null {
  const v = value.trim().toLowerCase();
  let host: string;
  let rest: string;
  if (v.startsWith("[")) {
    const end = v.indexOf("]");
    if (end < 0) return null;
    host = v.slice(1, end);
    rest = v.slice(end + 1);
    if (!isIPv6(host)) return null;
  } else {
    const colon = v.indexOf(":");
    host = colon < 0 ? v : v.slice(0, colon);
    rest = colon < 0 ? "" : v.slice(colon);
    if (!NAME.test(host)) return null;
  }
  if (rest !== "" && !/^:\d{1,5}$/.test(rest)) return null;
  return host.endsWith(".") ? host.slice(0, -1) : host;
}

/** An `allowed_hosts` entry (a name, `[ipv6]` or `*`; a port is ignored) as hostOfHeader returns it; null when it is none. */
export function normaliseAllowedHost(entry: string): string | null {
  return entry.trim() === "*" ? "*" : hostOfHeader(entry);
}
