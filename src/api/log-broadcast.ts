// Fans log entries out to every open /api/logs/stream client at a cost that does not scale with
// clients × entries, and that DNS work always outranks:
//  - one bus listener (only while a client is connected) collects entries;
//  - a turn runs at most every BATCH_MS, and never before the next event-loop turn: each entry is
//    serialised once, one batch is built per level filter in use, and each client writes that
//    shared batch in ~16 KiB buffers;
//  - a turn runs after the I/O callbacks (DNS) of its loop iteration and stops writing after
//    TURN_BUDGET_MS; the clients it did not reach keep the batch in their bounded queues (O(1)
//    each) and go first next turn, so streaming takes at most about TURN_BUDGET_MS /
//    (TURN_BUDGET_MS + BATCH_MS) of the event loop. A turn that starts late (the loop is busy or
//    the process starved of CPU) serves one client only. Clients that fall behind get
//    `event: dropped`, as slow readers always have.

import type { Bus } from "../bus.js";
import { LOG_LEVEL_NAMES, levelRank, type LogEntry } from "../observability/log-ring.js";
import { FrameBatch, logFrame, type LogStreamConnection } from "./log-stream.js";
import { Turns } from "./turns.js";

export class LogBroadcast {
  private conns: LogStreamConnection[] = [];
  /** Index of the client that goes first next turn (rotates so every client gets turns). */
  private cursor = 0;
  private pending: LogEntry[] = [];
  private readonly turns = new Turns((deadline) => {
    this.distribute(deadline);
    return this.conns.some((c) => c.ready);
  });
  private readonly onLog = (entry: LogEntry): void => {
    this.pending.push(entry);
    this.turns.request();
  };

  constructor(private readonly bus: Bus) {}

  /** Asks for a turn (a client's socket drained). */
  readonly wake = (): void => this.turns.request();

  /**
   * Subscribes a client. Entries logged before this call are handed to the others first, so the
   * caller's replay from the ring and the live batches neither overlap nor leave a gap.
   */
  add(conn: LogStreamConnection): void {
    if (this.pending.length > 0) {
      this.distribute(null);
      this.turns.request();
    }
    if (this.conns.length === 0) this.bus.on("log", this.onLog);
    this.conns.push(conn);
  }

  remove(conn: LogStreamConnection): void {
    const i = this.conns.indexOf(conn);
    if (i < 0) return;
    this.conns.splice(i, 1);
    if (i < this.cursor) this.cursor--;
    if (this.conns.length > 0) return;
    this.bus.off("log", this.onLog);
    this.pending = [];
    this.cursor = 0;
  }

  /** Gives every client the pending entries: written until `deadline` (performance.now() time), held after it; null holds all. */
  private distribute(deadline: number | null): void {
    const entries = this.pending;
    this.pending = [];
    const n = this.conns.length;
    if (n === 0) return;
    const frames = entries.map(logFrame);
    const ranks = entries.map((e) => levelRank(e.level));
    const batches = new Array<FrameBatch | null | undefined>(LOG_LEVEL_NAMES.length);
    const batchFor = (rank: number): FrameBatch | null => {
      let batch = batches[rank];
      if (batch === undefined) {
        const mine = rank === 0 ? frames : frames.filter((_, i) => ranks[i] >= rank);
        batch = mine.length > 0 ? new FrameBatch(mine) : null;
        batches[rank] = batch;
      }
      return batch;
    };
    if (this.cursor >= n) this.cursor = 0;
    let reached = 0;
    for (let k = 0; k < n; k++) {
      const conn = this.conns[(this.cursor + k) % n];
      const batch = entries.length > 0 ? batchFor(conn.minRank) : null;
      // The first client always gets its turn, so a client makes progress however busy the loop is.
      if (deadline !== null && reached === k && (k === 0 || performance.now() < deadline)) {
        conn.send(batch);
        reached++;
      } else {
        conn.hold(batch);
      }
    }
    // The first client not reached this turn goes first next turn.
    if (reached < n) this.cursor = (this.cursor + reached) % n;
  }
}
