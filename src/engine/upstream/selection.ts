// The response selections of `forward` other than `fastest` (racing.ts, the default and its own
// code path): one engine asks upstreams in a given order, `wave` at once, starting the next one
// when an exchange fails or the judge calls an answer a failure (within the first wave's time),
// and lets a judge decide when an answer ends the query and what is served when all are in.
//   balanced        the order comes from the Balancer (least in flight, round robin, recently
//                   failed ones last); first NOERROR/NXDOMAIN wins, as in fastest.
//   prefer_positive a NOERROR with answer records wins at once; NXDOMAIN or NODATA waits for the
//                   other upstreams asked and is served only if none is positive.
//   consensus       NOERROR/NXDOMAIN answers vote with their verdict (rcode and the set of records
//                   of the asked type); the first verdict a strict majority of the wave gives wins.

import { QTYPE, RCODE, rcodeName, typeName } from "../../dns/constants.js";
import { formatIP } from "../../dns/ip.js";
import type { DnsResponse } from "../../dns/response.js";
import { CancelScope, UpstreamError } from "./exchange.js";
import { describeFailure, ForwardError, heldRank, isPreferred, type Entrant } from "./racing.js";

/** What the judge makes of one answer: finish with it, or keep waiting (asking the next upstream when `failover`). */
export type Ruling = { finish: DnsResponse } | { failover: boolean };

export interface Judge {
  answer(answer: DnsResponse, entrant: Entrant): Ruling;
  /** Every exchange is over and none finished the query: what to serve (or the error). */
  settle(failures: readonly string[], allTimeouts: boolean): DnsResponse | ForwardError;
}

const LOST = new UpstreamError("another upstream answered first", "cancelled");
const MIN_FAILOVER_BUDGET_MS = 20;

/** Asks `entrants` in `order`, `wave` at once, until the judge finishes the query or every exchange is over. */
export function gather(entrants: readonly Entrant[], order: readonly number[], wave: number, query: Buffer, judge: Judge): Promise<DnsResponse> {
  const n = order.length;
  const first = Math.min(wave, n);
  return new Promise<DnsResponse>((resolve, reject) => {
    const scope = new CancelScope();
    const failures: string[] = [];
    let allTimeouts = true;
    let active = 0;
    let started = 0;
    let done = false;
    let deadline = 0;

    const finish = (answer: DnsResponse): void => {
      done = true;
      scope.cancel(LOST);
      resolve(answer);
    };
    const next = (): void => {
      const budget = deadline - performance.now();
      if (started < n && budget >= MIN_FAILOVER_BUDGET_MS) launch(order[started], budget);
    };
    const finishIfIdle = (): void => {
      if (active > 0 || done) return;
      done = true;
      const outcome = judge.settle(failures, allTimeouts);
      if (outcome instanceof ForwardError) reject(outcome);
      else resolve(outcome);
    };
    const launch = (i: number, budgetMs: number): void => {
      const entrant = entrants[i];
      active++;
      started++;
      entrant.exchange(query, scope, budgetMs).then(
        (answer) => {
          active--;
          if (done) return;
          allTimeouts = false;
          const ruling = judge.answer(answer, entrant);
          if ("finish" in ruling) return finish(ruling.finish);
          if (ruling.failover) {
            failures.push(`${entrant.name}: answered ${rcodeName(answer.rcode)}`);
            next();
          }
          finishIfIdle();
        },
        (err: unknown) => {
          active--;
          if (done) return;
          if (!(err instanceof UpstreamError && err.kind === "timeout")) allTimeouts = false;
          failures.push(describeFailure(entrant.name, err));
          next();
          finishIfIdle();
        },
      );
    };

    for (let k = 0; k < first; k++) deadline = Math.max(deadline, performance.now() + entrants[order[k]].timeoutMs);
    for (let k = 0; k < first; k++) launch(order[k], Infinity);
  });
}

/** The error when nothing usable came: the held answer if there is one, else every failure. */
function fallback(held: DnsResponse | null, failures: readonly string[], allTimeouts: boolean): DnsResponse | ForwardError {
  return held ?? new ForwardError(`all upstreams failed: ${failures.join("; ")}`, allTimeouts);
}

/** Keeps the best of the answers that are not NOERROR/NXDOMAIN (SERVFAIL, REFUSED, ...). */
class Held {
  answer: DnsResponse | null = null;
  keep(a: DnsResponse): void {
    if (!this.answer || heldRank(a.rcode) < heldRank(this.answer.rcode)) this.answer = a;
  }
}

/** First NOERROR/NXDOMAIN wins; others are held and fail over (fastest's rule, for `balanced`). */
export function firstDefinite(): Judge {
  const held = new Held();
  return {
    answer(a) {
      if (isPreferred(a.rcode)) return { finish: a };
      held.keep(a);
      return { failover: true };
    },
    settle: (failures, allTimeouts) => fallback(held.answer, failures, allTimeouts),
  };
}

