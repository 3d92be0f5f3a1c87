// The compact form a captured query travels in from the DNS thread to the writer: records appended
// back to back into one ArrayBuffer per batch (transferred, not copied, to the worker), with plugin
// and sequence tags interned as small numbers for the recorder's life, client names and group sets
// likewise (ClientTable), and client addresses for the batch's. Appending is a few byte stores and
// two memcpys; no object, string or JSON is built per query. The writer decodes it with `readBatch`.
//
// Record layout (little-endian):
//   0 u32 record length   4 f64 created_at_ms   12 u32 elapsed_us   16 u16 query bytes
//  18 u16 response bytes 20 u16 error bytes     22 u16 path events  24 u8 flags  25 u8 unused
//  26 u16 client address (index into the batch's list)
//  28 u32 client name (ClientTable name id + 1; 0: no name)   32 u32 group set (ClientTable set id; 0: none)
//  36 query, response, error (utf8), events (EVENT_BYTES each)
// Event: u16 sequence tag, u16 tag, i32 node index (-1: none), u8 kind, u8 outcome.

import type { ClientIdentity } from "../../../engine/clients.js";
import type { PathEvent } from "../../../engine/context.js";

const HEADER = 36;
const EVENT_BYTES = 10;
const FLAG_RESPONSE = 1;
const FLAG_ERROR = 2;
/** Longest error text kept (UTF-16 units). */
export const MAX_ERROR_BYTES = 1024;
/** Most path events kept per record; a longer path is cut (sequences are finite, this is a guard). */
export const MAX_EVENTS = 4096;

/** Codes stored in steps_v2 (part of the v2 schema: never renumber). */
export const KIND_CODES = { matcher: 0, executor: 1, builtin: 2 } as const;
export const OUTCOME_CODES = { matched: 0, not_matched: 1, entered: 2, next: 3, stop: 4, return: 5, error: 6 } as const;
export const KIND_NAMES = ["matcher", "executor", "builtin"] as const;
export const OUTCOME_NAMES = ["matched", "not_matched", "entered", "next", "stop", "return", "error"] as const;

/** Tags interned as numbers; the writer receives the new ones with each batch. */
export class StringTable {
  private readonly ids = new Map<string, number>();
  readonly list: string[] = [];

  id(s: string): number {
    let id = this.ids.get(s);
    if (id === undefined) {
      id = this.list.length;
      this.ids.set(s, id);
      this.list.push(s);
    }
    return id;
  }
}

/** A record's client name and group set as ClientTable numbers: [name id + 1 (0: none), set id (0: no group)]. */
export type ClientRef = readonly [number, number];

/** The reference of a query no `clients` provider identified. */
export const NO_CLIENT: ClientRef = [0, 0];

/**
 * Client names and group sets interned for the recorder's life; the writer receives the new ones
 * with each batch. The `clients` provider hands out one identity object per origin and replaces it
 * when what it knows changes, so a query costs one WeakMap lookup; a new identity costs a join.
 * Grows with the distinct names and group combinations a directory ever gives (declared and named
 * clients, not addresses), which stay few.
 */
export class ClientTable {
  readonly names = new StringTable();
  /** Group sets in the order the provider lists them; set 0 is no group. */
  readonly sets: (readonly string[])[] = [[]];
  private readonly setIds = new Map<string, number>([["", 0]]);
  private readonly known = new WeakMap<ClientIdentity, ClientRef>();

  of(identity: ClientIdentity): ClientRef {
    let ref = this.known.get(identity);
    if (ref === undefined) {
      // Group names have no commas (the provider's name pattern).
      const key = identity.groups.join(",");
      let set = this.setIds.get(key);
      if (set === undefined) {
        set = this.sets.length;
        this.setIds.set(key, set);
        this.sets.push([...identity.groups]);
      }
      ref = [identity.name === null ? 0 : this.names.id(identity.name) + 1, set];
      this.known.set(identity, ref);
    }
    return ref;
  }
}

