// Between the data path and the batch writer: the bounded queue of masked prefixes waiting to be
// written, and the memory of prefixes written recently (so an answer seen again is not queued again).
// Queries only push here; the writer actor (machines/set-writer.machine.ts) hears of it through
// `listen`, deferred to after the query's own work and at most once per change.

/** IPv4 prefixes are their masked address as a number; IPv6 ones the masked bytes up to the mask, as a latin1 string. */
export type PrefixKey = number | string;

export interface QueuedEntry {
  key: PrefixKey;
  /** Entry timeout in seconds; 0 writes none (the set's own default applies). */
  timeout: number;
}

/** What the queue tells the writer actor (machines/set-writer.machine.ts events). */
export type QueueEvent = { type: "SETS.QUEUED" } | { type: "SETS.FULL" } | { type: "SETS.FLUSH"; upTo: number; requestId: string };

export class SetQueue {
  private items: QueuedEntry[] = [];
  /** Entries accepted since the plugin was made (a flush waits until this many have been taken). */
  accepted = 0;
  /** Entries taken by the writer since the plugin was made. */
  taken = 0;
  private notify: ((event: QueueEvent) => void) | null = null;
  private wakeScheduled = false;

  constructor(
    readonly capacity: number,
    readonly batchSize: number,
  ) {}

  get size(): number {
    return this.items.length;
  }

  /** False when the queue is full (the entry is dropped). */
  offer(entry: QueuedEntry): boolean {
    if (this.items.length >= this.capacity) return false;
    this.items.push(entry);
    this.accepted++;
    if (this.items.length === 1 || this.items.length === this.batchSize) this.wake();
    return true;
  }

  /** The oldest `n` entries, removed from the queue. */
  take(n: number): QueuedEntry[] {
    const out = this.items.splice(0, n);
    this.taken += out.length;
    return out;
  }

  /** The writer actor's ear while it runs; returns what stops it. Entries queued before it listened are announced at once. */
  listen(notify: (event: QueueEvent) => void): () => void {
    this.notify = notify;
    if (this.items.length > 0) this.wake();
    return () => {
      if (this.notify === notify) this.notify = null;
    };
  }

  /** Tells the actor now (not from a query); false when no actor listens. */
  tell(event: QueueEvent): boolean {
    if (this.notify === null) return false;
    this.notify(event);
    return true;
  }

  /** Tells the actor after the current query's work (never inside it), what the queue holds by then. */
  private wake(): void {
    if (this.wakeScheduled || this.notify === null) return;
    this.wakeScheduled = true;
    setImmediate(() => {
      this.wakeScheduled = false;
      const notify = this.notify;
      if (notify === null || this.items.length === 0) return;
      notify({ type: this.items.length >= this.batchSize ? "SETS.FULL" : "SETS.QUEUED" });
    });
  }
}

/** Prefixes queued recently, each until a time (ms on the plugin's clock); bounded, the oldest forgotten first. */
export class RecentPrefixes {
  private readonly map = new Map<PrefixKey, number>();

  constructor(private readonly limit: number) {}

  get size(): number {
    return this.map.size;
  }

  /** Whether `key` was queued and its time has not run out. */
  fresh(key: PrefixKey, now: number): boolean {
    const until = this.map.get(key);
    return until !== undefined && until > now;
  }

  remember(key: PrefixKey, until: number): void {
    // Re-inserted at the end: Map order is the order of remembering.
    this.map.delete(key);
    this.map.set(key, until);
    if (this.map.size > this.limit) {
      const oldest = this.map.keys().next();
      if (oldest.done !== true) this.map.delete(oldest.value);
    }
  }

  forget(key: PrefixKey): void {
    this.map.delete(key);
  }

  /** Drops run-out entries from the oldest end (at most `max` looked at), so an idle memory does not stay full of them. */
  prune(now: number, max = 4096): void {
    let looked = 0;
    for (const [key, until] of this.map) {
      if (until > now || looked++ >= max) return;
      this.map.delete(key);
    }
  }
}
