// The forms of values the importers share: upstream and bootstrap addresses as `forward` takes them,
// client names as the `clients` provider takes them, Go-style durations.

import { isIP } from "node:net";

/**
 * An upstream as forward's `addr`, or null when this build cannot speak its protocol (DoQ, DoH3,
 * DNSCrypt stamps). Accepts `ip`, `ip:port`, `[v6]:port`, `ip#port` (dnsmasq, Pi-hole), and the
 * `udp://`, `tcp://`, `tls://`, `https://` forms with a host name or an address.
 */
export function normaliseUpstream(text: string): string | null {
  const s = text.trim();
  if (s === "") return null;
  const scheme = /^([a-z0-9+]+):\/\//i.exec(s)?.[1]?.toLowerCase();
  if (scheme !== undefined) {
    if (["udp", "tcp", "tls", "https", "tcp+pipeline", "tls+pipeline"].includes(scheme)) return scheme + s.slice(scheme.length);
    return null; // quic://, h3://, sdns://, http:// ...
  }
  const hash = /^(.+)#(\d+)$/.exec(s);
  if (hash) return `udp://${hostPort(hash[1] ?? "", hash[2] ?? "53")}`;
  if (isIP(s) === 6) return `udp://[${s}]`;
  if (isIP(s) === 4) return `udp://${s}`;
  const bracketed = /^\[([0-9a-f:.]+)\](?::(\d+))?$/i.exec(s);
  if (bracketed && isIP(bracketed[1] ?? "") === 6) return `udp://[${bracketed[1]}]${bracketed[2] ? ":" + bracketed[2] : ""}`;
  const hp = /^([a-z0-9.-]+)(?::(\d+))?$/i.exec(s);
  if (hp) return `udp://${s}`;
  return null;
}

function hostPort(host: string, port: string): string {
  return isIP(host) === 6 ? `[${host}]:${port}` : `${host}:${port}`;
}

/** `ip` or `ip:port` for a bootstrap server (plain DNS only), or null. */
export function normaliseBootstrap(text: string): string | null {
  const addr = normaliseUpstream(text);
  if (addr === null || !addr.startsWith("udp://")) return null;
  const rest = addr.slice("udp://".length);
  const host = rest.startsWith("[") ? rest.slice(1, rest.indexOf("]")) : rest.split(":")[0] ?? "";
  if (isIP(host) === 0) return null;
  return /^\[[^\]]+\]$/.test(rest) ? host : rest; // a bare IPv6 address without its brackets
}

/** A name the `clients` provider accepts: letters, digits, `.`, `_`, `-`, starting with a letter or digit, ≤ 63. */
export function sluiceName(text: string): string {
  const s = text.trim().toLowerCase().replace(/[^a-z0-9._-]+/g, "-").replace(/^[^a-z0-9]+/, "").slice(0, 63);
  return s === "" ? "client" : s;
}

/** `10s`, `1m30s`, `500ms`, `2h` (Go-style durations, as AdGuard Home writes them) in ms; 5000 when unreadable. */
export function durationMs(text: string): number {
  const units: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };
  let total = 0;
  const parts = text.trim().match(/(\d+(?:\.\d+)?)(ms|s|m|h)/g);
  if (!parts || parts.join("") !== text.trim()) return 5000;
  for (const p of parts) {
    const m = /(\d+(?:\.\d+)?)(ms|s|m|h)/.exec(p);
    if (m) total += Number(m[1]) * (units[m[2] ?? "s"] ?? 1000);
  }
  return Math.max(1, Math.min(600_000, Math.round(total)));
}

export function isUrl(s: string): boolean {
  return /^https?:\/\//i.test(s);
}

export function needsBootstrap(addr: string): boolean {
  const rest = addr.replace(/^[a-z0-9+]+:\/\//i, "");
  const host = rest.startsWith("[") ? rest.slice(1, rest.indexOf("]")) : (rest.split(/[:/]/)[0] ?? "");
  return isIP(host) === 0;
}
