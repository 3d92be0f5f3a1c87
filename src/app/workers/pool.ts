// The primary's data-plane workers: one `worker:<n>` actor each (machines/worker.machine.ts) whose
// `process` forks the worker (./main.ts) through node:cluster, so the workers share the primary's
// listening handles (TCP round-robin; UDP one socket the kernel wakes a reader of). The pool routes
// what workers send (plugin messages to the plugin's taker, answers, log lines) and fans out what the
// primary's actors did (runtime changes, reloads) to every worker that serves.

import cluster, { type Worker } from "node:cluster";
import { fileURLToPath } from "node:url";
import { createActor, fromCallback, waitFor, type Actor } from "xstate";
import { busInspector } from "../../../actors/inspect.js";
import { workerMachine, workerState, STOP_TIMEOUT_MS, type WorkerProcessCommand } from "../../../machines/worker.machine.js";
import type { Bus } from "../../bus.js";
import type { SharedChange } from "../../cluster/cluster.js";
import type { Logger } from "../../observability/logger.js";
import type { MetricsSnapshot, WorkerMetrics } from "../../observability/metrics.js";
import { ANSWER, ChannelHandlers, isChannelMessage, type ChannelMessage, type ProcessRole, type ServerAddress, type WorkerAnswer, type WorkersStatus } from "../../registry/process-role.js";
import { LOGS_MESSAGE } from "./log-forward.js";
import { isReady, WORKER_ENV, type WorkerStart } from "./protocol.js";

export type WorkerActor = Actor<typeof workerMachine>;

/** How long the primary waits for a worker's metrics before showing the others'. */
const METRICS_TIMEOUT_MS = 2000;

export interface PoolOptions {
  count: number;
  start: Omit<WorkerStart, "index">;
  log: Logger;
  bus: Bus;
  clock: () => number;
  /** A worker process serves its first generation: `tell` it the changes that bring it to the primary's state. */
  resync(tell: (change: SharedChange) => void): void;
  /** A worker's `reload` executor ran (the primary reloads; the workers follow). */
  requestReload(): void;
  /** A worker's batch of log lines (./log-forward.ts). */
  logs(message: ChannelMessage, worker: number): void;
}

function send(worker: Worker, message: ChannelMessage): boolean {
  if (!worker.isConnected()) return false;
  // With a callback, a channel that closes meanwhile is that callback's error, not the worker's 'error' event.
  worker.send(message, () => undefined);
  return true;
}

export class WorkerPool {
  readonly actors: WorkerActor[] = [];
  readonly role: Extract<ProcessRole, { kind: "primary" }>;
  private readonly handlers = new ChannelHandlers();
  /** The process of each slot that said it serves. */
  private readonly serving = new Map<number, Worker>();
  private readonly addresses = new Map<string, ServerAddress>();
  private nextQuestion = 0;
  /** Questions (askWorkers) waiting for a worker's answer, by id. */
  private readonly waiting = new Map<number, (answer: ChannelMessage | null) => void>();

  constructor(private readonly options: PoolOptions) {
    this.role = {
      kind: "primary",
      workers: options.count,
      channel: { send: (m) => this.broadcast(m) > 0, listen: (t, key, handler) => this.handlers.listen(t, key, handler) },
      serverAddress: (tag) => this.addresses.get(tag) ?? null,
      askWorkers: (message, timeoutMs) => this.askWorkers(message, timeoutMs),
    };
  }

  /** Forks every worker; resolves once each has served or failed once, with how many serve. */
  async start(): Promise<number> {
    cluster.setupPrimary({ exec: fileURLToPath(new URL("./main.js", import.meta.url)), serialization: "advanced" });
    const logic = workerMachine.provide({ actors: { process: this.processLogic() } });
    for (let index = 1; index <= this.options.count; index++) {
      const actor = createActor(logic, { systemId: `worker:${index}`, input: { index, clock: this.options.clock }, inspect: busInspector(this.options.bus) });
      this.logChanges(actor);
      this.actors.push(actor);
      actor.start();
    }
    const first = await Promise.all(this.actors.map((a) => waitFor(a, (s) => s.status === "done" || !s.matches({ up: "starting" }), { timeout: Infinity })));
    return first.filter((s) => s.matches({ up: "running" })).length;
  }

  /** What the first worker that failed to start said. */
  firstError(): string | null {
    for (const a of this.actors) {
      const c = a.getSnapshot().context;
      if (c.last_error) return c.last_error;
      if (c.last_exit) return `worker ${c.index} exited with ${c.last_exit.signal ?? `code ${c.last_exit.code}`}`;
    }
    return null;
  }

  private logChanges(actor: WorkerActor): void {
    let state = "";
    actor.subscribe((snap) => {
      const next = snap.status === "done" ? "stopped" : workerState(snap.value);
      if (next === state) return;
      const from = state;
      state = next;
      const c = snap.context;
      const log = this.options.log;
      if (next === "running") log.info({ target: "workers", worker: c.index, pid: c.pid }, "data-plane worker serving");
      else if (next === "waiting") log.warn({ target: "workers", worker: c.index, code: c.last_exit?.code, signal: c.last_exit?.signal, err: c.last_error ?? undefined, restart_in_ms: c.delay_ms }, from === "starting" ? "data-plane worker failed to start; starting it again" : "data-plane worker ended; starting it again");
    });
  }

