// From request bytes to answer bytes, shared by the UDP and TCP servers.
//  - unreadable header or a response packet: dropped (no reply, no reflection)
//  - over MAX_QUERY_BYTES or MAX_EDNS_OPTIONS: header-only FORMERR, the rest left unparsed
//  - malformed body: FORMERR; opcode other than QUERY: NOTIMP; not exactly one question: FORMERR
//  - EDNS version above 0: BADVERS (RFC 6891)
//  - executor error: SERVFAIL; no response produced: empty NOERROR

import { FLAG, RCODE } from "../../dns/constants.js";
import { encodeMessage, replyTo } from "../../dns/message.js";
import { decodeQuery, emptyDecodedQuery, MAX_QUERY_BYTES, type DecodedQuery } from "../../dns/query.js";
import type { DnsResponse } from "../../dns/response.js";
import { fitUdp, setId, udpLimit } from "../../dns/view.js";
import type { ClientDirectory } from "../../engine/clients.js";
import { DnsContext, type Protocol } from "../../engine/context.js";
import { isPromise, Step, type Executor } from "../../engine/types.js";
import { DNS_DURATION_BUCKETS, type Cell, type MetricsHub, type Observer } from "../../observability/metrics.js";
import { failureReason, type FailureLog } from "./failure-log.js";

export interface ServerStats {
  requests: Cell;
  completed: Cell;
  controlled: Cell;
  failed: Cell;
  dropped: Cell;
  inflight: Cell;
  duration: Observer;
}

export function serverStats(metrics: MetricsHub, tag: string, protocol: Protocol): ServerStats {
  const labels = { plugin_tag: tag, protocol };
  const names = ["plugin_tag", "protocol"] as const;
  return {
    requests: metrics.counter("server_request_total", "DNS requests received", names)(labels),
    completed: metrics.counter("server_completed_total", "Requests whose pipeline ran to the end", names)(labels),
    controlled: metrics.counter("server_controlled_total", "Requests ended early by accept/reject/return or short_circuit", names)(labels),
    failed: metrics.counter("server_failed_total", "Requests answered SERVFAIL because an executor failed", names)(labels),
    dropped: metrics.counter("server_malformed_total", "Packets dropped or answered FORMERR/NOTIMP/BADVERS before the pipeline", names)(labels),
    inflight: metrics.gauge("server_inflight", "Requests being processed", names)(labels),
    duration: metrics.histogram("server_request_duration_seconds", "Processing time of answered requests, seconds", names, DNS_DURATION_BUCKETS)(labels),
  };
}

/** Header-only reply (used when the body cannot be decoded). */
function headerReply(raw: Buffer, rcode: number): Buffer {
  const out = Buffer.alloc(12);
  out[0] = raw[0];
  out[1] = raw[1];
  const flags = FLAG.QR | (((raw[2] << 8) | raw[3]) & (0x7800 | FLAG.RD)) | rcode;
  out.writeUInt16BE(flags, 2);
  return out;
}

export type Answer = Buffer | null;

export class QueryHandler {
  /** This handler's own count; the gauge is shared with a successor built by a reload. */
  private pending = 0;
  /** Reused by every query: its fields are read before anything can await. */
  private readonly decoded: DecodedQuery = emptyDecodedQuery();
  /** The runtime's `clients` provider, set when the server starts (null: none declared). */
  clients: ClientDirectory | null = null;

  /** `maxUdpSize` caps UDP answers whatever size the client advertises (ignored over TCP). */
  constructor(
    private readonly entry: Executor,
    private readonly protocol: Protocol,
    private readonly stats: ServerStats,
    private readonly failures: FailureLog,
    private readonly maxUdpSize: number,
  ) {}

  /** Requests accepted but not yet answered. */
  get inflight(): number {
    return this.pending;
  }

