// Runs configuration validations in worker threads, off the event loop that serves DNS. Each worker
// has a heap cap and each job a time limit (api.http.limits); over either, the worker is gone and
// its memory with it. Jobs come one at a time from the validation queue actor
// (machines/validation.machine.ts), which also refuses the ones past its room.

import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { Worker } from "node:worker_threads";
import { WORKER_READY, WORKER_ROLE, type ValidationJob, type ValidationOutcome, type ValidatorLimits, type WorkerReply, type WorkerRequest } from "../config/validation.js";
import type { Logger } from "../observability/logger.js";
import type { BuildSelection } from "../registry/bundles.js";

/** An idle worker is kept this long for the next job: a fresh one spends ~100 ms loading modules. */
const IDLE_MS = 30_000;
/** A worker whose heap grew past this is retired after its job, so the memory goes back at once. */
const REUSE_BELOW_HEAP_BYTES = 64 * 1024 * 1024;
/** Loading the modules is not the job's time; this only catches a worker that never starts. */
const STARTUP_TIMEOUT_MS = 30_000;

const here = fileURLToPath(import.meta.url);
// Compiled, the worker sits beside this file; run from the TypeScript sources (vitest), the compiled copy in dist/ serves.
export const WORKER_FILE = here.endsWith(".ts") ? resolve(dirname(here), "..", "..", "dist", "src", "app", "validate-worker.js") : join(dirname(here), "validate-worker.js");

/** One worker thread and its single job at a time. */
class ValidationWorker {
  private readonly worker: Worker;
  readonly ready: Promise<boolean>;
  private settle: ((o: ValidationOutcome) => void) | null = null;
  private nextId = 0;
  exited = false;
  /** Heap size the last job left behind. */
  heapBytes = 0;

  constructor(readonly memoryMb: number) {
    this.worker = new Worker(WORKER_FILE, { workerData: WORKER_ROLE, resourceLimits: { maxOldGenerationSizeMb: memoryMb }, stdout: false, stderr: false });
    this.worker.unref();
    this.ready = new Promise<boolean>((resolveReady) => {
      const timer = setTimeout(() => resolveReady(false), STARTUP_TIMEOUT_MS);
      const done = (ok: boolean): void => {
        clearTimeout(timer);
        resolveReady(ok);
      };
      this.worker.once("message", (m: unknown) => done(m === WORKER_READY));
      this.worker.once("exit", () => done(false));
    });
    this.worker.on("message", (m: WorkerReply | typeof WORKER_READY) => {
      if (m === WORKER_READY) return;
      this.heapBytes = m.heapBytes;
      this.finish(m.outcome);
    });
    this.worker.on("error", (err: Error & { code?: string }) => {
      this.finish(err.code === "ERR_WORKER_OUT_OF_MEMORY" ? { ok: false, kind: "too_complex", limit: "memory" } : { ok: false, kind: "failed", message: err.message });
    });
    this.worker.on("exit", () => {
      this.exited = true;
      this.finish({ ok: false, kind: "failed", message: "the validation worker exited" });
    });
  }

  private finish(outcome: ValidationOutcome): void {
    const settle = this.settle;
    this.settle = null;
    settle?.(outcome);
  }

  /** Runs one job; past `timeoutMs` the worker is terminated and the job is too complex. */
  run(job: ValidationJob, build: BuildSelection, transfer: ArrayBuffer[], timeoutMs: number): Promise<ValidationOutcome> {
    return new Promise<ValidationOutcome>((resolveJob) => {
      const timer = setTimeout(() => {
        this.finish({ ok: false, kind: "too_complex", limit: "time" });
        void this.terminate();
      }, timeoutMs);
      this.settle = (o) => {
        clearTimeout(timer);
        resolveJob(o);
      };
      const request: WorkerRequest = { id: ++this.nextId, job, build };
      try {
        this.worker.postMessage(request, transfer);
      } catch {
        // Not every buffer can be moved (pooled ones); a copy does.
        this.worker.postMessage(request);
      }
    });
  }

  async terminate(): Promise<void> {
    this.exited = true;
    await this.worker.terminate();
  }
}

export class ConfigValidator {
  private idle: { worker: ValidationWorker; timer: NodeJS.Timeout } | null = null;
  private readonly busy = new Set<ValidationWorker>();
  private closed = false;

  constructor(
    private readonly limitsNow: () => ValidatorLimits,
    private readonly build: BuildSelection,
    private readonly log: Logger,
  ) {}

  /** The heap cap and time limit the next job gets (they follow reloads). */
  limits(): ValidatorLimits {
    return this.limitsNow();
  }

  /**
   * Validates in a worker; one job at a time per validator (the app's queue actor, or the replica
   * follower's own validator, serialises them). `transfer` lists buffers of the job that may be moved
   * rather than copied.
   */
  async run(job: ValidationJob, transfer: ArrayBuffer[] = []): Promise<ValidationOutcome> {
    if (this.closed) return { ok: false, kind: "failed", message: "the application is stopping" };
    return this.execute(job, transfer);
  }

  private async execute(job: ValidationJob, transfer: ArrayBuffer[]): Promise<ValidationOutcome> {
    const limits = this.limits();
    const worker = this.takeIdle(limits.parseMemoryMb) ?? new ValidationWorker(limits.parseMemoryMb);
    this.busy.add(worker);
    let outcome: ValidationOutcome;
    try {
      outcome = (await worker.ready) ? await worker.run(job, this.build, transfer, limits.parseTimeoutMs) : { ok: false, kind: "failed", message: "the validation worker did not start" };
    } finally {
      this.busy.delete(worker);
    }
    if (this.closed) return outcome;
    const healthy = !worker.exited && (outcome.ok || outcome.kind === "invalid" || outcome.kind === "request");
    if (healthy && worker.heapBytes < REUSE_BELOW_HEAP_BYTES) this.keepIdle(worker);
    else void worker.terminate();
    if (!outcome.ok && outcome.kind === "too_complex") {
      const { parseTimeoutMs: timeout_ms, parseMemoryMb: memory_mb } = limits;
      this.log.warn({ target: "config", job: job.kind, limit: outcome.limit, timeout_ms, memory_mb }, "configuration validation stopped: too complex");
    } else if (!outcome.ok && outcome.kind === "failed") {
      this.log.error({ target: "config", err: outcome.message }, "configuration validation failed");
    }
    return outcome;
  }

  private takeIdle(memoryMb: number): ValidationWorker | null {
    const idle = this.idle;
    if (!idle) return null;
    this.idle = null;
    clearTimeout(idle.timer);
    // A reload may have changed the heap cap; a worker made under the old one is not reused.
    if (idle.worker.memoryMb === memoryMb && !idle.worker.exited) return idle.worker;
    void idle.worker.terminate();
    return null;
  }

  private keepIdle(worker: ValidationWorker): void {
    if (this.idle) void this.idle.worker.terminate();
    clearTimeout(this.idle?.timer);
    const timer = setTimeout(() => {
      if (this.idle?.worker === worker) this.idle = null;
      void worker.terminate();
    }, IDLE_MS);
    timer.unref();
    this.idle = { worker, timer };
  }

  /** Terminates every worker. */
  async close(): Promise<void> {
    this.closed = true;
    const workers = [...this.busy];
    if (this.idle) {
      clearTimeout(this.idle.timer);
      workers.push(this.idle.worker);
      this.idle = null;
    }
    await Promise.all(workers.map((w) => w.terminate()));
  }
}
