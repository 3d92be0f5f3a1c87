// A stored record as the API shows it: request and response decoded from their wire bytes into the
// fields of the spec's "Query recorder record" (IANA mnemonics, RR objects shared with the cache
// routes), and its execution path. Runs in the worker threads only (writer for the stream, readers
// for the routes).

import { className, EDNS_OPTION, FLAG, opcodeName, rcodeName, typeName } from "../../../dns/constants.js";
import { decodeEcs } from "../../../dns/ecs.js";
import { formatIP } from "../../../dns/ip.js";
import { decodeMessage, type Edns, type EdnsOption, type Message, type ResourceRecord } from "../../../dns/message.js";
import { rrJson, type RrJson } from "../../../dns/rr-json.js";
import { KIND_NAMES, OUTCOME_NAMES } from "./batch.js";
import { OUTCOME_ERROR, OUTCOME_NO_RESPONSE } from "./schema.js";

/** A row of records_v2 with its texts resolved. */
export interface RawRecord {
  id: number;
  createdAtMs: number;
  elapsedUs: number;
  clientIp: string;
  /** The client's name when the `clients` provider knew one (schema 4; null before). */
  clientName: string | null;
  /** The client's groups, in the provider's order. */
  clientGroups: readonly string[];
  /** The Sluice instance that recorded it. */
  instance: string;
  outcome: number;
  error: string | null;
  query: Buffer;
  response: Buffer | null;
}

/** A row of steps_v2 with its tags resolved. */
export interface RawStep {
  sequenceTag: string;
  nodeIndex: number | null;
  kind: number;
  tag: string;
  outcome: number;
}

export interface StepJson {
  event_index: number;
  sequence_tag: string;
  node_index: number | null;
  kind: string;
  tag: string;
  outcome: string;
}

const OPTION_NAMES = new Map<number, string>(Object.entries(EDNS_OPTION).map(([k, v]) => [v, k]));
const TSIG = 250;
const SIG = 24;

/** rcode text of an outcome code: the mnemonic, or the buckets of records without a response. */
export function outcomeKey(outcome: number): string {
  if (outcome === OUTCOME_ERROR) return "_ERROR";
  if (outcome === OUTCOME_NO_RESPONSE) return "_NO_RESPONSE";
  return rcodeName(outcome);
}

function optionJson(o: EdnsOption): { code: number; name: string; payload_kind: string; payload: Record<string, unknown> } {
  const name = OPTION_NAMES.get(o.code) ?? `OPTION${o.code}`;
  const d = o.data;
  const base = { code: o.code, name };
  switch (o.code) {
    case EDNS_OPTION.ECS: {
      const s = decodeEcs(d);
      if (s) return { ...base, payload_kind: "ecs", payload: { family: s.family, source_prefix: s.sourcePrefix, scope_prefix: s.scopePrefix, address: formatIP(s.address) } };
      break;
    }
    case EDNS_OPTION.COOKIE:
      return { ...base, payload_kind: "cookie", payload: { client: d.subarray(0, 8).toString("hex"), server: d.subarray(8).toString("hex") } };
    case EDNS_OPTION.NSID:
      return { ...base, payload_kind: "nsid", payload: { hex: d.toString("hex"), text: d.toString("latin1") } };
    case EDNS_OPTION.EDE:
      if (d.length >= 2) return { ...base, payload_kind: "ede", payload: { info_code: d.readUInt16BE(0), extra_text: d.subarray(2).toString("utf8") } };
      break;
    case EDNS_OPTION.PADDING:
      return { ...base, payload_kind: "padding", payload: { length: d.length } };
    case EDNS_OPTION.TCP_KEEPALIVE:
      return { ...base, payload_kind: "tcp_keepalive", payload: d.length >= 2 ? { timeout_ms: d.readUInt16BE(0) * 100 } : {} };
  }
  return { ...base, payload_kind: "unknown", payload: { hex: d.toString("hex") } };
}

