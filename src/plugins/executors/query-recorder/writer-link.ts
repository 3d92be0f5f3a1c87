// The DNS thread's handle on one writer thread: start it (resolves once the database is open and
// migrated), send it batches and requests, read what it has committed (`progress`, shared memory:
// progress.ts) and learn when it answers or ends.

import { Worker } from "node:worker_threads";
import { LINUX_WATCH, normalPolicy, starvedSince, type StarvationWatch } from "./priority.js";
import { WriterProgress } from "./progress.js";
import { workerFile, type WriterData, type WriterReply, type WriterRequest, type WriterThreadData } from "./protocol.js";

export interface WriterHandlers {
  /** Rows in the database after a clear or a cleanup. */
  records(n: number): void;
  replay(m: Extract<WriterReply, { t: "replay" }>): void;
  frames(m: Extract<WriterReply, { t: "frames" }>): void;
  log(m: Extract<WriterReply, { t: "log" }>): void;
  /** The thread ended; `error` unless it was asked to close. Not called for a thread that never became ready. */
  exit(error: Error | null): void;
}

/** A closing writer finishes what it holds; past this it is stopped. */
const CLOSE_TIMEOUT_MS = 10_000;

export class WriterLink {
  private readonly worker: Worker;
  private readonly pending = new Map<number, { resolve: (n: number) => void; reject: (e: Error) => void }>();
  private nextId = 0;
  private isReady = false;
  private closing = false;
  gone = false;
  /** Resolves with the row count and file size once the database is open. */
  readonly ready: Promise<{ records: number; dbBytes: number }>;
  readonly exited: Promise<void>;
  /** What the thread has committed; still readable once it has ended. */
  readonly progress = new WriterProgress();

  /** While the thread runs under SCHED_IDLE: looks for starvation (priority.ts). */
  private watch: NodeJS.Timeout | null = null;

  /** `watch`: how a starved SCHED_IDLE writer is told (injected by tests); starved, it moves to the normal policy at nice 10. */
  constructor(data: WriterData, handlers: WriterHandlers, watch: StarvationWatch | null = LINUX_WATCH) {
    const threadData: WriterThreadData = { ...data, progress: this.progress.buffer };
    this.worker = new Worker(workerFile("writer-worker"), { workerData: threadData, stdout: false, stderr: false });
    let failStart: (e: Error) => void = () => undefined;
    let lastError: Error | null = null;
    this.ready = new Promise((resolve, reject) => {
      failStart = reject;
      // Log lines may come first (PostgreSQL unreachable at start).
      const onReady = (m: WriterReply): void => {
        if (m.t !== "ready") return;
        this.worker.off("message", onReady);
        this.isReady = true;
        const tid = m.idleThread;
        if (tid !== null && watch !== null) this.watch = starvedSince(watch, tid, () => this.starved(tid, handlers));
        resolve({ records: m.records, dbBytes: m.dbBytes });
      };
      this.worker.on("message", onReady);
    });
    // The caller may never wait for ready (a restart that fails again is reported through exit).
    this.ready.catch(() => undefined);
    this.worker.on("message", (m: WriterReply) => {
      switch (m.t) {
        case "replay":
          return handlers.replay(m);
        case "frames":
          return handlers.frames(m);
        case "log":
          if (m.level === "error") lastError = new Error(m.err);
          return handlers.log(m);
        case "done": {
          handlers.records(m.records);
          const p = this.pending.get(m.id);
          this.pending.delete(m.id);
          if (m.ok) p?.resolve(m.value);
          else p?.reject(new Error(m.message));
          return;
        }
      }
    });
    this.worker.on("error", (err) => {
      lastError = err;
    });
    this.exited = new Promise((resolve) => {
      this.worker.once("exit", (code) => {
        this.gone = true;
        this.stopWatch();
        const err = this.closing && code === 0 ? null : (lastError ?? new Error(`the writer thread exited with code ${code}`));
        for (const p of this.pending.values()) p.reject(err ?? new Error("the writer was closed"));
        this.pending.clear();
        if (!this.isReady) failStart(err ?? new Error("the writer closed before the database was open"));
        else handlers.exit(err);
        resolve();
      });
    });
  }

  /**
   * The writer got no CPU under SCHED_IDLE: busy programs of Sluice's scheduling group, or DNS using every
   * core. It goes back to the normal policy (at its nice 10), once; unprivileged that needs an RLIMIT_NICE
   * of 10 (the Debian unit's LimitNICE=+10), else it stays and the log says so.
   */
  private starved(tid: number, handlers: WriterHandlers): void {
    this.stopWatch();
    normalPolicy(tid).then(
      () => handlers.log({ t: "log", level: "warn", msg: "query recorder writer got no CPU under SCHED_IDLE; it runs at nice 10 from now on", err: "" }),
      (err: unknown) => handlers.log({ t: "log", level: "warn", msg: "query recorder writer gets no CPU under SCHED_IDLE and could not leave it (RLIMIT_NICE); records are dropped while it starves", err: err instanceof Error ? err.message : String(err) }),
    );
  }

  private stopWatch(): void {
    if (this.watch) clearInterval(this.watch);
    this.watch = null;
  }

  post(m: WriterRequest, transfer: ArrayBuffer[] = []): void {
    if (!this.gone && !this.closing) this.worker.postMessage(m, transfer);
  }

  /** A request with an answer (a count), in order with the batches sent before it. */
  request(m: { t: "clear" } | { t: "cleanup"; now: number }): Promise<number> {
    if (this.gone || this.closing) return Promise.reject(new Error("the writer is not running"));
    const id = ++this.nextId;
    return new Promise<number>((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.worker.postMessage({ ...m, id });
    });
  }

  /** Lets the writer finish what it holds, close the database and end; stops it after CLOSE_TIMEOUT_MS. */
  close(): Promise<void> {
    if (!this.gone && !this.closing) {
      this.worker.postMessage({ t: "close" } satisfies WriterRequest);
      this.closing = true;
      const timer = setTimeout(() => void this.worker.terminate(), CLOSE_TIMEOUT_MS);
      timer.unref();
      void this.exited.then(() => clearTimeout(timer));
    }
    return this.exited;
  }
}
