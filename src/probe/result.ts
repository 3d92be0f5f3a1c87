// What `sluice probe upstream` reports for one protocol of one upstream, and the pieces every protocol's
// probe shares: the query, the answer's summary, times, and failures put in words.

import { rcodeName } from "../dns/constants.js";
import { decodeMessage, messageRcode } from "../dns/message.js";
import type { DnsResponse } from "../dns/response.js";
import { tlsFailure, tlsClientSetup, type TlsClientSetup } from "../engine/upstream/tls-client.js";

export type ProbeProtocol = "udp" | "tcp" | "tls" | "https";

/** One protocol at one address. */
export interface ProbeTarget {
  protocol: ProbeProtocol;
  /** As printed: `udp://127.0.0.1:5353`, `https://dns.example/dns-query`. */
  url: string;
  /** The host as given (a name or an IP): TLS verifies the certificate against it. */
  host: string;
  port: number;
  /** https: the request path. */
  path: string;
}

export interface ProbeSettings {
  /** The query in wire form; each probe sends copies with its own IDs. */
  query: Buffer;
  timeoutMs: number;
  ca: Buffer | undefined;
  insecure: boolean;
}

export interface Pipelining {
  /** Both queries sent back to back on one connection were answered. */
  works: boolean;
  /** The answers came in the order the queries went (null when not both came). */
  in_order: boolean | null;
  detail: string;
}

export interface ProbeResult {
  protocol: ProbeProtocol;
  url: string;
  /** The IP and port connected to (null when the host name did not resolve). */
  address: string | null;
  answered: boolean;
  /** Why there is no answer (or what failed after it): null when all went well. */
  error: string | null;
  rcode: string | null;
  answer_records: number | null;
  truncated: boolean | null;
  /** The UDP payload size the upstream's OPT record advertises; null when its answer had no OPT. */
  edns_udp_size: number | null;
  connect_ms: number | null;
  tls_handshake_ms: number | null;
  tls_version: string | null;
  alpn: string | null;
  response_ms: number | null;
  pipelining: Pipelining | null;
}

export function emptyResult(target: ProbeTarget, address: string | null): ProbeResult {
  return {
    protocol: target.protocol,
    url: target.url,
    address,
    answered: false,
    error: null,
    rcode: null,
    answer_records: null,
    truncated: null,
    edns_udp_size: null,
    connect_ms: null,
    tls_handshake_ms: null,
    tls_version: null,
    alpn: null,
    response_ms: null,
    pipelining: null,
  };
}

/** Fills the answer's fields of `result`. */
export function noteAnswer(result: ProbeResult, answer: DnsResponse, ms: number): void {
  const m = decodeMessage(answer.toWire());
  result.answered = true;
  result.response_ms = round(ms);
  result.rcode = rcodeName(messageRcode(m));
  result.answer_records = m.answers.length;
  result.truncated = answer.truncated;
  result.edns_udp_size = m.edns?.udpSize ?? null;
}

/** Milliseconds with 0.1 ms precision. */
export const round = (ms: number): number => Math.round(ms * 10) / 10;

export const since = (t0: number): number => performance.now() - t0;

export function tlsSetup(target: ProbeTarget, settings: ProbeSettings): TlsClientSetup {
  return tlsClientSetup(target.host, settings.ca, settings.insecure);
}

const ERRNO_WORDS: Record<string, string> = {
  ECONNREFUSED: "connection refused",
  ECONNRESET: "connection reset by the upstream",
  EHOSTUNREACH: "host unreachable",
  ENETUNREACH: "network unreachable",
  EADDRNOTAVAIL: "address not available",
  EPIPE: "connection closed by the upstream",
};

/** A failure in words an operator can act on. */
export function failureText(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  const code = (err as NodeJS.ErrnoException).code;
  if (code !== undefined && ERRNO_WORDS[code] !== undefined) return ERRNO_WORDS[code];
  return tlsFailure(err);
}

/** A promise that rejects with `message` after `ms`, and a way to stop it. */
export function deadline(ms: number, message: string): { expired: Promise<never>; cancel(): void } {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(message)), ms);
  });
  // Nobody may be waiting on it when it fires.
  expired.catch(() => undefined);
  return { expired, cancel: () => clearTimeout(timer) };
}

/** `2s`, `500ms`, `1.5s`: a timeout as a message says it. */
export function shownMs(ms: number): string {
  return ms % 1000 === 0 ? `${ms / 1000}s` : `${ms}ms`;
}
