// Where an outbound request may connect (docs/operations.md#outbound-requests), judged on the
// address actually connected to, not on the host name's text:
// - never to this process's own management API listener, by any hop (a download item, an upgrade
//   asset or a primary that points there, or redirects there, could otherwise drive the API);
// - a redirect reaches a local-only address (loopback, unspecified, link-local) only when it is the
//   very address and port the configured URL connected to: a loopback mirror may redirect within
//   itself, nothing may redirect onto another service of this host.

import { lookup as dnsLookup, type LookupAddress } from "node:dns";
import { BlockList, isIP, type LookupFunction } from "node:net";
import { networkInterfaces } from "node:os";

const LOCAL_ONLY = new BlockList();
LOCAL_ONLY.addSubnet("127.0.0.0", 8, "ipv4");
LOCAL_ONLY.addSubnet("0.0.0.0", 8, "ipv4");
LOCAL_ONLY.addSubnet("169.254.0.0", 16, "ipv4");
LOCAL_ONLY.addAddress("::1", "ipv6");
LOCAL_ONLY.addAddress("::", "ipv6");
LOCAL_ONLY.addSubnet("fe80::", 10, "ipv6");

/** The address in one spelling: no brackets, lower case, an IPv4-mapped IPv6 address as IPv4. */
export function normalizeAddress(address: string): string {
  const bare = address.replace(/^\[|\]$/g, "").toLowerCase();
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/.exec(bare);
  return mapped ? mapped[1] : bare;
}

/** Loopback, unspecified or link-local: reachable only from this host (or its link). */
export function isLocalOnly(address: string): boolean {
  const a = normalizeAddress(address);
  const family = isIP(a);
  if (family === 0) return a === "localhost" || a.endsWith(".localhost");
  return LOCAL_ONLY.check(a, family === 4 ? "ipv4" : "ipv6");
}

const isUnspecified = (a: string): boolean => a === "0.0.0.0" || a === "::";

/** The management API's listeners in this process ("address|port", with a count for repeats). */
const listeners = new Map<string, number>();

/** Marks a listener of this process as never reachable by an outbound request; returns the undo. */
export function protectListener(address: string, port: number): () => void {
  const key = `${normalizeAddress(address)}|${port}`;
  listeners.set(key, (listeners.get(key) ?? 0) + 1);
  let done = false;
  return () => {
    if (done) return;
    done = true;
    const n = (listeners.get(key) ?? 1) - 1;
    if (n <= 0) listeners.delete(key);
    else listeners.set(key, n);
  };
}

/** Addresses of this host's interfaces (a listener on 0.0.0.0 or :: answers on every one). */
function hostAddresses(): Set<string> {
  const out = new Set<string>();
  for (const list of Object.values(networkInterfaces())) for (const i of list ?? []) out.add(normalizeAddress(i.address));
  return out;
}

/** `address:port` reaches a protected listener of this process. */
export function isOwnListener(address: string, port: number): boolean {
  const a = normalizeAddress(address);
  for (const key of listeners.keys()) {
    const at = key.lastIndexOf("|");
    if (Number(key.slice(at + 1)) !== port) continue;
    const bound = key.slice(0, at);
    if (bound === a) return true;
    if (isUnspecified(bound) && (isLocalOnly(a) || hostAddresses().has(a))) return true;
  }
  return false;
}

/** One request's judge: the first hop (the configured URL) sets what its redirects may reach. */
export class HopGuard {
  private readonly firstAddresses = new Set<string>();
  private firstPort = -1;

  /** Null when `hop` may connect to `address:port`; otherwise why not. */
  judge(address: string, port: number, hop: number): string | null {
    const a = normalizeAddress(address);
    if (isOwnListener(a, port)) return `${show(a, port)} is this program's own management API; outbound requests never go there`;
    if (hop === 0) {
      this.firstAddresses.add(a);
      this.firstPort = port;
      return null;
    }
    if (isLocalOnly(a) && !(port === this.firstPort && this.firstAddresses.has(a))) {
      return `a redirect to the local address ${show(a, port)}, other than the configured URL's, is refused`;
    }
    return null;
  }
}

const show = (a: string, port: number): string => (a.includes(":") ? `[${a}]:${port}` : `${a}:${port}`);

/** dns.lookup (or the outbound profile's resolver), with every address it gives judged before anything connects to it. */
export function guardedLookup(judge: (address: string) => string | null, refused: (why: string) => void, base: LookupFunction = dnsLookup): LookupFunction {
  return (hostname, options, callback) => {
    base(hostname, { ...options, all: true }, (err, found) => {
      if (err) return callback(err, "", 0);
      const addresses: LookupAddress[] = typeof found === "string" ? [{ address: found, family: isIP(found) }] : found;
      for (const a of addresses) {
        const why = judge(a.address);
        if (why !== null) {
          refused(why);
          return callback(Object.assign(new Error(why), { code: "EREFUSED_BY_POLICY" }), "", 0);
        }
      }
      if (options.all) return callback(null, addresses);
      const first = addresses[0];
      if (!first) return callback(Object.assign(new Error(`no address for ${hostname}`), { code: "ENOTFOUND" }), "", 0);
      callback(null, first.address, first.family);
    });
  };
}
