// Asking several upstreams for one answer. `concurrent` of them start together from a random
// position (round robin); the first NOERROR/NXDOMAIN wins and the rest are cancelled. Any other
// rcode is held (the best one kept) and used only when no preferred answer comes. When a query
// fails or is held and time remains before the first wave's deadline, the next upstream not yet
// asked starts, so one dead or refusing upstream does not cost the answer.

import { RCODE, rcodeName } from "../../dns/constants.js";
import type { DnsResponse } from "../../dns/response.js";
import { CancelScope, UpstreamError } from "./exchange.js";

export interface Entrant {
  readonly name: string;
  readonly timeoutMs: number;
  exchange(query: Buffer, scope: CancelScope | null, budgetMs?: number): Promise<DnsResponse>;
}

/** Every upstream asked failed; `timedOut` when each failure was a timeout. */
export class ForwardError extends Error {
  readonly timedOut: boolean;
  constructor(message: string, timedOut: boolean) {
    super(message);
    this.name = "ForwardError";
    this.timedOut = timedOut;
  }
}

const LOST = new UpstreamError("another upstream answered first", "cancelled");
/** A failover query is not worth starting with less time than this. */
const MIN_FAILOVER_BUDGET_MS = 20;

/** Lower is better among answers that are not NOERROR/NXDOMAIN. */
export function heldRank(rcode: number): number {
  switch (rcode) {
    case RCODE.SERVFAIL:
      return 1;
    case RCODE.REFUSED:
      return 2;
    case RCODE.FORMERR:
    case RCODE.NOTIMP:
      return 3;
    default:
      // Other rcodes (YXDOMAIN, NOTAUTH, BADVERS...) are real statements about the query.
      return 0;
  }
}

export function describeFailure(name: string, err: unknown): string {
  return `${name}: ${err instanceof Error ? err.message : String(err)}`;
}

export function isPreferred(rcode: number): boolean {
  return rcode === RCODE.NOERROR || rcode === RCODE.NXDOMAIN;
}

/** Races `concurrent` of `entrants` (at least two) for `query`. */
export function race(entrants: readonly Entrant[], concurrent: number, query: Buffer): Promise<DnsResponse> {
  const n = entrants.length;
  const first = Math.floor(Math.random() * n);
  const wave = Math.min(concurrent, n);
  return new Promise<DnsResponse>((resolve, reject) => {
    const scope = new CancelScope();
    const failures: string[] = [];
    let allTimeouts = true;
    let held: DnsResponse | null = null;
    let active = 0;
    let started = 0;
    let done = false;
    let deadline = 0;

    const finishIfIdle = (): void => {
      if (active > 0 || done) return;
      done = true;
      if (held) resolve(held);
      else reject(new ForwardError(`all upstreams failed: ${failures.join("; ")}`, allTimeouts));
    };

    const failover = (): void => {
      const budget = deadline - performance.now();
      if (started >= n || budget < MIN_FAILOVER_BUDGET_MS) return;
      launch((first + started) % n, budget);
    };

    const launch = (i: number, budgetMs: number): void => {
      const entrant = entrants[i];
      active++;
      started++;
      entrant.exchange(query, scope, budgetMs).then(
        (answer) => {
          active--;
          if (done) return;
          const rcode = answer.rcode;
          if (isPreferred(rcode)) {
            done = true;
            scope.cancel(LOST);
            resolve(answer);
            return;
          }
          allTimeouts = false;
          failures.push(`${entrant.name}: answered ${rcodeName(rcode)}`);
          if (!held || heldRank(rcode) < heldRank(held.rcode)) held = answer;
          failover();
          finishIfIdle();
        },
        (err: unknown) => {
          active--;
          if (done) return;
          if (!(err instanceof UpstreamError && err.kind === "timeout")) allTimeouts = false;
          failures.push(describeFailure(entrant.name, err));
          failover();
          finishIfIdle();
        },
      );
    };

    for (let k = 0; k < wave; k++) deadline = Math.max(deadline, performance.now() + entrants[(first + k) % n].timeoutMs);
    for (let k = 0; k < wave; k++) launch((first + k) % n, Infinity);
  });
}
