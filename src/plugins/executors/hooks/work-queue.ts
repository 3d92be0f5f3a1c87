// The bounded work of a hook executor: at most `workers` jobs run at once, at most `capacity` more wait
// for a turn, and a job that finds no room is refused at once (the caller counts it as dropped and
// applies its error_mode) — a query never waits for room. Queued jobs start on a later turn of the
// event loop (setImmediate), so an asynchronous hook adds no I/O to the query that triggered it.
// close() stops taking jobs, lets those queued and running finish within a grace period, then aborts
// what still runs and drops what still waits.

import type { Cell } from "../../../observability/metrics.js";

export type Job = (signal: AbortSignal) => Promise<void>;

export class WorkQueue {
  private readonly waiting: (Job | undefined)[];
  private head = 0;
  private size = 0;
  private active = 0;
  private scheduled = false;
  private closed = false;
  private readonly abort = new AbortController();
  private idle: (() => void) | null = null;

  constructor(
    /** Jobs that may wait beyond those a free worker is about to start. */
    private readonly capacity: number,
    private readonly workers: number,
    /** Called for every job dropped when close() gives up on it. */
    private readonly onDropped: () => void,
    /** A gauge that follows the number of waiting jobs. */
    private readonly depth: Cell = { value: 0 },
  ) {
    this.waiting = new Array<Job | undefined>(Math.max(0, capacity) + workers);
  }

  /** No job can be queued now (full, or closed). */
  get full(): boolean {
    return this.closed || this.size >= this.capacity + Math.max(0, this.workers - this.active);
  }

  /** Aborted when close() gives up on running jobs. */
  get signal(): AbortSignal {
    return this.abort.signal;
  }

  /** Queues a job to run later; false when the queue is full or closed (nothing was queued). */
  offer(job: Job): boolean {
    if (this.full) return false;
    this.waiting[(this.head + this.size) % this.waiting.length] = job;
    this.size++;
    this.depth.value = this.size;
    if (!this.scheduled && this.active < this.workers) {
      this.scheduled = true;
      setImmediate(() => this.pump());
    }
    return true;
  }

  /**
   * Runs a job now when a worker is free, else queues it; the promise settles when the job has run.
   * Null when there is no room (or the queue is closed): nothing will run.
   */
  submit(job: Job): Promise<void> | null {
    if (this.closed) return null;
    if (this.active < this.workers && this.size === 0) return this.start(job);
    let resolve: () => void = () => undefined;
    let reject: (err: unknown) => void = () => undefined;
    const done = new Promise<void>((res, rej) => {
      resolve = res;
      reject = rej;
    });
    const queued = this.offer(async (signal) => {
      try {
        await job(signal);
        resolve();
      } catch (err) {
        reject(err);
        throw err;
      }
    });
    return queued ? done : null;
  }

  private start(job: Job): Promise<void> {
    this.active++;
    let run: Promise<void>;
    try {
      run = job(this.abort.signal);
    } catch (err) {
      run = Promise.reject(err instanceof Error ? err : new Error(String(err)));
    }
    const finish = (): void => {
      this.active--;
      this.pump();
    };
    run.then(finish, finish);
    return run;
  }

  private pump(): void {
    this.scheduled = false;
    while (this.size > 0 && this.active < this.workers) {
      const job = this.waiting[this.head] as Job;
      this.waiting[this.head] = undefined;
      this.head = (this.head + 1) % this.waiting.length;
      this.size--;
      this.depth.value = this.size;
      // A job's failure is its own business (it counts and logs it); the queue goes on.
      this.start(job).catch(() => undefined);
    }
    if (this.size === 0 && this.active === 0 && this.idle) this.idle();
  }

  /** Stops taking jobs; waits up to `graceMs` for the rest, then aborts running jobs and drops queued ones. */
  async close(graceMs: number): Promise<void> {
    this.closed = true;
    if (this.size === 0 && this.active === 0) return;
    const drained = new Promise<void>((resolve) => (this.idle = resolve));
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<"late">((resolve) => (timer = setTimeout(() => resolve("late"), graceMs)));
    const outcome = await Promise.race([drained, late]);
    clearTimeout(timer);
    if (outcome !== "late") return;
    for (; this.size > 0; this.size--) {
      this.waiting[this.head] = undefined;
      this.head = (this.head + 1) % this.waiting.length;
      this.onDropped();
    }
    this.depth.value = 0;
    this.abort.abort();
    if (this.active > 0) await drained;
  }
}
