// Reader processes for the API: at most MAX_READERS, each with one request at a time, started when
// needed and stopped when idle. A read that runs past READ_TIMEOUT_MS ends its process. They are
// processes so that all of a read's work, V8's collection of its garbage included, runs below DNS: at
// nice 19 and under SCHED_IDLE (priority.ts). They share Sluice's session, so its scheduler autogroup.
// A SCHED_IDLE reader gets no CPU while anything else of that group wants it (other busy programs
// started from Sluice's shell, or DNS flooded): a read whose process waited runnable for nearly all of
// 2 s while DNS did not keep the core (priority.ts) is taken back, its process stopped, and the read run
// again in a process at nice 19; new processes start at nice 19 until the pool has been empty (IDLE_MS
// without reads).
// How many wait is kept in `load`, a plain cell: the recorder:<tag> actor admits a read only while the pool is open
// (guard recorderReadersOpen) and fewer than MAX_WAITING wait (recorderReadersFree), else 503
// query_recorder_unavailable. An admitted read that cannot be completed (its process failed, it ran
// too long, the pool closed before it ran) fails with 503 query_recorder_read_failed.

import { fork, type ChildProcess } from "node:child_process";
import type { ReaderLoad } from "../../../../machines/recorder.machine.js";
import { RouteError } from "../../../registry/control.js";
import type { ReadRequest } from "./filters.js";
import { LINUX_WATCH, starvedSince, type StarvationWatch } from "./priority.js";
import { workerFile, type ReaderData, type ReaderMessage, type ReaderReply } from "./protocol.js";

/** Two: a dashboard's burst of stats requests overlaps, and DNS keeps a core on a 2-core host. */
export const MAX_READERS = 2;
export const MAX_WAITING = 32;
export const READ_TIMEOUT_MS = 30_000;
const IDLE_MS = 60_000;

interface Job {
  request: ReadRequest;
  resolve: (json: string) => void;
  reject: (err: Error) => void;
}

class Reader {
  readonly child: ChildProcess;
  job: (Job & { timer: NodeJS.Timeout }) | null = null;
  /** The read as the pool queued it, to run again elsewhere if this process starves. */
  queued: Job | null = null;
  idle: NodeJS.Timeout | null = null;
  /** While a read runs under SCHED_IDLE: looks for starvation each window. */
  private watch: NodeJS.Timeout | null = null;
  private nextId = 0;
  gone = false;
  readonly exited: Promise<void>;

  constructor(
    data: ReaderData,
    onGone: (r: Reader) => void,
    private readonly starvation: { watch: StarvationWatch; onStarved: (r: Reader) => void } | null,
  ) {
    // No inherited flags (a test runner's loaders); stderr shared, as a thread's was.
    this.child = fork(workerFile("reader-worker"), [], { execArgv: [], serialization: "advanced", stdio: ["ignore", "ignore", "inherit", "ipc"] });
    this.child.unref();
    this.child.channel?.unref();
    this.post({ t: "open", data, idle: starvation !== null });
    this.child.on("message", (m: ReaderReply) => {
      const job = this.take();
      if (!job) return;
      if (m.ok) job.resolve(m.json);
      else job.reject(new RouteError(m.code, m.message));
    });
    this.exited = new Promise((resolve) => {
      // "error" (it could not be started or signalled) may come with or without "exit".
      const end = (why: string): void => {
        if (this.gone) return;
        this.gone = true;
        this.take()?.reject(new RouteError("query_recorder_read_failed", why));
        onGone(this);
        resolve();
      };
      this.child.on("error", (err) => {
        end(`the recorder's reader failed: ${err.message}`);
        this.stop();
      });
      this.child.once("exit", () => end("the recorder's reader stopped"));
    });
  }

  private post(m: ReaderMessage): void {
    // A reader that is gone fails its job through "exit"; a send to it only reports that.
    if (this.child.connected) this.child.send(m, (err) => err && this.stop());
  }

  stop(): void {
    this.child.kill("SIGKILL");
  }

  private take(): Job | null {
    const job = this.job;
    if (job) clearTimeout(job.timer);
    if (this.watch) clearInterval(this.watch);
    this.watch = null;
    this.job = null;
    this.queued = null;
    return job;
  }

