// What the writer thread has done, in memory it shares with the DNS thread: the writer stores its
// totals after each transaction, and the DNS thread reads them when it needs them (a full queue, a
// flush tick, a metrics scrape). No message passes per commit.
//
// Why not a message: a message from the writer takes the lock of the DNS thread's port and wakes the
// DNS thread while it holds it. Under SCHED_IDLE (priority.ts) the kernel hands the core to DNS right
// there, the DNS thread soon wants the same lock to read the message, and waits for the writer to get
// the core back — behind a running reader process, up to a scheduler tick (4 ms). Measured
// with `perf sched` at 20 000 QPS with statistics read back to back on one core: 11–17 such waits of
// ~3 ms in 3 s, and DNS p99 3.4–4.6 ms; with the totals shared, none, and p99 1.6–1.7 ms.

/** Transactions, by duration in seconds: a batch of a few hundred records commits in milliseconds, a trim or a busy disk takes longer. */
export const COMMIT_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5] as const;

/** The totals as read: counts since the writer started. */
export interface Progress {
  /** Records of the batches the writer has finished: written, or lost with a failed transaction. */
  answered: number;
  lost: number;
  /** Rows in the store after the last transaction. */
  records: number;
  /** Size of the database file and its log, or null when not measured yet. */
  dbBytes: number | null;
  /** Transactions per COMMIT_BUCKETS slot (the last: slower than every bound), their total seconds and count. */
  commitCounts: Float64Array;
  commitSeconds: number;
  commits: number;
}

// Layout: one Int32 published counter (8 bytes with padding), then Float64 slots.
const ANSWERED = 0;
const LOST = 1;
const RECORDS = 2;
const DB_BYTES = 3;
const SECONDS = 4;
const COMMITS = 5;
const BUCKETS = 6;
const SLOTS = BUCKETS + COMMIT_BUCKETS.length + 1;

export class WriterProgress {
  readonly buffer: SharedArrayBuffer;
  private readonly published: Int32Array;
  private readonly slots: Float64Array;

  /** A new one (the DNS thread's side), or the writer's view of `buffer`. */
  constructor(buffer?: SharedArrayBuffer) {
    this.buffer = buffer ?? new SharedArrayBuffer(8 + SLOTS * 8);
    this.published = new Int32Array(this.buffer, 0, 1);
    this.slots = new Float64Array(this.buffer, 8, SLOTS);
    if (!buffer) this.slots[DB_BYTES] = -1;
  }

  /** The writer, after a transaction of `count` records (`lost` of them not written). */
  committed(count: number, lost: number, seconds: number, records: number, dbBytes: number | null): void {
    const s = this.slots;
    s[ANSWERED] += count;
    s[LOST] += lost;
    s[RECORDS] = records;
    if (dbBytes !== null) s[DB_BYTES] = dbBytes;
    s[SECONDS] += seconds;
    s[COMMITS]++;
    let i = 0;
    while (i < COMMIT_BUCKETS.length && seconds > COMMIT_BUCKETS[i]) i++;
    s[BUCKETS + i]++;
    this.publish();
  }

  private publish(): void {
    // Everything stored before happens before this for a reader that loads the counter first.
    Atomics.add(this.published, 0, 1);
    // Wakes a caller of changed() (the bench, tests); with none waiting, nothing happens.
    Atomics.notify(this.published, 0);
  }

  /** The writer, once its store is open and after a clear or a cleanup: the store's rows (and size). */
  stored(records: number, dbBytes: number | null): void {
    this.slots[RECORDS] = records;
    if (dbBytes !== null) this.slots[DB_BYTES] = dbBytes;
    this.publish();
  }

  /** How many times the writer has published; pass it to changed(). */
  version(): number {
    return Atomics.load(this.published, 0);
  }

  /** Resolves once the writer publishes after `since` (or after `timeoutMs`). For callers that wait on commits (the bench, tests): the DNS thread never waits. */
  async changed(since: number, timeoutMs: number): Promise<void> {
    const r = Atomics.waitAsync(this.published, 0, since, timeoutMs);
    if (r.async) await r.value;
  }

  /** Records of the batches finished so far (the one number the DNS thread reads when its queue looks full). */
  answered(): number {
    Atomics.load(this.published, 0);
    return this.slots[ANSWERED];
  }

  /** The totals as of the writer's last transaction (a slot may already hold a later one's: each only grows). */
  read(): Progress {
    Atomics.load(this.published, 0);
    const s = this.slots;
    return {
      answered: s[ANSWERED],
      lost: s[LOST],
      records: s[RECORDS],
      dbBytes: s[DB_BYTES] < 0 ? null : s[DB_BYTES],
      commitCounts: s.slice(BUCKETS, SLOTS),
      commitSeconds: s[SECONDS],
      commits: s[COMMITS],
    };
  }
}
