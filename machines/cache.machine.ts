// A cache's operations from the API: flush, delete one entry, dump, load a dump. One at a time, so a
// dump never interleaves with a load (a request while one runs: HTTP 409 cache_busy). Reads of
// entries go straight to the cache. The `operate` actor is provided by the cache's control
// (src/plugins/executors/cache/control.ts).

import { assign, emit, fromPromise, setup, stateIn } from "xstate";
import { doneAnswer, failedAnswer, type Answer, type Asked } from "./concern.js";

/** `from_peer`: a flush made on another instance of the cluster (that one already cleared the shared Redis level). */
/** `source`: the dump's bytes as they arrive (the request body, read only by the load itself). */
export type CacheOperation =
  | { type: "CACHE.FLUSH"; from_peer?: boolean }
  | { type: "CACHE.DELETE"; id: string }
  | { type: "CACHE.DUMP" }
  | { type: "CACHE.LOAD"; source: AsyncIterable<Uint8Array> };

export type CacheEvent = CacheOperation & Asked;

export interface CacheContext {
  tag: string;
  requestId: string | null;
  /** The operation running now (its event type), for /api/actors. */
  operation: string | null;
}

export const cacheMachine = setup({
  types: {
    context: {} as CacheContext,
    events: {} as CacheEvent,
    emitted: {} as Answer,
    input: {} as { tag: string },
  },
  actors: {
    operate: fromPromise<unknown, CacheOperation>(() => Promise.reject(new Error("not provided"))),
  },
  guards: {
    cacheIdle: stateIn("idle"),
  },
  actions: {
    start: assign({ requestId: ({ event }) => event.requestId, operation: ({ event }) => event.type }),
    answerDone: emit(({ context, event }) => doneAnswer(context.requestId, event)),
    answerFailed: emit(({ context, event }) => failedAnswer(context.requestId, event)),
  },
}).createMachine({
  id: "cache",
  initial: "idle",
  context: ({ input }) => ({ tag: input.tag, requestId: null, operation: null }),
  on: {
    "CACHE.FLUSH": { guard: "cacheIdle", target: ".working", actions: "start" },
    "CACHE.DELETE": { guard: "cacheIdle", target: ".working", actions: "start" },
    "CACHE.DUMP": { guard: "cacheIdle", target: ".working", actions: "start" },
    "CACHE.LOAD": { guard: "cacheIdle", target: ".working", actions: "start" },
  },
  states: {
    idle: { entry: assign({ requestId: null, operation: null }) },
    working: {
      invoke: {
        src: "operate",
        // The operation (a dump's byte stream included) travels as input only, never into context.
        input: ({ event }) => {
          const { requestId: _id, ...op } = event;
          return op;
        },
        onDone: { target: "idle", actions: "answerDone" },
        onError: { target: "idle", actions: "answerFailed" },
      },
    },
  },
});
