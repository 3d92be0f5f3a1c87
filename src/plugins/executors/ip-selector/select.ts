// Reading an answer's addresses without decoding it, ranking them by score, and writing the answer
// again with its address records in the chosen order (or only the first N of them). Other records keep
// their places; the address records take the place of the first one.

import { QTYPE } from "../../../dns/constants.js";
import { formatIP } from "../../../dns/ip.js";
import type { Message } from "../../../dns/message.js";
import { DnsResponse } from "../../../dns/response.js";
import { SECTION_ANSWER } from "../../../dns/view.js";
import type { Score } from "./scores.js";

export interface Candidate {
  address: string;
  /** Position among the answer records (the decoded message's `answers` index). */
  position: number;
}

export interface AnswerAddresses {
  candidates: Candidate[];
  /** An RRSIG in the answer covers the queried type: removing records would break it. */
  signed: boolean;
}

/** The answer's records of `qtype` (A or AAAA, class IN), read from the wire index. Throws on a malformed message. */
export function answerAddresses(resp: DnsResponse, qtype: number): AnswerAddresses {
  const wire = resp.toWire();
  const candidates: Candidate[] = [];
  let signed = false;
  let position = 0;
  for (const r of resp.index.records) {
    if (r.section !== SECTION_ANSWER) continue;
    const at = r.fixed;
    if (r.type === qtype && wire.readUInt16BE(at + 2) === 1) {
      candidates.push({ address: formatIP(wire.subarray(at + 10, r.end)), position });
    } else if (r.type === QTYPE.RRSIG && r.end - at >= 12 && wire.readUInt16BE(at + 10) === qtype) {
      signed = true;
    }
    position++;
  }
  return { candidates, signed };
}

/**
 * Candidate indexes in their new order: addresses that connected, fastest first; then those not
 * known yet; then those that failed (each group in answer order). null when none connected (fail-open).
 */
export function rank(scores: readonly (Score | undefined)[]): number[] | null {
  const ok: number[] = [];
  const unknown: number[] = [];
  const failed: number[] = [];
  scores.forEach((s, i) => (s === undefined ? unknown : s.ok ? ok : failed).push(i));
  if (ok.length === 0) return null;
  ok.sort((a, b) => (scores[a] as { ms: number }).ms - (scores[b] as { ms: number }).ms || a - b);
  return [...ok, ...unknown, ...failed];
}

/** The response with the candidates' records as `order` says (a subset drops the others); null when that changes nothing. */
export function rewrite(resp: DnsResponse, candidates: readonly Candidate[], order: readonly number[]): DnsResponse | null {
  if (order.length === candidates.length && order.every((c, i) => c === i)) return null;
  const m = resp.message;
  const positions = new Set(candidates.map((c) => c.position));
  const answers: Message["answers"] = [];
  let placed = false;
  m.answers.forEach((rr, i) => {
    if (!positions.has(i)) answers.push(rr);
    else if (!placed) {
      placed = true;
      for (const c of order) answers.push(m.answers[candidates[c].position]);
    }
  });
  // A fresh message: nothing of the original (which a cache may hold) is shared for later edits.
  return DnsResponse.fromMessage({
    id: m.id,
    flags: m.flags,
    questions: m.questions.map((q) => ({ ...q })),
    answers,
    authorities: m.authorities.slice(),
    additionals: m.additionals.slice(),
    edns: m.edns ? { ...m.edns, options: m.edns.options.slice() } : null,
  });
}