const answerCount = (a: DnsResponse): number => {
  const w = a.toWire();
  return (w[6] << 8) | w[7];
};

/** NOERROR with answer records wins; NXDOMAIN/NODATA waits for the rest (the first one is served if nothing positive comes). */
export function preferPositive(): Judge {
  const held = new Held();
  let negative: DnsResponse | null = null;
  return {
    answer(a) {
      const rcode = a.rcode;
      if (rcode === RCODE.NOERROR && answerCount(a) > 0) return { finish: a };
      if (isPreferred(rcode)) {
        negative ??= a;
        return { failover: false };
      }
      held.keep(a);
      return { failover: true };
    },
    settle: (failures, allTimeouts) => negative ?? fallback(held.answer, failures, allTimeouts),
  };
}

/** An answer's verdict: its rcode and the set of records of the asked type (RDATA bytes, names uncompressed; order and TTL ignored). */
export function verdictOf(a: DnsResponse): { key: string; text: string } {
  const m = a.message;
  const rcode = a.rcode;
  const qtype = m.questions[0]?.type ?? 0;
  const records = m.answers.filter((rr) => rr.type === qtype);
  const data = [...new Set(records.map((rr) => rr.data.toString("hex")))].sort();
  const key = `${rcode}|${qtype}|${data.join(",")}`;
  if (rcode !== RCODE.NOERROR) return { key, text: rcodeName(rcode) };
  const address = qtype === QTYPE.A || qtype === QTYPE.AAAA;
  const shown = address ? data.map((hex) => formatIP(Buffer.from(hex, "hex"))).sort() : [];
  return { key, text: address ? `[${shown.join(", ")}]` : `${data.length} ${typeName(qtype)} record${data.length === 1 ? "" : "s"}` };
}

/** The first verdict given by `needed` upstreams wins; without one, the query fails (onNoConsensus counts it). */
export function consensus(needed: number, onNoConsensus: () => void): Judge {
  const held = new Held();
  const votes = new Map<string, { answer: DnsResponse; text: string; names: string[] }>();
  return {
    answer(a, entrant) {
      if (!isPreferred(a.rcode)) {
        held.keep(a);
        return { failover: true };
      }
      let verdict: ReturnType<typeof verdictOf>;
      try {
        verdict = verdictOf(a);
      } catch {
        held.keep(a);
        return { failover: true };
      }
      const v = votes.get(verdict.key) ?? { answer: a, text: verdict.text, names: [] };
      v.names.push(entrant.name);
      votes.set(verdict.key, v);
      return v.names.length >= needed ? { finish: v.answer } : { failover: false };
    },
    settle(failures, allTimeouts) {
      if (votes.size === 0) return fallback(held.answer, failures, allTimeouts);
      onNoConsensus();
      const seen = [...votes.values()].map((v) => `${v.text} from ${v.names.join(", ")}`);
      const more = failures.length > 0 ? `; ${failures.join("; ")}` : "";
      return new ForwardError(`no consensus (${needed} upstreams must agree): ${seen.join(" vs ")}${more}`, false);
    },
  };
}

/**
 * The order `balanced` asks upstreams in: those not marked down first, then the fewest queries in
 * flight, then round robin. An exchange that fails marks its upstream down for 1 s, doubling with
 * each failure in a row up to 30 s; an answer clears it. `now` is the clock (tests shift it).
 */
export class Balancer {
  private readonly inflight: Int32Array;
  private readonly downUntil: Float64Array;
  private readonly streak: Uint8Array;
  private turn = 0;

  constructor(
    private readonly n: number,
    private readonly now: () => number,
  ) {
    this.inflight = new Int32Array(n);
    this.downUntil = new Float64Array(n);
    this.streak = new Uint8Array(n);
  }

  order(): number[] {
    const n = this.n;
    const start = this.turn;
    this.turn = (this.turn + 1) % n;
    const now = this.now();
    const rank = (i: number): number => (this.downUntil[i] > now ? 1e9 : 0) + this.inflight[i] * n + ((i - start + n) % n);
    return Array.from({ length: n }, (_, i) => i).sort((a, b) => rank(a) - rank(b));
  }

  /** Wraps entrant `i` so its exchanges are counted and judged healthy or not. */
  track(entrant: Entrant, i: number): Entrant {
    return {
      name: entrant.name,
      timeoutMs: entrant.timeoutMs,
      exchange: (query, scope, budgetMs) => {
        this.inflight[i]++;
        return entrant.exchange(query, scope, budgetMs).then(
          (answer) => {
            this.inflight[i]--;
            this.streak[i] = 0;
            this.downUntil[i] = 0;
            return answer;
          },
          (err: unknown) => {
            this.inflight[i]--;
            if (!(err instanceof UpstreamError && err.kind === "cancelled")) {
              this.streak[i] = Math.min(this.streak[i] + 1, 16);
              this.downUntil[i] = this.now() + Math.min(1000 * 2 ** (this.streak[i] - 1), 30_000);
            }
            throw err;
          },
        );
      },
    };
  }
}
