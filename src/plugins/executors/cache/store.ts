// The cache's storage: a Map from name to the few entries for that name (one per qtype/qclass/
// DO-CD-EDNS bits/ECS), all threaded on an intrusive doubly linked list in recency order. A hit
// hashes only the name string the context already has and moves its entry to the head; an insert
// beyond `capacity` evicts from the tail at once, so the entry count never exceeds the bound.

import type { KeyParts } from "./key.js";

/** One cached answer. `wire` is never changed after it is stored; hits patch a copy. */
export interface Entry extends Readonly<KeyParts> {
  readonly wire: Buffer;
  /**
   * Per record (OPT excluded), two numbers: the offset of its TTL field and its original TTL capped
   * at `ttl` (no record outlives the entry). One small array of small integers: the cheapest shape
   * in V8's heap, which matters at 100 000s of entries.
   */
  readonly ttls: number[];
  /** End of the question name (it starts, uncompressed, at offset 12). */
  readonly qnameEnd: number;
  /** The question name as stored (letter case included), to skip the 0x20 echo when it already matches;
   *  the same string as `qname` when they are equal. */
  readonly storedName: string;
  /** The entry's TTL in seconds, after max_positive_ttl / max_negative_ttl. */
  readonly ttl: number;
  readonly negative: boolean;
  /** Monotonic ms (performance.now()), whole milliseconds (small integers take no heap of their own). */
  readonly cachedAt: number;
  readonly freshUntil: number;
  /** freshUntil, or later when serve-stale applies. */
  readonly expireAt: number;
  lastAccess: number;
  /** Recency stamp: strictly increasing along the list from tail to head. */
  seq: number;
  /** Insertion stamp, never changed by use: API paging visits entries by it, each once. */
  born: number;
  /** Fresh hits since it was stored (prefetch serves names asked at least prefetch_min_hits times). */
  hits: number;
  /** A background refresh (serve-stale or prefetch) for this entry is in flight (one per key). */
  refreshing: boolean;
  prev: Entry | null;
  next: Entry | null;
  /** The next entry for the same name (another qtype, class, bits or ECS scope). */
  sibling: Entry | null;
}

export class LruStore {
  /** First entry per name; the rest hang off `sibling`. */
  private readonly byName = new Map<string, Entry>();
  private count = 0;
  /** Most recently used. */
  private head: Entry | null = null;
  private tail: Entry | null = null;
  private stamp = 0;
  private born: number;

  /** `births`: the last insertion stamp of the store this one replaces (paging cursors keep their meaning). */
  constructor(
    readonly capacity: number,
    births = 0,
  ) {
    this.born = births;
  }

  /** The last insertion stamp handed out. */
  get births(): number {
    return this.born;
  }

  get size(): number {
    return this.count;
  }

  find(qname: string, qtype: number, qclass: number, bits: number, ecs: string): Entry | undefined {
    for (let e = this.byName.get(qname) ?? null; e !== null; e = e.sibling) {
      if (e.qtype === qtype && e.qclass === qclass && e.bits === bits && e.ecs === ecs) return e;
    }
    return undefined;
  }

  /** Marks an entry as just used. */
  touch(e: Entry, now: number): void {
    e.lastAccess = Math.floor(now);
    e.seq = ++this.stamp;
    if (this.head === e) return;
    this.unlink(e);
    this.linkHead(e);
  }

  /** Adds or replaces; returns how many entries were evicted to stay within capacity. */
  insert(e: Entry): number {
    const old = this.find(e.qname, e.qtype, e.qclass, e.bits, e.ecs);
    if (old) this.remove(old);
    e.sibling = this.byName.get(e.qname) ?? null;
    this.byName.set(e.qname, e);
    this.count++;
    e.seq = ++this.stamp;
    e.born = ++this.born;
    this.linkHead(e);
    let evicted = 0;
    while (this.count > this.capacity && this.tail) {
      this.remove(this.tail);
      evicted++;
    }
    return evicted;
  }

  remove(e: Entry): void {
    const first = this.byName.get(e.qname);
    if (first === e) {
      if (e.sibling === null) this.byName.delete(e.qname);
      else this.byName.set(e.qname, e.sibling);
    } else {
      let p = first ?? null;
      while (p !== null && p.sibling !== e) p = p.sibling;
      if (p === null) return;
      p.sibling = e.sibling;
    }
    e.sibling = null;
    this.count--;
    this.unlink(e);
  }

  clear(): number {
    const n = this.count;
    this.byName.clear();
    this.count = 0;
    this.head = this.tail = null;
    return n;
  }

  /** Entries from most to least recently used. Safe against removal of the current entry. */
  *byRecency(): IterableIterator<Entry> {
    let e = this.head;
    while (e) {
      const next = e.next;
      yield e;
      e = next;
    }
  }

  /** Removes every entry whose whole lifetime (fresh and stale) has passed; returns how many. */
  sweep(now: number): number {
    let n = 0;
    for (const e of this.byRecency()) {
      if (e.expireAt <= now) {
        this.remove(e);
        n++;
      }
    }
    return n;
  }

  private linkHead(e: Entry): void {
    e.prev = null;
    e.next = this.head;
    if (this.head) this.head.prev = e;
    this.head = e;
    if (!this.tail) this.tail = e;
  }

  private unlink(e: Entry): void {
    if (e.prev) e.prev.next = e.next;
    else if (this.head === e) this.head = e.next;
    if (e.next) e.next.prev = e.prev;
    else if (this.tail === e) this.tail = e.prev;
    e.prev = e.next = null;
  }
}
