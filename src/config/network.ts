// The `network` section: named egress profiles (network.outbound) that forward upstreams, downloads,
// the upgrade and http_request name with `outbound: <name>` (docs/operations.md#outbound-profiles).

import { isIP } from "node:net";
import { parseBootstrap } from "../engine/upstream/address.js";
import type { OutboundSettings } from "../net/outbound.js";
import { parseSocks5 } from "../net/socks5.js";

export interface OutboundProfileConfig {
  /** Local IP address outgoing connections and datagrams start from. */
  bind?: string;
  /** `socks5://[user:pass@]host:port`: TCP connections go through this proxy (which resolves names). */
  socks5?: string;
  /** `ip[:port]` of the DNS server that resolves host names (port 53 by default). */
  resolver?: string;
}

export interface NetworkConfig {
  outbound?: Record<string, OutboundProfileConfig>;
}

export const OUTBOUND_NAME = "^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$";

const nonEmpty = { type: "string", minLength: 1 } as const;

export const networkSchema = {
  type: "object",
  additionalProperties: false,
  properties: {
    outbound: {
      type: "object",
      additionalProperties: {
        type: "object",
        additionalProperties: false,
        properties: { bind: nonEmpty, socks5: nonEmpty, resolver: nonEmpty },
      },
    },
  },
} as const;

/** What the schema cannot say, each problem at its path under `network`. */
export function networkProblems(network: NetworkConfig | undefined): { path: (string | number)[]; message: string; key?: boolean }[] {
  const out: { path: (string | number)[]; message: string; key?: boolean }[] = [];
  for (const [name, p] of Object.entries(network?.outbound ?? {})) {
    const at = (field: string): (string | number)[] => ["outbound", name, field];
    if (!new RegExp(OUTBOUND_NAME).test(name)) out.push({ path: ["outbound", name], message: `network.outbound: '${name}' is not a usable profile name (letters, digits, '_', '.', '-'; up to 64)`, key: true });
    if (p.bind !== undefined && isIP(p.bind) === 0) out.push({ path: at("bind"), message: `network.outbound.${name}.bind must be a local IP address (no port), not '${p.bind}'` });
    if (p.socks5 !== undefined) {
      try {
        parseSocks5(p.socks5);
      } catch (err) {
        out.push({ path: at("socks5"), message: `network.outbound.${name}.socks5: ${(err as Error).message}` });
      }
    }
    if (p.resolver !== undefined) {
      try {
        parseBootstrap(p.resolver);
      } catch {
        out.push({ path: at("resolver"), message: `network.outbound.${name}.resolver must be a DNS server's ip[:port], not '${p.resolver}'` });
      }
    }
  }
  return out;
}

/** The profiles as the program uses them. */
export function outboundProfiles(network: NetworkConfig | undefined): Record<string, OutboundSettings> {
  const out: Record<string, OutboundSettings> = {};
  for (const [name, p] of Object.entries(network?.outbound ?? {})) out[name] = { name, bind: p.bind ?? null, socks5: p.socks5 ?? null, resolver: p.resolver ?? null };
  return out;
}

/** The message for a reference to a profile that is not there. */
export function unknownOutbound(name: string, profiles: Readonly<Record<string, unknown>>): string {
  const known = Object.keys(profiles);
  return `no outbound profile '${name}' in network.outbound (${known.length > 0 ? `profiles: ${known.join(", ")}` : "none is configured"})`;
}