  /** The read it was running, as queued, without answering it; the process is stopped. */
  abandon(): Job | null {
    const queued = this.queued;
    this.take();
    this.stop();
    return queued;
  }

  private watchStarvation(): void {
    const s = this.starvation;
    const pid = this.child.pid;
    if (s === null || pid === undefined) return;
    this.watch = starvedSince(s.watch, pid, () => s.onStarved(this));
  }

  run(job: Job, queued: Job): void {
    if (this.idle) clearTimeout(this.idle);
    this.idle = null;
    const timer = setTimeout(() => {
      this.take()?.reject(new RouteError("query_recorder_read_failed", `the read took longer than ${READ_TIMEOUT_MS / 1000} s and was stopped`));
      this.stop();
    }, READ_TIMEOUT_MS);
    this.job = { ...job, timer };
    this.queued = queued;
    this.watchStarvation();
    this.post({ t: "read", id: ++this.nextId, request: job.request });
  }
}

export class ReaderPool {
  private readers: Reader[] = [];
  private readonly waiting: Job[] = [];
  /** Updated as reads queue and start and when the pool closes; read by the actor's admission guards. */
  readonly load: ReaderLoad = { open: true, waiting: 0, limit: MAX_WAITING };

  /** New processes run under SCHED_IDLE while this holds a watch; null after a starvation, until the pool is empty. */
  private idleWatch: StarvationWatch | null;

  constructor(
    private readonly data: ReaderData,
    private readonly watch: StarvationWatch | null = LINUX_WATCH,
  ) {
    this.idleWatch = watch;
  }

  /** Whether new reader processes run under SCHED_IDLE (false after a starvation, until the pool is empty). */
  get idlePolicy(): boolean {
    return this.idleWatch !== null;
  }

  /** A read that got no CPU under SCHED_IDLE: it runs again first, in a process at nice 19. */
  private starved(r: Reader): void {
    this.idleWatch = null;
    // Out of the pool now: its exit comes later, and its slot goes to the replacement.
    this.readers = this.readers.filter((x) => x !== r);
    const job = r.abandon();
    if (job) this.waiting.unshift(job);
    this.load.waiting = this.waiting.length;
    this.dispatch();
  }

  /** The response body (JSON text) for `request` (admitted by the actor); rejects with a RouteError. */
  read(request: ReadRequest): Promise<string> {
    // Admitted just before the pool closed: the read was taken, and fails.
    if (!this.load.open) return Promise.reject(new RouteError("query_recorder_read_failed", "the recorder stopped before the read ran"));
    return new Promise<string>((resolve, reject) => {
      this.waiting.push({ request, resolve, reject });
      this.dispatch();
      this.load.waiting = this.waiting.length;
    });
  }

  private dispatch(): void {
    while (this.waiting.length > 0) {
      let reader = this.readers.find((r) => r.job === null && !r.gone);
      if (!reader && this.readers.length < MAX_READERS) {
        const w = this.idleWatch;
        reader = new Reader(
          this.data,
          (r) => {
            this.readers = this.readers.filter((x) => x !== r);
            // The pool emptied (its readers idle): the next ones try SCHED_IDLE again.
            if (this.readers.length === 0 && this.waiting.length === 0) this.idleWatch = this.watch;
            this.dispatch();
          },
          w === null ? null : { watch: w, onStarved: (r) => this.starved(r) },
        );
        this.readers.push(reader);
      }
      if (!reader) return;
      const job = this.waiting.shift() as Job;
      this.load.waiting = this.waiting.length;
      const r = reader;
      r.run(
        {
          request: job.request,
          resolve: (json) => {
            job.resolve(json);
            this.finished(r);
          },
          reject: (err) => {
            job.reject(err);
            this.finished(r);
          },
        },
        job,
      );
    }
  }

  private finished(r: Reader): void {
    if (!r.gone) {
      r.idle = setTimeout(() => r.stop(), IDLE_MS);
      r.idle.unref();
    }
    this.dispatch();
  }

  async close(): Promise<void> {
    this.load.open = false;
    for (const job of this.waiting.splice(0)) job.reject(new RouteError("query_recorder_read_failed", "the recorder stopped before the read ran"));
    this.load.waiting = 0;
    await Promise.all(
      this.readers.map((r) => {
        r.stop();
        return r.exited;
      }),
    );
    this.readers = [];
  }
}
