// PROXY protocol v2 (the binary form a load balancer such as dnsdist sends with
// useProxyProtocol=true): a header before each UDP datagram, or at the start of a TCP connection,
// that names the client the balancer is speaking for. `proxy_protocol: {trusted: [CIDR...]}` on a
// server: from a trusted peer the header's source is the client; a header from any other peer is
// refused (datagram dropped, connection closed, counted); no header: the peer is the client.
// Parsing is bounded: the address block and TLVs must fit the declared length, which is capped;
// TLVs are checked for length and skipped. Nothing is allocated but the address text.

import type net from "node:net";
import { formatIP } from "../../dns/ip.js";
import type { IpPrefixSet} from "../../engine/rules/ip.js";
import { IpPrefixSetBuilder } from "../../engine/rules/ip.js";
import type { Cell, MetricsHub } from "../../observability/metrics.js";
import type { ArgProblem } from "../../registry/types.js";

/** The 12 bytes every v2 header starts with. */
export const PROXY_V2_SIGNATURE = Buffer.from([0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d, 0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a]);
/** Fixed part: signature, version/command, family/transport, length. */
export const PROXY_V2_FIXED = 16;
/** Longest header accepted (fixed part, IPv6 addresses, TLVs); dnsdist sends 28 or 52 bytes without TLVs. */
export const MAX_PROXY_HEADER = 16 + 512;

export interface ProxyArgs {
  trusted: string[];
}

export const proxyArgSchema = {
  type: "object",
  additionalProperties: false,
  required: ["trusted"],
  properties: { trusted: { type: "array", minItems: 1, items: { type: "string", minLength: 1 } } },
} as const;

export function checkProxyArgs(args: { proxy_protocol?: ProxyArgs }): ArgProblem[] {
  const problems: ArgProblem[] = [];
  args.proxy_protocol?.trusted.forEach((rule, i) => {
    try {
      new IpPrefixSetBuilder().add(rule);
    } catch (err) {
      problems.push({ path: ["proxy_protocol", "trusted", i], message: (err as Error).message });
    }
  });
  return problems;
}

export interface ProxyStats {
  /** Headers accepted from trusted peers. */
  accepted: Cell;
  /** Headers from peers not in `trusted`. */
  untrusted: Cell;
  /** Malformed headers (bad version, command, lengths) or too long. */
  invalid: Cell;
}

export function proxyStats(metrics: MetricsHub, tag: string, protocol: string): ProxyStats {
  const family = metrics.counter("server_proxy_header_total", "PROXY protocol v2 headers: accepted (trusted peer), untrusted (refused) or invalid (refused)", ["plugin_tag", "protocol", "result"]);
  return {
    accepted: family({ plugin_tag: tag, protocol, result: "accepted" }),
    untrusted: family({ plugin_tag: tag, protocol, result: "untrusted" }),
    invalid: family({ plugin_tag: tag, protocol, result: "invalid" }),
  };
}

/** `data` starts with the v2 signature (or, when shorter, with a prefix of it). */
export function startsWithSignature(data: Buffer, from = 0): boolean {
  const n = Math.min(data.length - from, 12);
  for (let i = 0; i < n; i++) if (data[from + i] !== PROXY_V2_SIGNATURE[i]) return false;
  return n > 0;
}

/** What parseHeader found: the header's length, or one of these. */
export const INCOMPLETE = -1;
export const INVALID = -2;

/** Where parseHeader puts the source: `local` when the header names none (LOCAL, UNSPEC, UNIX). */
export interface ProxySource {
  address: string;
  port: number;
  local: boolean;
}

/**
 * Parses a v2 header at the start of `data` (whose first 12 bytes are the signature) into `out`.
 * Returns the header length, INCOMPLETE when more bytes are needed, INVALID when it is malformed.
 */