  /** The `process` of a worker actor: one forked worker, its messages and its end. */
  private processLogic() {
    return fromCallback<WorkerProcessCommand, { index: number }>(({ input, sendBack, receive }) => {
      const start: WorkerStart = { ...this.options.start, index: input.index };
      const worker = cluster.fork({ [WORKER_ENV]: JSON.stringify(start) });
      worker.on("message", (m: unknown) => {
        if (!isChannelMessage(m)) return;
        if (m.key !== "") return this.fromPlugin(worker, m);
        if (isReady(m)) {
          this.serving.set(input.index, worker);
          for (const [tag, address] of Object.entries(m.servers)) this.addresses.set(tag, address);
          if (m.generation === 1) this.options.resync((change) => send(worker, { t: "change", key: "", change }));
          sendBack({ type: "WORKER.READY", pid: m.pid });
        } else if (m.t === "failed" && typeof m.error === "string") sendBack({ type: "WORKER.FAILED", error: m.error });
        else if (m.t === "reload?") this.options.requestReload();
        else if (m.t === LOGS_MESSAGE) this.options.logs(m, input.index);
        else if (m.t === ANSWER && typeof m.id === "number") this.waiting.get(m.id)?.(m);
      });
      // The channel's errors (a message to a worker that just ended) change nothing: its exit is what counts.
      worker.on("error", () => undefined);
      worker.on("exit", (code: number | null, signal: string | null) => {
        if (this.serving.get(input.index) === worker) this.serving.delete(input.index);
        sendBack({ type: "WORKER.EXITED", code, signal });
      });
      receive((command) => {
        if (command.type === "STOP") {
          if (!send(worker, { t: "stop", key: "" })) worker.process.kill("SIGTERM");
        } else worker.process.kill("SIGKILL");
      });
      return () => {
        if (!worker.isDead()) worker.process.kill("SIGKILL");
      };
    });
  }

  /**
   * A plugin's message (a recorder's batch) to its taker here. One nobody takes (the plugin is gone)
   * but that counts records (`batch.count`, answered at `ackKey`) is answered as all lost, so the worker stops counting them.
   */
  private fromPlugin(worker: Worker, m: ChannelMessage): void {
    const reply = (r: ChannelMessage): boolean => send(worker, r);
    if (this.handlers.dispatch(m, reply)) return;
    const batch = m.batch as { count?: unknown } | undefined;
    if (typeof batch?.count === "number" && typeof m.ackKey === "string") reply({ t: `${m.t}.ack`, key: m.ackKey, count: batch.count, lost: batch.count });
  }

  /** Sends to every serving worker; how many took it. */
  broadcast(message: ChannelMessage): number {
    let n = 0;
    for (const w of this.serving.values()) if (send(w, message)) n++;
    return n;
  }

  /** Every serving worker builds the configuration file's new generation (the primary's is ready). */
  reload(): void {
    this.broadcast({ t: "reload", key: "" });
  }

  /** A change one of the primary's concern actors took, replayed by each worker's. */
  change(change: SharedChange): void {
    this.broadcast({ t: "change", key: "", change });
  }

  /** Each serving worker's metrics (one that does not answer in time is left out). */
  async metrics(): Promise<WorkerMetrics[]> {
    return (await this.askWorkers({ t: "metrics?", key: "" }, METRICS_TIMEOUT_MS)).map((a) => ({ worker: a.worker, snapshot: a.answer.snapshot as MetricsSnapshot }));
  }

  /** ProcessRole's askWorkers: each serving worker is asked under an id of its own. */
  async askWorkers(message: ChannelMessage, timeoutMs: number): Promise<WorkerAnswer[]> {
    const asks = [...this.serving.entries()].map(
      ([worker, w]) =>
        new Promise<WorkerAnswer | null>((resolve) => {
          const id = ++this.nextQuestion;
          const timer = setTimeout(() => done(null), timeoutMs);
          const done = (answer: ChannelMessage | null): void => {
            clearTimeout(timer);
            this.waiting.delete(id);
            // A worker that has no taker for the question answers `none`.
            resolve(answer === null || answer.none === true ? null : { worker, answer });
          };
          this.waiting.set(id, done);
          if (!send(w, { ...message, id })) done(null);
        }),
    );
    return (await Promise.all(asks)).filter((a): a is WorkerAnswer => a !== null).sort((a, b) => a.worker - b.worker);
  }

  status(): WorkersStatus {
    let alive = 0;
    let restarts = 0;
    for (const a of this.actors) {
      const s = a.getSnapshot();
      if (s.status === "active" && s.matches({ up: "running" })) alive++;
      restarts += s.context.restarts;
    }
    return { expected: this.options.count, alive, restarts };
  }

  /** Every worker drains and exits (killed past STOP_TIMEOUT_MS); resolves when all have. */
  async stop(): Promise<void> {
    for (const a of this.actors) if (a.getSnapshot().status === "active") a.send({ type: "STOP" });
    await Promise.all(this.actors.map((a) => waitFor(a, (s) => s.status === "done", { timeout: STOP_TIMEOUT_MS + 5000 }).catch(() => a.stop())));
  }
}