export function ednsJson(e: Edns | null): Record<string, unknown> | null {
  if (e === null) return null;
  return { udp_payload_size: e.udpSize, ext_rcode: e.extRcode, version: e.version, dnssec_ok: (e.flags & 0x8000) !== 0, z: e.flags & 0x7fff, options: e.options.map(optionJson) };
}

function decoded(wire: Buffer): Message | null {
  try {
    return decodeMessage(wire);
  } catch {
    return null;
  }
}

const isSignature = (rr: ResourceRecord): boolean => rr.type === TSIG || rr.type === SIG;
const header16 = (w: Buffer, at: number): number => (w.length >= at + 2 ? (w[at] << 8) | w[at + 1] : 0);

/** The fixed fields of a record. */
export function recordFields(r: RawRecord): Record<string, unknown> {
  const q = decoded(r.query);
  const qflags = header16(r.query, 2);
  const resp = r.outcome >= 0 && r.response !== null ? r.response : null;
  const m = resp ? decoded(resp) : null;
  const rflags = resp ? header16(resp, 2) : 0;
  const additionals = m ? m.additionals.filter((rr) => !isSignature(rr)) : [];
  const list = (rrs: ResourceRecord[] | undefined): RrJson[] => (rrs ?? []).map(rrJson);
  const flag = (bit: number): boolean | null => (resp ? (rflags & bit) !== 0 : null);
  return {
    id: r.id,
    created_at_ms: r.createdAtMs,
    elapsed_ms: Math.round(r.elapsedUs / 1000),
    elapsed_us: r.elapsedUs,
    request_id: header16(r.query, 0),
    client_ip: r.clientIp,
    client_name: r.clientName,
    client_groups: r.clientGroups,
    instance: r.instance,
    questions_json: (q?.questions ?? []).map((x) => ({ name: x.name === "" ? "." : `${x.name}.`, qtype: typeName(x.type), qclass: className(x.class) })),
    req_rd: (qflags & FLAG.RD) !== 0,
    req_cd: (qflags & FLAG.CD) !== 0,
    req_ad: (qflags & FLAG.AD) !== 0,
    req_opcode: opcodeName((qflags >> 11) & 0x0f),
    req_edns_json: ednsJson(q?.edns ?? null),
    error: r.error,
    has_response: resp !== null,
    rcode: resp ? rcodeName(r.outcome) : null,
    resp_aa: flag(FLAG.AA),
    resp_tc: flag(FLAG.TC),
    resp_ra: flag(FLAG.RA),
    resp_ad: flag(FLAG.AD),
    resp_cd: flag(FLAG.CD),
    // A response that no longer decodes still reports its header's counts.
    answer_count: m ? m.answers.length : resp ? header16(resp, 6) : 0,
    authority_count: m ? m.authorities.length : resp ? header16(resp, 8) : 0,
    additional_count: m ? additionals.length : resp ? header16(resp, 10) : 0,
    answers_json: list(m?.answers),
    authorities_json: list(m?.authorities),
    additionals_json: list(additionals),
    signature_json: list(m?.additionals.filter(isSignature)),
    resp_edns_json: ednsJson(m?.edns ?? null),
  };
}

export function stepsJson(steps: readonly RawStep[]): StepJson[] {
  return steps.map((s, i) => ({
    event_index: i,
    sequence_tag: s.sequenceTag,
    node_index: s.nodeIndex,
    kind: KIND_NAMES[s.kind] ?? `kind${s.kind}`,
    tag: s.tag,
    outcome: OUTCOME_NAMES[s.outcome] ?? `outcome${s.outcome}`,
  }));
}

/** The record object of GET records/<id> and of the stream: `{record: {...fields}, steps: [...]}`. */
export function recordDetail(r: RawRecord, steps: readonly RawStep[]): { record: Record<string, unknown>; steps: StepJson[] } {
  return { record: recordFields(r), steps: stepsJson(steps) };
}

/** One SSE frame of the record stream (the id lets a client resume with Last-Event-ID). */
export function recordFrame(r: RawRecord, steps: readonly RawStep[]): string {
  return `id: ${r.id}\nevent: record\ndata: ${JSON.stringify(recordDetail(r, steps))}\n\n`;
}