/** A batch's client addresses: few distinct ones, so a Map lookup instead of writing text per query. */
const MAX_BATCH_IPS = 0xffff;

function put16(b: Buffer, at: number, v: number): void {
  b[at] = v & 0xff;
  b[at + 1] = (v >>> 8) & 0xff;
}

function put32(b: Buffer, at: number, v: number): void {
  b[at] = v & 0xff;
  b[at + 1] = (v >>> 8) & 0xff;
  b[at + 2] = (v >>> 16) & 0xff;
  b[at + 3] = (v >>> 24) & 0xff;
}

/** One batch being filled on the DNS thread. */
export class BatchBuilder {
  private buf: Buffer;
  private off = 0;
  count = 0;
  private readonly ipIds = new Map<string, number>();
  /** The batch's client addresses, by index. */
  readonly ips: string[] = [];

  constructor(initialBytes: number) {
    this.buf = Buffer.from(new ArrayBuffer(initialBytes));
  }

  private ipIndex(ip: string): number {
    let id = this.ipIds.get(ip);
    if (id === undefined) {
      // Past 65 535 distinct addresses in one batch the last slot is reused (the batch is flushed long before).
      id = Math.min(this.ips.length, MAX_BATCH_IPS);
      if (id === this.ips.length) this.ips.push(ip);
      else this.ips[id] = ip;
      this.ipIds.set(ip, id);
    }
    return id;
  }

  get bytes(): number {
    return this.off;
  }

  /** Appends one record. `events` are path[from..]; `response` null when there is none (or an error); `client` from ClientTable.of. */
  append(createdAtMs: number, elapsedUs: number, query: Uint8Array, response: Uint8Array | null, clientIp: string, client: ClientRef, error: string | null, events: readonly PathEvent[] | null, from: number, strings: StringTable): void {
    const qLen = Math.min(query.length, 0xffff);
    const rLen = response === null ? 0 : Math.min(response.length, 0xffff);
    const errText = error === null ? "" : error.length > MAX_ERROR_BYTES ? error.slice(0, MAX_ERROR_BYTES) : error;
    // Worst case of UTF-8 (3 bytes per UTF-16 unit); the real length is written after encoding.
    const errMax = errText.length * 3;
    const nEvents = events === null ? 0 : Math.min(events.length - from, MAX_EVENTS);
    const max = HEADER + qLen + rLen + errMax + nEvents * EVENT_BYTES;
    if (this.off + max > this.buf.length) this.grow(this.off + max);
    const b = this.buf;
    const start = this.off;
    let p = start + HEADER;
    b.set(query.length === qLen ? query : query.subarray(0, qLen), p);
    p += qLen;
    if (response !== null) {
      b.set(response.length === rLen ? response : response.subarray(0, rLen), p);
      p += rLen;
    }
    let errLen = 0;
    if (errText.length > 0) {
      errLen = b.write(errText, p, errMax, "utf8");
      p += errLen;
    }
    for (let i = 0; i < nEvents; i++) {
      const e = (events as readonly PathEvent[])[from + i];
      put16(b, p, strings.id(e.sequenceTag));
      put16(b, p + 2, strings.id(e.tag));
      put32(b, p + 4, e.nodeIndex === null ? -1 : e.nodeIndex);
      b[p + 8] = KIND_CODES[e.kind];
      b[p + 9] = OUTCOME_CODES[e.outcome];
      p += EVENT_BYTES;
    }
    put32(b, start, p - start);
    b.writeDoubleLE(createdAtMs, start + 4);
    put32(b, start + 12, elapsedUs > 0xffffffff ? 0xffffffff : elapsedUs);
    put16(b, start + 16, qLen);
    put16(b, start + 18, rLen);
    put16(b, start + 20, errLen);
    put16(b, start + 22, nEvents);
    b[start + 24] = (response !== null ? FLAG_RESPONSE : 0) | (error !== null ? FLAG_ERROR : 0);
    put16(b, start + 26, this.ipIndex(clientIp));
    put32(b, start + 28, client[0]);
    put32(b, start + 32, client[1]);
    this.off = p;
    this.count++;
  }

