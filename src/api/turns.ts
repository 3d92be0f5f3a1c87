// The schedule the SSE broadcaster (./sse-client.ts: logs, actors, plugin streams) writes on: a turn runs at most every BATCH_MS
// after the previous one ended, and never before the check phase of the event loop, so it comes after
// that iteration's I/O callbacks (DNS); it writes until TURN_BUDGET_MS has passed. A turn that starts
// LATE_MS late (the loop is busy, or the process starved of CPU) is told so and serves one client.

/** Shortest gap between the end of one turn and the start of the next. */
export const BATCH_MS = 25;
/** Longest a turn writes to clients before it leaves the rest for the next turn. */
export const TURN_BUDGET_MS = 2;
/** A turn this late is a sign DNS needs the time. */
const LATE_MS = BATCH_MS;

export class Turns {
  private scheduled = false;
  private lastTurnEnd = 0;
  /** When the scheduled turn should start (performance.now() time). */
  private dueAt = 0;
  private readonly runNow = (): void => this.run();
  // From a timer, the turn waits for the check phase, after this iteration's I/O callbacks.
  private readonly timerFired = (): void => void setImmediate(this.runNow);

  /**
   * `turn` writes until `deadline` (performance.now() time; the turn's start when `late`) and
   * returns true when it has more to write (another turn is then scheduled).
   */
  constructor(private readonly turn: (deadline: number, late: boolean) => boolean) {}

  /** Asks for a turn (something to write, or a client's socket drained); one is pending at a time. */
  readonly request = (): void => {
    if (this.scheduled) return;
    this.scheduled = true;
    const now = performance.now();
    this.dueAt = Math.max(now, this.lastTurnEnd + BATCH_MS);
    if (this.dueAt > now) setTimeout(this.timerFired, this.dueAt - now);
    else setImmediate(this.runNow);
  };

  private run(): void {
    this.scheduled = false;
    const start = performance.now();
    const late = start - this.dueAt > LATE_MS;
    const more = this.turn(late ? start : start + TURN_BUDGET_MS, late);
    this.lastTurnEnd = performance.now();
    if (more) this.request();
  }
}
