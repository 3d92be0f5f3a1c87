// Turns a hostname upstream into an IP: through a plain DNS `bootstrap` server (cached for the
// record's TTL, at least a minute) or, without one, through the system resolver (cached a minute).
// An expired address keeps serving while one refresh runs, so queries never wait on a refresh
// unless there is no address at all yet.

import { lookup } from "node:dns/promises";
import { QTYPE, RCODE, rcodeName } from "../../dns/constants.js";
import { formatIP } from "../../dns/ip.js";
import { decodeMessage, encodeMessage, messageRcode } from "../../dns/message.js";
import { normalizeName } from "../../dns/name.js";
import { rdataName } from "../../dns/rdata.js";
import { hostPort, type BootstrapAddress } from "./address.js";
import { Ticket, UpstreamError } from "./exchange.js";
import { UdpTransport } from "./udp.js";

export const MIN_ADDRESS_TTL_MS = 60_000;
/** After a failed refresh, how long the stale address is kept before trying again. */
const RETRY_AFTER_FAILURE_MS = 10_000;

export interface Resolved {
  ip: string;
  ttlMs: number;
}

export interface Resolver {
  /** The address to use now, or null when the caller must wait for `resolve()`. */
  current(): string | null;
  resolve(): Promise<string>;
  close(): void;
}

/** An IP upstream needs no resolution. */
export class StaticResolver implements Resolver {
  constructor(private readonly ip: string) {}
  current(): string {
    return this.ip;
  }
  resolve(): Promise<string> {
    return Promise.resolve(this.ip);
  }
  close(): void {}
}

/** Caching and single-flight refresh around a lookup function. */
export class CachingResolver implements Resolver {
  private ip: string | null = null;
  private expiresAt = 0;
  private inflight: Promise<string> | null = null;

  constructor(
    private readonly lookupOnce: () => Promise<Resolved>,
    private readonly onClose: () => void = () => undefined,
  ) {}

  current(): string | null {
    if (this.ip === null) return null;
    if (performance.now() >= this.expiresAt) void this.resolve().catch(() => undefined);
    return this.ip;
  }

  resolve(): Promise<string> {
    if (this.inflight) return this.inflight;
    if (this.ip !== null && performance.now() < this.expiresAt) return Promise.resolve(this.ip);
    this.inflight = this.lookupOnce().then(
      (r) => {
        this.inflight = null;
        this.ip = r.ip;
        this.expiresAt = performance.now() + r.ttlMs;
        return r.ip;
      },
      (err: unknown) => {
        this.inflight = null;
        // Keep serving the stale address for a while rather than failing every query.
        if (this.ip !== null) {
          this.expiresAt = performance.now() + RETRY_AFTER_FAILURE_MS;
          return this.ip;
        }
        throw err instanceof Error ? err : new Error(String(err));
      },
    );
    return this.inflight;
  }

  close(): void {
    this.onClose();
  }
}

function addressQuery(host: string, qtype: number): Buffer {
  return encodeMessage({
    id: 0,
    flags: 0x0100,
    questions: [{ name: host, type: qtype, class: 1 }],
    answers: [],
    authorities: [],
    additionals: [],
    edns: null,
  });
}

/**
 * Every A (family 4) or AAAA (family 6) address of `host` that `transport` (towards one DNS server)
 * answers, following the CNAME chain the server gave; the TTL is the smallest of the records'.
 */
export async function queryAddresses(transport: UdpTransport, host: string, family: 4 | 6, timeoutMs: number): Promise<{ ips: string[]; ttlMs: number }> {
  const qtype = family === 6 ? QTYPE.AAAA : QTYPE.A;
  const where = `bootstrap ${hostPort(transport.host, transport.port)}`;
  const ticket = new Ticket(timeoutMs, () => new UpstreamError(`${where}: no answer for ${host} within ${timeoutMs}ms`, "timeout"));
  try {
    const answer = await transport.exchange(addressQuery(host, qtype), ticket);
    const msg = decodeMessage(answer.toWire());
    const rcode = messageRcode(msg);
    if (rcode !== RCODE.NOERROR) throw new UpstreamError(`${where}: ${host} ${family === 6 ? "AAAA" : "A"} answered ${rcodeName(rcode)}`);
    const names = new Set([normalizeName(host)]);
    for (const rr of msg.answers) if (rr.type === QTYPE.CNAME && names.has(normalizeName(rr.name))) names.add(normalizeName(rdataName(rr.data)));
    const records = msg.answers.filter((rr) => rr.type === qtype && names.has(normalizeName(rr.name)));
    if (records.length === 0) throw new UpstreamError(`${where}: no ${family === 6 ? "AAAA" : "A"} record for ${host}`);
    return { ips: records.map((r) => formatIP(r.data)), ttlMs: Math.min(...records.map((r) => r.ttl)) * 1000 };
  } finally {
    ticket.finish();
  }
}

/**
 * Resolves `host` with an A (family 4) or AAAA (family 6) query to the first of `servers` that
 * answers (each asked in turn after the one before failed), from `bind` when set.
 */
export function bootstrapLookup(
  host: string,
  family: 4 | 6,
  servers: readonly BootstrapAddress[],
  timeoutMs: number,
  minTtlMs = MIN_ADDRESS_TTL_MS,
  bind: string | null = null,
): { lookup: () => Promise<Resolved>; close: () => void } {
  const transports = servers.map((server) => new UdpTransport(server.host, server.port, server.family, bind));
  const lookupOnce = async (): Promise<Resolved> => {
    const failures: string[] = [];
    for (const transport of transports) {
      try {
        const r = await queryAddresses(transport, host, family, timeoutMs);
        return { ip: r.ips[0], ttlMs: Math.max(r.ttlMs, minTtlMs) };
      } catch (err) {
        failures.push((err as Error).message);
      }
    }
    throw new UpstreamError(failures.join("; "));
  };
  return {
    lookup: lookupOnce,
    close: () => {
      for (const t of transports) t.close(new UpstreamError(`bootstrap ${hostPort(t.host, t.port)}: closed`));
    },
  };
}

/** The system resolver (getaddrinfo), limited to one family. */
export function systemLookup(host: string, family: 4 | 6, minTtlMs = MIN_ADDRESS_TTL_MS): () => Promise<Resolved> {
  return async () => {
    try {
      const r = await lookup(host, { family });
      return { ip: r.address, ttlMs: minTtlMs };
    } catch (err) {
      throw new UpstreamError(`cannot resolve ${host} (IPv${family}): ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
    }
  };
}

export function bootstrapResolver(host: string, family: 4 | 6, servers: readonly BootstrapAddress[], timeoutMs: number, minTtlMs?: number, bind: string | null = null): Resolver {
  const b = bootstrapLookup(host, family, servers, timeoutMs, minTtlMs, bind);
  return new CachingResolver(b.lookup, b.close);
}
