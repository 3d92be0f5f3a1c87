// The configuration validation queue (systemId `validation`): POST /api/config/validate and every
// validating save (PUT /api/config) ask it, and it runs their jobs one at a time in a worker thread
// (a validation may take a core; DNS keeps the other on a 2-core host). Up to `maxWaiting` jobs wait
// behind the one running; one more is refused by the guard validationQueueHasRoom (HTTP 503
// config_validation_busy). The `validate` actor is provided by actors/app.actor.ts.

import { assign, emit, fromPromise, setup } from "xstate";
import { doneAnswer, failedAnswer, type Answer, type Asked } from "./concern.js";

/** One validation: the job and the buffers it may move to the worker (src/config/validation.ts). */
export interface ValidationRequest {
  job: unknown;
  transfer: ArrayBuffer[];
}

/** Jobs that may wait behind the running one (more are refused). */
export const VALIDATION_MAX_WAITING = 4;

export type ValidationEvent = { type: "VALIDATE" } & ValidationRequest & Asked;

interface Queued extends ValidationRequest {
  requestId: string;
}

export interface ValidationContext {
  /** The job running (first) and the ones waiting, in order. Their texts stay out of /api/actors (shown as a count). */
  queue: Queued[];
  maxWaiting: number;
  validations: number;
}

export const validationMachine = setup({
  types: {
    context: {} as ValidationContext,
    events: {} as ValidationEvent,
    emitted: {} as Answer,
    input: {} as { maxWaiting: number },
  },
  actors: {
    validate: fromPromise<unknown, ValidationRequest>(() => Promise.reject(new Error("validation is not available"))),
  },
  guards: {
    /** Room behind the running job; a job past it is refused (HTTP 503), never dropped silently. */
    validationQueueHasRoom: ({ context }) => context.queue.length <= context.maxWaiting,
    validationQueued: ({ context }) => context.queue.length > 0,
  },
  actions: {
    enqueue: assign({ queue: ({ context, event }) => [...context.queue, { requestId: event.requestId, job: event.job, transfer: event.transfer }] }),
    answerDone: emit(({ context, event }) => doneAnswer(context.queue[0]?.requestId ?? null, event)),
    answerFailed: emit(({ context, event }) => failedAnswer(context.queue[0]?.requestId ?? null, event)),
    dequeue: assign({ queue: ({ context }) => context.queue.slice(1), validations: ({ context }) => context.validations + 1 }),
  },
}).createMachine({
  id: "validation",
  initial: "idle",
  context: ({ input }) => ({ queue: [], maxWaiting: input.maxWaiting, validations: 0 }),
  on: {
    VALIDATE: { guard: "validationQueueHasRoom", actions: "enqueue" },
  },
  states: {
    idle: { always: { guard: "validationQueued", target: "validating" } },
    validating: {
      invoke: {
        src: "validate",
        input: ({ context }) => {
          const head = context.queue[0];
          return { job: head?.job, transfer: head?.transfer ?? [] };
        },
        onDone: { target: "idle", actions: ["answerDone", "dequeue"] },
        onError: { target: "idle", actions: ["answerFailed", "dequeue"] },
      },
    },
  },
});