  /** The whole buffer, to be transferred (the reader stops after `count` records; the builder must not be used afterwards). */
  take(): ArrayBuffer {
    return this.buf.buffer as ArrayBuffer;
  }

  private grow(need: number): void {
    let size = this.buf.length * 2;
    while (size < need) size *= 2;
    const next = Buffer.from(new ArrayBuffer(size));
    this.buf.copy(next, 0, 0, this.off);
    this.buf = next;
  }
}

/** A decoded step of a record's execution path, with interned tags resolved. */
export interface StepEvent {
  sequenceTag: string;
  nodeIndex: number | null;
  kind: number;
  tag: string;
  outcome: number;
}

/** A record as the writer sees it (buffers are views into the batch). */
export interface BatchRecord {
  createdAtMs: number;
  elapsedUs: number;
  query: Buffer;
  response: Buffer | null;
  clientIp: string;
  /** The client's name when the `clients` provider knew one. */
  clientName: string | null;
  /** Its groups (shared between records of the same set: read only). */
  clientGroups: readonly string[];
  error: string | null;
  steps: StepEvent[];
}

/** The writer's copies of a ClientTable (names by id, group sets by id). */
export interface ClientLists {
  names: readonly string[];
  sets: readonly (readonly string[])[];
}

const NO_GROUPS: readonly string[] = [];

/** Decodes the records of a batch one at a time; `strings` is the writer's copy of the tag table, `ips` the batch's addresses, `clients` its copy of the ClientTable. */
export function* batchRecords(data: ArrayBuffer, count: number, strings: readonly string[], ips: readonly string[], clients: ClientLists): Generator<BatchRecord> {
  const b = Buffer.from(data);
  let p = 0;
  for (let n = 0; n < count && p + HEADER <= b.length; n++) {
    const len = b.readUInt32LE(p);
    const qLen = b.readUInt16LE(p + 16);
    const rLen = b.readUInt16LE(p + 18);
    const errLen = b.readUInt16LE(p + 20);
    const nEvents = b.readUInt16LE(p + 22);
    const flags = b[p + 24];
    const clientIp = ips[b.readUInt16LE(p + 26)] ?? "";
    const nameRef = b.readUInt32LE(p + 28);
    const clientName = nameRef === 0 ? null : (clients.names[nameRef - 1] ?? null);
    const clientGroups = clients.sets[b.readUInt32LE(p + 32)] ?? NO_GROUPS;
    let q = p + HEADER;
    const query = b.subarray(q, q + qLen);
    q += qLen;
    const response = (flags & FLAG_RESPONSE) !== 0 ? b.subarray(q, q + rLen) : null;
    q += rLen;
    const error = (flags & FLAG_ERROR) !== 0 ? b.toString("utf8", q, q + errLen) : null;
    q += errLen;
    const steps: StepEvent[] = [];
    for (let i = 0; i < nEvents; i++, q += EVENT_BYTES) {
      const node = b.readInt32LE(q + 4);
      steps.push({ sequenceTag: strings[b.readUInt16LE(q)] ?? "?", tag: strings[b.readUInt16LE(q + 2)] ?? "?", nodeIndex: node < 0 ? null : node, kind: b[q + 8], outcome: b[q + 9] });
    }
    yield { createdAtMs: b.readDoubleLE(p + 4), elapsedUs: b.readUInt32LE(p + 12), query, response, clientIp, clientName, clientGroups, error, steps };
    p += len;
  }
}

/** Decodes every record of a batch (batchRecords, all at once). */
export function readBatch(data: ArrayBuffer, count: number, strings: readonly string[], ips: readonly string[], clients: ClientLists): BatchRecord[] {
  return [...batchRecords(data, count, strings, ips, clients)];
}
