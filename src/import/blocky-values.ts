// Value forms of blocky's config.yml: Go durations, resolver strings, listen lists and the lines of
// its block and allow lists, turned into what Sluice's plugins take.

import { isIP } from "node:net";

/** A Go duration (`1h30m`, `500ms`, `-1`), or a bare number in `bareUnit` seconds; null when unreadable. */
export function goDurationSeconds(value: unknown, bareUnit = 1): number | null {
  if (typeof value === "number") return value * bareUnit;
  if (typeof value !== "string") return null;
  const text = value.trim();
  if (/^-?\d+(\.\d+)?$/.test(text)) return Number(text) * bareUnit;
  const m = /^(-?)((?:\d+(?:\.\d+)?(?:ns|us|µs|ms|s|m|h))+)$/.exec(text);
  if (!m) return null;
  const units: Record<string, number> = { ns: 1e-9, us: 1e-6, µs: 1e-6, ms: 1e-3, s: 1, m: 60, h: 3600 };
  let total = 0;
  for (const part of m[2].matchAll(/(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)/g)) total += Number(part[1]) * units[part[2]];
  return m[1] === "-" ? -total : total;
}

/** A forward upstream of Sluice, as blocky's `[net:]host[:port][/path][#commonName]` says. */
export interface UpstreamSpec {
  addr: string;
  dial_addr?: string;
}

/** The `[v6]`-bracketed or plain host and optional port of `text`. */
function hostPort(text: string): { host: string; port?: string } | null {
  if (text.startsWith("[")) {
    const end = text.indexOf("]");
    if (end < 0) return null;
    const rest = text.slice(end + 1);
    if (rest !== "" && !/^:\d{1,5}$/.test(rest)) return null;
    return { host: text.slice(1, end), port: rest === "" ? undefined : rest.slice(1) };
  }
  if (isIP(text) === 6) return { host: text };
  const colon = text.lastIndexOf(":");
  if (colon < 0) return { host: text };
  const port = text.slice(colon + 1);
  if (!/^\d{1,5}$/.test(port)) return null;
  return { host: text.slice(0, colon), port };
}

const hostText = (host: string): string => (isIP(host) === 6 ? `[${host}]` : host);

/** Parses one resolver; a string result is why it cannot be carried over. */
export function parseUpstream(raw: string): UpstreamSpec | string {
  let text = raw.trim();
  if (text.startsWith("sdns://")) return "DNS stamps (sdns://) are not read";
  let commonName: string | undefined;
  const hash = text.indexOf("#");
  if (hash >= 0) {
    commonName = text.slice(hash + 1);
    text = text.slice(0, hash);
  }
  if (/^https:\/\//i.test(text)) {
    const url = new URL(text);
    if (commonName !== undefined) {
      const dial = url.port ? `${hostText(url.hostname.replace(/^\[|\]$/g, ""))}:${url.port}` : url.hostname.replace(/^\[|\]$/g, "");
      url.hostname = commonName;
      return { addr: url.toString(), dial_addr: dial };
    }
    return { addr: text };
  }
  let net = "tcp+udp";
  const scheme = /^(tcp\+udp|tcp-tls|tcp|udp|https|quic):(?!\/\/)/i.exec(text) ?? /^(tcp\+udp|tcp-tls|tcp|udp|quic):\/\//i.exec(text);
  if (scheme) {
    net = scheme[1].toLowerCase();
    text = text.slice(scheme[0].length);
  }
  if (net === "quic") return "DNS over QUIC is not in this build";
  const slash = text.indexOf("/");
  if (slash >= 0) text = text.slice(0, slash);
  const hp = hostPort(text);
  if (!hp || hp.host === "") return `'${raw}' is not [net:]host[:port][/path][#commonName]`;
  const port = hp.port === undefined ? "" : `:${hp.port}`;
  if (net === "tcp-tls") {
    if (commonName !== undefined) return { addr: `tls://${commonName}${port}`, dial_addr: `${hostText(hp.host)}${port || ":853"}` };
    return { addr: `tls://${hostText(hp.host)}${port}` };
  }
  // tcp+udp is UDP with a retry over TCP when the answer is truncated: what Sluice's udp:// does.
  return { addr: `${net === "tcp" ? "tcp" : "udp"}://${hostText(hp.host)}${port}` };
}

/** blocky's `[IP]:port[,[IP]:port]*` (or a bare port, every address) as Sluice listen addresses. */
export function listenList(value: unknown): string[] {
  const text = typeof value === "number" ? String(value) : typeof value === "string" ? value : "";
  return text
    .split(",")
    .map((s) => s.trim())
    .filter((s) => s !== "")
    .map((s) => (/^\d+$/.test(s) ? `:${s}` : s));
}

/** One line of a blocky block or allow list in AdGuard rule syntax (name and subdomains), or null for none. */
export function listLineToRule(line: string): string | null {
  let t = line.trim();
  if (t === "" || t.startsWith("#")) return null;
  if (t.startsWith("/") && t.length > 2 && t.endsWith("/")) return t;
  const comment = t.search(/\s#/);
  if (comment >= 0) t = t.slice(0, comment).trim();
  const fields = t.split(/\s+/);
  // hosts format: an address, then names.
  const names = fields.length > 1 && isIP(fields[0]) !== 0 ? fields.slice(1) : fields.slice(0, 1);
  const rules = names
    .map((n) => n.toLowerCase().replace(/^\*\./, "").replace(/\.$/, ""))
    .filter((n) => n !== "" && !["localhost", "localhost.localdomain", "broadcasthost", "local", "ip6-localhost", "ip6-loopback"].includes(n))
    .map((n) => `||${n}^`);
  return rules.length === 0 ? null : rules.join("\n");
}

/** A source of a list: a URL, inline lines (it holds a newline) or a local file (anything else). */
export type ListSource = { kind: "url"; url: string } | { kind: "inline"; text: string } | { kind: "file"; path: string };

export function listSource(value: string): ListSource {
  if (/^https?:\/\//i.test(value)) return { kind: "url", url: value };
  if (value.includes("\n")) return { kind: "inline", text: value };
  return { kind: "file", path: value.trim() };
}

/** A name usable in a Sluice tag or a client/group name: letters, digits, `_`, `-`. */
export function slug(text: string): string {
  const s = text
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, "-")
    .replace(/^-+|-+$/g, "");
  return s === "" ? "x" : s.slice(0, 50);
}