export function parseHeader(data: Buffer, out: ProxySource): number {
  if (data.length < PROXY_V2_FIXED) return INCOMPLETE;
  const verCmd = data[12];
  if (verCmd >> 4 !== 2) return INVALID;
  const cmd = verCmd & 0x0f;
  if (cmd > 1) return INVALID;
  const len = (data[14] << 8) | data[15];
  const total = PROXY_V2_FIXED + len;
  if (total > MAX_PROXY_HEADER) return INVALID;
  if (data.length < total) return INCOMPLETE;
  const family = data[13] >> 4;
  const transport = data[13] & 0x0f;
  if (family > 3 || transport > 2) return INVALID;
  let tlvs = PROXY_V2_FIXED;
  out.local = true;
  if (family === 1) {
    if (len < 12) return INVALID;
    tlvs += 12;
    if (cmd === 1) {
      out.address = `${data[16]}.${data[17]}.${data[18]}.${data[19]}`;
      out.port = (data[24] << 8) | data[25];
      out.local = false;
    }
  } else if (family === 2) {
    if (len < 36) return INVALID;
    tlvs += 36;
    if (cmd === 1) {
      out.address = formatIP(data.subarray(16, 32));
      out.port = (data[48] << 8) | data[49];
      out.local = false;
    }
  } else if (family === 3) {
    if (len < 216) return INVALID;
    tlvs += 216;
  }
  // Type-length-value extensions: each must fit; none is used.
  while (tlvs < total) {
    if (tlvs + 3 > total) return INVALID;
    tlvs += 3 + ((data[tlvs + 1] << 8) | data[tlvs + 2]);
    if (tlvs > total) return INVALID;
  }
  return total;
}

/** A server's PROXY protocol settings: the trusted peers and the counters. */
export class ProxyPolicy {
  /** The client of the last `unwrap`: read right after the call (one datagram at a time). */
  readonly client: ProxySource = { address: "", port: 0, local: true };

  constructor(
    private readonly trusted: IpPrefixSet,
    readonly stats: ProxyStats,
  ) {}

  static from(args: ProxyArgs | undefined, stats: ProxyStats): ProxyPolicy | null {
    if (!args) return null;
    const b = new IpPrefixSetBuilder();
    for (const rule of args.trusted) b.add(rule);
    return new ProxyPolicy(b.build(), stats);
  }

  isTrusted(address: string): boolean {
    return this.trusted.containsText(address);
  }

  /**
   * A datagram from `peer`: where the DNS message starts (0 without a header), with the client in
   * `this.client`; -1 when it must be dropped (a header from an untrusted peer, or a bad header).
   */
  unwrap(data: Buffer, peerAddress: string, peerPort: number): number {
    const c = this.client;
    c.address = peerAddress;
    c.port = peerPort;
    if (data.length < 12 || data[0] !== 0x0d || !startsWithSignature(data)) return 0;
    if (!this.trusted.containsText(peerAddress)) {
      this.stats.untrusted.value++;
      return -1;
    }
    const n = parseHeader(data, c);
    if (n < 0) {
      this.stats.invalid.value++;
      return -1;
    }
    if (c.local) {
      c.address = peerAddress;
      c.port = peerPort;
    }
    this.stats.accepted.value++;
    return n;
  }
}

export interface StreamPeer {
  address: string;
  port: number;
}

/**
 * Reads a PROXY header at the start of a connection, if there is one: `done(client)` with the
 * client (the peer when there is no header) and the bytes after the header put back in the socket,
 * or `done(null)` once the connection has been closed for a refused or unfinished header.
 */
export function readStreamHeader(socket: net.Socket, policy: ProxyPolicy, timeoutMs: number, done: (client: StreamPeer | null) => void): void {
  const peer = { address: socket.remoteAddress ?? "", port: socket.remotePort ?? 0 };
  let seen: Buffer = Buffer.alloc(0);
  let finished = false;
  const finish = (client: StreamPeer | null, rest: Buffer | null): void => {
    if (finished) return;
    finished = true;
    clearTimeout(timer);
    socket.off("data", onData);
    socket.off("close", onGone);
    socket.off("error", onGone);
    if (client === null) {
      socket.destroy();
      done(null);
      return;
    }
    socket.pause();
    if (rest !== null && rest.length > 0) socket.unshift(rest);
    done(client);
  };
  const onData = (chunk: Buffer): void => {
    seen = seen.length === 0 ? chunk : Buffer.concat([seen, chunk]);
    if (!startsWithSignature(seen)) return finish(peer, seen);
    if (seen.length < 12) return;
    if (!policy.isTrusted(peer.address)) {
      policy.stats.untrusted.value++;
      return finish(null, null);
    }
    const source: ProxySource = { address: "", port: 0, local: true };
    const n = parseHeader(seen, source);
    if (n === INCOMPLETE) return;
    if (n === INVALID) {
      policy.stats.invalid.value++;
      return finish(null, null);
    }
    policy.stats.accepted.value++;
    finish(source.local ? peer : { address: source.address, port: source.port }, seen.subarray(n));
  };
  const onGone = (): void => finish(null, null);
  // A header not complete in time holds a connection for nothing: like an unfinished frame.
  const timer = setTimeout(() => {
    if (seen.length > 0) policy.stats.invalid.value++;
    finish(null, null);
  }, timeoutMs);
  timer.unref();
  socket.on("data", onData);
  socket.once("close", onGone);
  socket.on("error", onGone);
}