  /** `clientId`: a DoH path's client id; `tlsServerName`: a DoT client's SNI (both lower-case, for the `clients` provider). */
  handle(raw: Buffer, clientIp: string, clientPort: number, clientId: string | null = null, tlsServerName: string | null = null): Answer | Promise<Answer> {
    if (raw.length < 12 || (raw[2] & 0x80) !== 0) return null;
    // Checked here as well as in the decoder: no exception to build for an oversized packet.
    if (raw.length > MAX_QUERY_BYTES) {
      this.stats.dropped.value++;
      return headerReply(raw, RCODE.FORMERR);
    }
    const decoded = this.decoded;
    try {
      decodeQuery(raw, decoded);
    } catch {
      this.stats.dropped.value++;
      return headerReply(raw, RCODE.FORMERR);
    }
    const query = decoded.message;
    const opcode = (query.flags >> 11) & 0x0f;
    if (opcode !== 0 || query.questions.length !== 1 || (query.edns !== null && query.edns.version !== 0)) {
      this.stats.dropped.value++;
      const rcode = opcode !== 0 ? RCODE.NOTIMP : query.questions.length !== 1 ? RCODE.FORMERR : RCODE.BADVERS;
      const reply = replyTo(query, rcode);
      // Echoing many questions lets a small query (pointers into label interiors) grow past 64 KiB.
      if (query.questions.length !== 1) reply.questions = [];
      return encodeMessage(reply);
    }
    const limit = this.protocol === "udp" ? udpLimit(query.edns ? query.edns.udpSize : null, this.maxUdpSize) : 0xffff;
    this.stats.requests.value++;
    this.stats.inflight.value++;
    this.pending++;
    const ctx = new DnsContext(query, raw, clientIp, clientPort, this.protocol, decoded.qname, decoded.questionEnd, clientId, tlsServerName);
    let result;
    try {
      if (this.clients !== null) ctx.client = this.clients.identify(ctx);
      result = this.entry.execute(ctx, null);
    } catch (err) {
      return this.failed(ctx, err, limit);
    }
    if (isPromise(result)) return this.settle(result, ctx, limit);
    return this.finish(ctx, result, limit);
  }

  // Apart from handle(): closures here would make every call of handle() allocate their scope, answered at once or not.
  private settle(result: Promise<Step>, ctx: DnsContext, limit: number): Promise<Answer> {
    return result.then(
      (step) => this.finish(ctx, step, limit),
      (err: unknown) => this.failed(ctx, err, limit),
    );
  }

  /**
   * A stream frame longer than MAX_QUERY_BYTES, of which only the header was kept: header-only
   * FORMERR, like an undecodable query (a response packet is still dropped).
   */
  tooLarge(header: Buffer): Answer {
    if (header.length < 12 || (header[2] & 0x80) !== 0) return null;
    this.stats.dropped.value++;
    return headerReply(header, RCODE.FORMERR);
  }

  private done(ctx: DnsContext): void {
    const s = this.stats;
    this.pending--;
    s.inflight.value--;
    s.duration.observe((performance.now() - ctx.startedAt) / 1000);
  }

  private finish(ctx: DnsContext, step: Step, limit: number): Answer {
    this.done(ctx);
    let wire: Buffer;
    try {
      if (ctx.response === null) ctx.reply(RCODE.NOERROR);
      wire = (ctx.response as DnsResponse).toWire();
      setId(wire, ctx.query.id);
      // fitUdp indexes the message, which throws on a structurally broken response: same handling.
      if (this.protocol === "udp") wire = fitUdp(wire, limit);
    } catch (err) {
      // A response we cannot encode is an executor failure as far as the client is concerned.
      this.stats.failed.value++;
      this.failures.record("encode", ctx.qname, ctx.qtype, err);
      return this.servfail(ctx, limit);
    }
    // Counted once the answer exists: an encode failure above counts as failed, never as both.
    if (step === Step.Next) this.stats.completed.value++;
    else this.stats.controlled.value++;
    return wire;
  }

  private failed(ctx: DnsContext, err: unknown, limit: number): Answer {
    this.done(ctx);
    this.stats.failed.value++;
    this.failures.record(failureReason(err), ctx.qname, ctx.qtype, err);
    return this.servfail(ctx, limit);
  }

  private servfail(ctx: DnsContext, limit: number): Answer {
    ctx.reply(RCODE.SERVFAIL);
    const wire = (ctx.response as DnsResponse).toWire();
    return this.protocol === "udp" ? fitUdp(wire, limit) : wire;
  }

  /** Resolves once every accepted request has been answered (or `timeoutMs` passed). */
  async drain(timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (this.pending > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
  }
}
