// What every upstream exchange shares: our random query IDs, the deadline/cancellation ticket,
// typed failures, and the rule deciding whether a packet is the answer to our query.

import { randomFillSync } from "node:crypto";
import { FLAG } from "../../dns/constants.js";
import { skipName } from "../../dns/name.js";
import { DnsResponse } from "../../dns/response.js";

export type FailureKind = "error" | "timeout" | "cancelled";

/** An exchange that produced no answer; `kind` drives the timeout metrics and race decisions. */
export class UpstreamError extends Error {
  readonly kind: FailureKind;
  constructor(message: string, kind: FailureKind = "error") {
    super(message);
    this.name = "UpstreamError";
    this.kind = kind;
  }
}

// IDs come from the CSPRNG in batches: an off-path attacker must not be able to predict them.
const idPool = Buffer.allocUnsafe(1024);
let idPos = idPool.length;

export function randomId(): number {
  if (idPos >= idPool.length) {
    randomFillSync(idPool);
    idPos = 0;
  }
  const id = (idPool[idPos] << 8) | idPool[idPos + 1];
  idPos += 2;
  return id;
}

/** A random ID not in `taken` (the caller keeps `taken` well below 65 536 entries). */
export function freeId(taken: ReadonlyMap<number, unknown>): number {
  let id = randomId();
  while (taken.has(id)) id = randomId();
  return id;
}

/** A copy of `query` carrying `id`, prefixed by the 2-byte length when `framed` (TCP). */
export function packetWithId(query: Buffer, id: number, framed: boolean): Buffer {
  const off = framed ? 2 : 0;
  const out = Buffer.allocUnsafe(query.length + off);
  if (framed) out.writeUInt16BE(query.length, 0);
  query.copy(out, off);
  out[off] = id >>> 8;
  out[off + 1] = id & 0xff;
  return out;
}

const lower = (c: number): number => (c >= 0x41 && c <= 0x5a ? c | 0x20 : c);

/** Compares two names already validated by skipName, following compression pointers. */
function sameName(a: Buffer, pa: number, b: Buffer, pb: number): boolean {
  for (;;) {
    while ((a[pa] & 0xc0) === 0xc0) pa = ((a[pa] & 0x3f) << 8) | a[pa + 1];
    while ((b[pb] & 0xc0) === 0xc0) pb = ((b[pb] & 0x3f) << 8) | b[pb + 1];
    const len = a[pa];
    if (len !== b[pb]) return false;
    if (len === 0) return true;
    for (let i = 1; i <= len; i++) if (lower(a[pa + i]) !== lower(b[pb + i])) return false;
    pa += len + 1;
    pb += len + 1;
  }
}

/** True when `answer` carries the same questions as `query` (names case-insensitively). */
function sameQuestions(answer: Buffer, query: Buffer): boolean {
  const count = (query[4] << 8) | query[5];
  if (((answer[4] << 8) | answer[5]) !== count) return false;
  let pa = 12;
  let pq = 12;
  for (let i = 0; i < count; i++) {
    const ea = skipName(answer, pa);
    const eq = skipName(query, pq);
    if (ea + 4 > answer.length) return false;
    if (!sameName(answer, pa, query, pq)) return false;
    if (answer.readUInt32BE(ea) !== query.readUInt32BE(eq)) return false;
    pa = ea + 4;
    pq = eq + 4;
  }
  return true;
}

/**
 * The answer to `query` sent with `id`, or null when the packet must be ignored: wrong ID, QR
 * clear, different question, or not a well-formed message. Ignoring (not failing) is what makes
 * a spoofed or stray packet harmless: the real answer can still arrive before the deadline.
 */
export function acceptAnswer(packet: Buffer, query: Buffer, id: number): DnsResponse | null {
  if (packet.length < 12 || ((packet[0] << 8) | packet[1]) !== id || (packet[2] & (FLAG.QR >> 8)) === 0) return null;
  try {
    if (!sameQuestions(packet, query)) return null;
    const response = DnsResponse.fromWire(packet);
    // Walking the records once proves the structure (and notes where OPT is, for the rcode).
    response.validate();
    return response;
  } catch {
    return null;
  }
}

/** Ends exchanges early: the race cancels its losers through one scope. */
export class CancelScope {
  private tickets: Ticket[] = [];
  private reason: UpstreamError | null = null;

  track(ticket: Ticket): void {
    if (this.reason) ticket.cancel(this.reason);
    else this.tickets.push(ticket);
  }

  cancel(reason: UpstreamError): void {
    if (this.reason) return;
    this.reason = reason;
    for (const t of this.tickets) t.cancel(reason);
    this.tickets = [];
  }
}

type Hook = (reason: UpstreamError) => void;

/**
 * One exchange's deadline and cancellation. Whatever the exchange is waiting on (a resolver, a
 * UDP reply, a TCP slot or reply) registers a hook; the deadline or a cancel fires it once.
 */
export class Ticket {
  private hook: Hook | null = null;
  private timer: NodeJS.Timeout | null;
  /** Why the exchange was ended early; null while it may still succeed. */
  reason: UpstreamError | null = null;
  readonly deadline: number;

  constructor(budgetMs: number, onTimeout: () => UpstreamError) {
    this.deadline = performance.now() + budgetMs;
    this.timer = setTimeout(() => {
      this.timer = null;
      this.cancel(onTimeout());
    }, budgetMs);
  }

  /** Milliseconds left before the deadline. */
  remaining(): number {
    return Math.max(0, this.deadline - performance.now());
  }

  /** Registers what to undo when the exchange ends early; runs it now if it already has. */
  wait(hook: Hook): void {
    if (this.reason) hook(this.reason);
    else this.hook = hook;
  }

  /** The current wait finished normally. */
  release(): void {
    this.hook = null;
  }

  cancel(reason: UpstreamError): void {
    if (this.reason) return;
    this.reason = reason;
    this.stopTimer();
    const hook = this.hook;
    this.hook = null;
    hook?.(reason);
  }

  /** The exchange is over (answered or failed): no timer may outlive it. */
  finish(): void {
    this.hook = null;
    this.stopTimer();
  }

  /** Waits for `promise` unless the ticket ends first. */
  guard<T>(promise: Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.wait(reject);
      promise.then(
        (v) => {
          this.release();
          resolve(v);
        },
        (err: unknown) => {
          this.release();
          reject(err instanceof Error ? err : new Error(String(err)));
        },
      );
    });
  }

  private stopTimer(): void {
    if (this.timer) {
      clearTimeout(this.timer);
      this.timer = null;
    }
  }
}
