// Long builds on the DNS thread (rule files, provider snapshots, cache dumps) run in slices of a few
// milliseconds and give the event loop a turn between slices, so 100 000s of rules never stall
// DNS for longer than one slice. One slicer per build: it times the slice running now.

/** A slice's budget: at 2 000 q/s a slice of 4 ms leaves ~8 queries waiting, which one turn reads. */
export const SLICE_MS = 4;
/** Most event-loop turns one pause gives. */
const MAX_TURNS = 16;
/** Items between two clock reads: cheap enough for a per-line loop, fine enough for µs-sized items. */
const CHECK_EVERY = 32;

export const yieldToEventLoop = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

export class Slicer {
  private since = performance.now();
  private count = 0;

  constructor(private readonly budgetMs = SLICE_MS) {}

  /**
   * True when the running slice has used its time (the clock is read every few calls). Loops write
   * `if (slicer.due()) await slicer.pause();` so that most items cost no promise.
   */
  due(): boolean {
    if (++this.count < CHECK_EVERY) return false;
    this.count = 0;
    return performance.now() - this.since >= this.budgetMs;
  }

  /** True when the slice has used its time, reading the clock now (for items that take long each). */
  dueNow(): boolean {
    this.count = 0;
    return performance.now() - this.since >= this.budgetMs;
  }

  /**
   * Gives the event loop a turn (timers, I/O: DNS) and starts a new slice. A slice that overran
   * (the process was descheduled in it, or an item was slow) gets one turn per budget's worth of
   * wall time, up to MAX_TURNS: each turn reads a bounded number of datagrams per socket.
   */
  async pause(): Promise<void> {
    const turns = Math.min(MAX_TURNS, Math.max(1, Math.floor((performance.now() - this.since) / this.budgetMs)));
    for (let i = 0; i < turns; i++) await yieldToEventLoop();
    this.since = performance.now();
    this.count = 0;
  }

  /** Pauses when due: `await slicer.tick()` where an await per item costs nothing that matters. */
  async tick(): Promise<void> {
    if (this.due()) await this.pause();
  }
}

/**
 * A build written once as steps: a generator that yields after each small batch of work (a few
 * hundred items) and returns the result. `finish` runs it straight through (start-up, tests, small
 * inputs); `finishSliced` pauses between batches whenever the slice has used its time.
 */
export type Steps<T> = Generator<void, T, void>;

export function finish<T>(steps: Steps<T>): T {
  for (;;) {
    const r = steps.next();
    if (r.done === true) return r.value;
  }
}

export async function finishSliced<T>(steps: Steps<T>, slicer: Slicer): Promise<T> {
  for (;;) {
    const r = steps.next();
    if (r.done === true) return r.value;
    if (slicer.dueNow()) await slicer.pause();
  }
}

/** Work units between two yields of a step function. */
export const STEP = 256;

/** Items a native sort handles in one step of `sortSteps`. */
const RUN = 2048;

/**
 * A stable sort in steps: runs of RUN items sorted natively, then merged pairwise (bottom-up merge
 * sort). Returns a sorted array (`items` itself when it is small, else a new one).
 */
export function* sortSteps<T>(items: T[], cmp: (a: T, b: T) => number): Steps<T[]> {
  const n = items.length;
  if (n <= RUN) return items.sort(cmp);
  let src = items.slice();
  for (let lo = 0; lo < n; lo += RUN) {
    const run = src.slice(lo, lo + RUN).sort(cmp);
    for (let i = 0; i < run.length; i++) src[lo + i] = run[i];
    yield;
  }
  let dst: T[] = new Array<T>(n);
  for (let width = RUN; width < n; width *= 2) {
    for (let lo = 0; lo < n; lo += 2 * width) {
      const mid = Math.min(n, lo + width);
      const hi = Math.min(n, lo + 2 * width);
      let i = lo;
      let j = mid;
      let k = lo;
      while (i < mid && j < hi) {
        dst[k++] = cmp(src[j], src[i]) < 0 ? src[j++] : src[i++];
        if (k % RUN === 0) yield;
      }
      while (i < mid) dst[k++] = src[i++];
      while (j < hi) dst[k++] = src[j++];
    }
    [src, dst] = [dst, src];
  }
  return src;
}
