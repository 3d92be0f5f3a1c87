// One data-plane worker process (src/app/workers/) as the primary sees it, shown as `worker:<n>`:
//   up (starting → running) —exit→ waiting —restart delay→ up; STOP: up.stopping —exit→ stopped.
// The process is the invoked actor `process` (provided by src/app/workers/pool.ts): it forks the
// worker, tells WORKER.READY once the worker serves and WORKER.EXITED when it ends, and takes STOP
// (drain and exit) and KILL. A worker that ends without being asked is started again after a delay
// that doubles with each quick exit, from RESTART_MIN_MS to RESTART_MAX_MS, and falls back to the
// minimum once a worker has run STABLE_MS. This file has no I/O; time is the clock in the input.

import { assign, fromCallback, sendTo, setup } from "xstate";

export const RESTART_MIN_MS = 500;
export const RESTART_MAX_MS = 30_000;
/** A worker that ran this long before it ended restarts after the minimum delay again. */
export const STABLE_MS = 30_000;
/** A stopping worker that has not ended (its listeners drained) by then is killed. */
export const STOP_TIMEOUT_MS = 15_000;

export interface WorkerExit {
  code: number | null;
  signal: string | null;
  at_ms: number;
}

export interface WorkerContext {
  index: number;
  clock: () => number;
  pid: number | null;
  /** Processes started for this slot so far. */
  starts: number;
  /** Of which restarts after an exit nobody asked for. */
  restarts: number;
  /** Unix ms when the current process said it serves (null while starting). */
  ready_at_ms: number | null;
  /** Unix ms when the current process was started. */
  started_at_ms: number | null;
  last_exit: WorkerExit | null;
  /** What the last process said before it failed to start, if it did. */
  last_error: string | null;
  /** Wait before the next restart. */
  delay_ms: number;
}

export type WorkerEvent =
  | { type: "WORKER.READY"; pid: number }
  | { type: "WORKER.FAILED"; error: string }
  | { type: "WORKER.EXITED"; code: number | null; signal: string | null }
  | { type: "STOP" };

/** What the process actor takes. */
export type WorkerProcessCommand = { type: "STOP" } | { type: "KILL" };

export const workerMachine = setup({
  types: {
    context: {} as WorkerContext,
    events: {} as WorkerEvent,
    input: {} as { index: number; clock: () => number },
  },
  actors: {
    process: fromCallback<WorkerProcessCommand, { index: number }>(() => {
      throw new Error("not provided");
    }),
  },
  delays: {
    restartDelay: ({ context }) => context.delay_ms,
    stopTimeout: STOP_TIMEOUT_MS,
  },
  actions: {
    recordStart: assign(({ context }) => ({ starts: context.starts + 1, started_at_ms: context.clock(), ready_at_ms: null, pid: null })),
    recordReady: assign(({ context, event }) => ({ ready_at_ms: context.clock(), pid: event.type === "WORKER.READY" ? event.pid : context.pid, last_error: null })),
    recordFailure: assign({ last_error: ({ event }) => (event.type === "WORKER.FAILED" ? event.error.slice(0, 2000) : null) }),
    recordExit: assign(({ context, event }) => {
      const at = context.clock();
      const exit = event.type === "WORKER.EXITED" ? { code: event.code, signal: event.signal, at_ms: at } : null;
      const stable = context.started_at_ms !== null && at - context.started_at_ms >= STABLE_MS;
      const delay = stable || context.starts <= 1 ? RESTART_MIN_MS : Math.min(RESTART_MAX_MS, context.delay_ms * 2);
      return { last_exit: exit, pid: null, ready_at_ms: null, delay_ms: delay };
    }),
    countRestart: assign({ restarts: ({ context }) => context.restarts + 1 }),
    askStop: sendTo("process", { type: "STOP" }),
    kill: sendTo("process", { type: "KILL" }),
  },
}).createMachine({
  id: "worker",
  initial: "up",
  context: ({ input }) => ({
    index: input.index,
    clock: input.clock,
    pid: null,
    starts: 0,
    restarts: 0,
    ready_at_ms: null,
    started_at_ms: null,
    last_exit: null,
    last_error: null,
    delay_ms: RESTART_MIN_MS,
  }),
  states: {
    up: {
      entry: "recordStart",
      invoke: { id: "process", src: "process", input: ({ context }) => ({ index: context.index }) },
      initial: "starting",
      on: {
        "WORKER.FAILED": { actions: "recordFailure" },
        "WORKER.EXITED": { target: "waiting", actions: "recordExit" },
        STOP: ".stopping",
      },
      states: {
        starting: { on: { "WORKER.READY": { target: "running", actions: "recordReady" } } },
        // A reload or a new address is told again as WORKER.READY.
        running: { on: { "WORKER.READY": { actions: "recordReady" } } },
        stopping: {
          entry: "askStop",
          on: { STOP: {}, "WORKER.EXITED": { target: "#worker.stopped", actions: "recordExit" } },
          after: { stopTimeout: { actions: "kill" } },
        },
      },
    },
    waiting: {
      after: { restartDelay: { target: "up", actions: "countRestart" } },
      on: { STOP: "stopped" },
    },
    stopped: { type: "final" },
  },
});

/** The state `/api/actors` and the health record name: starting, running, stopping, waiting, stopped. */
export function workerState(value: unknown): string {
  if (typeof value === "string") return value;
  if (value !== null && typeof value === "object") {
    const inner = (value as Record<string, unknown>).up;
    if (typeof inner === "string") return inner;
  }
  return "unknown";
}
