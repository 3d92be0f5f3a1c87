// The state of one query as it moves through a pipeline.

import type { Message } from "../dns/message.js";
import { FLAG, QCLASS, QTYPE } from "../dns/constants.js";
import type { ClientIdentity } from "./clients.js";
import { parseIP, unmapIPv4 } from "../dns/ip.js";
import { normalizeName } from "../dns/name.js";
import { buildReply, type RecordBlock } from "../dns/reply.js";
import { DnsResponse } from "../dns/response.js";

export type Protocol = "udp" | "tcp" | "dot" | "doh" | "internal";

/** One execution-path event (collected only when a consumer such as the query recorder asks). */
export interface PathEvent {
  sequenceTag: string;
  nodeIndex: number | null;
  kind: "matcher" | "executor" | "builtin";
  tag: string;
  outcome: "matched" | "not_matched" | "entered" | "next" | "stop" | "return" | "error";
}

export class DnsContext {
  /** The request. Plugins that change it call `queryChanged()` so the cached wire form is dropped. */
  query: Message;
  /** Wire form of `query` as received, reused when forwarding an unchanged query. */
  queryWire: Buffer | null;
  /** Where the question section ends in `queryWire` (replies copy it from there). */
  questionEnd: number;
  response: DnsResponse | null = null;
  readonly clientIp: string;
  readonly clientPort: number;
  readonly protocol: Protocol;
  /** The client id a DoH client put in the path (`/dns-query/<id>`), lower-case; null when none. */
  readonly clientId: string | null;
  /** The TLS server name (SNI) a DoT client asked for, lower-case; null when none (or not DoT). */
  readonly tlsServerName: string | null;
  /** Who asked, as the runtime's `clients` provider identified it before the sequence; null when there is none or it knows nothing. */
  client: ClientIdentity | null = null;
  /** Lower-case first question name without trailing dot ("" when there is no question). */
  qname: string;
  /** u32 marks set by `mark`, without duplicates; null until the first mark (a query has a few). */
  marks: number[] | null = null;
  /** Typed attributes set by background triggers (cron) and read by templates. */
  attrs: Map<string, string | number> | null = null;
  /** Execution path; null unless recording was enabled for this query. */
  path: PathEvent[] | null = null;
  /** Sequences running for this query, outermost first counted (bounded by MAX_CALL_DEPTH). */
  callDepth = 0;
  /** Set for background runs (cron jobs): aborted when the run is cancelled, so long executors can stop early. */
  signal: AbortSignal | null = null;
  /** Arrival time, ms on the monotonic clock. */
  readonly startedAt: number;
  private parsedClient: Uint8Array | null | undefined = undefined;

  /** `qname` and `questionEnd` come from the decoder when it already knows them. */
  constructor(query: Message, queryWire: Buffer | null, clientIp: string, clientPort: number, protocol: Protocol, qname?: string, questionEnd = -1, clientId: string | null = null, tlsServerName: string | null = null) {
    this.query = query;
    this.queryWire = queryWire;
    this.questionEnd = questionEnd;
    this.clientIp = clientIp;
    this.clientPort = clientPort;
    this.protocol = protocol;
    this.clientId = clientId;
    this.tlsServerName = tlsServerName;
    this.qname = qname ?? (query.questions.length > 0 ? normalizeName(query.questions[0].name) : "");
    this.startedAt = performance.now();
  }

  queryChanged(): void {
    this.queryWire = null;
    this.questionEnd = -1;
    this.qname = this.query.questions.length > 0 ? normalizeName(this.query.questions[0].name) : "";
  }

  /** Sets the response to a reply to this query: `rcode` plus prepared answer/authority blocks. */
  reply(rcode: number, answers?: RecordBlock, authority?: RecordBlock): void {
    this.response = DnsResponse.fromWire(buildReply(this.query, this.queryWire, this.questionEnd, rcode, answers, authority));
  }

  get qtype(): number {
    return this.query.questions.length > 0 ? this.query.questions[0].type : 0;
  }

  get qclass(): number {
    return this.query.questions.length > 0 ? this.query.questions[0].class : 0;
  }

  addMark(mark: number): void {
    if (this.marks === null) this.marks = [mark];
    else if (!this.marks.includes(mark)) this.marks.push(mark);
  }

  hasMark(mark: number): boolean {
    return this.marks !== null && this.marks.includes(mark);
  }

  /** The client address as 4 or 16 bytes (IPv4-mapped IPv6 unmapped, zone id dropped), parsed once. */
  get clientAddress(): Uint8Array | null {
    if (this.parsedClient === undefined) {
      const pct = this.clientIp.indexOf("%");
      const ip = parseIP(pct < 0 ? this.clientIp : this.clientIp.slice(0, pct));
      this.parsedClient = ip === null ? null : unmapIPv4(ip);
    }
    return this.parsedClient;
  }

  /** An independent copy for a branch that may run concurrently (fallback, refresh, probes). */
  copy(): DnsContext {
    const q = this.query;
    const query: Message = {
      id: q.id,
      flags: q.flags,
      questions: q.questions.map((x) => ({ ...x })),
      answers: q.answers.slice(),
      authorities: q.authorities.slice(),
      additionals: q.additionals.slice(),
      edns: q.edns ? { ...q.edns, options: q.edns.options.slice() } : null,
    };
    const c = new DnsContext(query, this.queryWire, this.clientIp, this.clientPort, this.protocol, this.qname, this.questionEnd, this.clientId, this.tlsServerName);
    c.client = this.client;
    c.response = this.response ? this.response.clone() : null;
    c.marks = this.marks ? this.marks.slice() : null;
    c.attrs = this.attrs ? new Map(this.attrs) : null;
    c.path = this.path ? [] : null;
    c.callDepth = this.callDepth;
    c.signal = this.signal;
    return c;
  }

  /** Takes over what a finished branch produced. */
  adopt(branch: DnsContext): void {
    this.response = branch.response;
    this.marks = branch.marks;
    if (this.path && branch.path) for (const e of branch.path) this.path.push(e);
  }
}

/**
 * A context for work that no client asked for (a cron job): one question `name` A IN from
 * 0.0.0.0 port 0 over the `internal` protocol, with the given attributes.
 */
export function syntheticContext(name: string, attrs: Map<string, string | number> | null = null): DnsContext {
  const query: Message = { id: 0, flags: FLAG.RD, questions: [{ name, type: QTYPE.A, class: QCLASS.IN }], answers: [], authorities: [], additionals: [], edns: null };
  const ctx = new DnsContext(query, null, "0.0.0.0", 0, "internal");
  ctx.attrs = attrs;
  return ctx;
}
