// An outbound profile made usable (src/net/outbound.ts): its `resolver` answers host names with A
// and AAAA queries sent from the profile's `bind` address, each lookup on a socket of its own that
// is closed afterwards (nothing to close with the profile), the answers cached for their TTL.

import { DIRECT, Outbound, type NameLookup, type OutboundSettings, type ResolvedAddress } from "../../net/outbound.js";
import { parseBootstrap, type BootstrapAddress } from "./address.js";
import { MIN_ADDRESS_TTL_MS, queryAddresses } from "./bootstrap.js";
import { UpstreamError } from "./exchange.js";
import { UdpTransport } from "./udp.js";

/** Time one resolver query may take. */
export const RESOLVER_TIMEOUT_MS = 5_000;
/** Names remembered per profile; the oldest goes first. */
const MAX_CACHED_NAMES = 256;
const MAX_ADDRESS_TTL_MS = 3_600_000;

/** A NameLookup through the DNS server `server`, from `bind`, with a small TTL cache. */
export function resolverLookup(server: BootstrapAddress, bind: string | null, timeoutMs = RESOLVER_TIMEOUT_MS): NameLookup {
  const cache = new Map<string, { addresses: ResolvedAddress[]; expiresAt: number }>();
  const ask = async (host: string, family: 4 | 6): Promise<{ addresses: ResolvedAddress[]; ttlMs: number }> => {
    const transport = new UdpTransport(server.host, server.port, server.family, bind);
    try {
      const r = await queryAddresses(transport, host, family, timeoutMs);
      return { addresses: r.ips.map((address) => ({ address, family })), ttlMs: r.ttlMs };
    } finally {
      transport.close(new UpstreamError("lookup over"));
    }
  };
  return async (host, family) => {
    const key = `${family}|${host.toLowerCase()}`;
    const hit = cache.get(key);
    if (hit && performance.now() < hit.expiresAt) return hit.addresses;
    let r: { addresses: ResolvedAddress[]; ttlMs: number };
    if (family !== 0) r = await ask(host, family);
    else {
      // Either family: IPv4 first, IPv6 when the name has no IPv4 address.
      try {
        r = await ask(host, 4);
      } catch (err) {
        try {
          r = await ask(host, 6);
        } catch {
          throw err;
        }
      }
    }
    cache.delete(key);
    if (cache.size >= MAX_CACHED_NAMES) cache.delete(cache.keys().next().value as string);
    cache.set(key, { addresses: r.addresses, expiresAt: performance.now() + Math.min(Math.max(r.ttlMs, MIN_ADDRESS_TTL_MS), MAX_ADDRESS_TTL_MS) });
    return r.addresses;
  };
}

/** The Outbound for a profile's settings (DIRECT when there are none). */
export function openOutbound(settings: OutboundSettings | null): Outbound {
  if (settings === null) return DIRECT;
  const lookup = settings.resolver === null ? undefined : resolverLookup(parseBootstrap(settings.resolver), settings.bind);
  return new Outbound(settings, lookup);
}
