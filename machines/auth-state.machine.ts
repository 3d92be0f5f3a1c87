// The writer of the API's auth state file (tokens and sessions, src/api/auth/credentials.ts): the
// `auth-state` actor. A change someone waits for (a token made or revoked, a sign-in, a sign-out)
// is asked with AUTH.SAVE and answered once the file holding it is on disk; last-used times
// (AUTH.TOUCHED) are written at most once per `touchDelayMs`. One write at a time: what is asked
// during a write is written by the next one. AUTH.FLUSH (stopping) writes what is pending.
// `write` is provided by src/api/auth/state-writer.ts.

import { assertEvent, assign, emit, enqueueActions, fromPromise, setup } from "xstate";
import type { Answer, Asked } from "./concern.js";

export type AuthStateEvent = ({ type: "AUTH.SAVE" } & Asked) | { type: "AUTH.TOUCHED" } | ({ type: "AUTH.FLUSH" } & Asked);

export interface AuthStateInput {
  touchDelayMs: number;
}

export interface AuthStateContext {
  touchDelayMs: number;
  /** Answered when the write running now ends. */
  writing: string[];
  /** Asked during that write: answered by the next one. */
  next: string[];
  /** Last-used times changed since the write that runs now (or the last one) began. */
  touched: boolean;
  writes: number;
  last_error: string | null;
}

const answers = (ids: readonly string[], ok: boolean, error: unknown): Answer[] =>
  ids.map((requestId) => (ok ? { type: "answer", requestId, ok: true, output: null } : { type: "answer", requestId, ok: false, error }));

export const authStateMachine = setup({
  types: {
    context: {} as AuthStateContext,
    events: {} as AuthStateEvent,
    input: {} as AuthStateInput,
    emitted: {} as Answer,
  },
  actors: {
    write: fromPromise<void>(() => Promise.reject(new Error("write not provided"))),
  },
  delays: {
    touchDelay: ({ context }) => context.touchDelayMs,
  },
  guards: {
    moreAsked: ({ context }) => context.next.length > 0,
    touchedMeanwhile: ({ context }) => context.touched,
  },
  actions: {
    ask: assign({
      writing: ({ context, event }) => {
        assertEvent(event, ["AUTH.SAVE", "AUTH.FLUSH"]);
        return [...context.writing, event.requestId];
      },
    }),
    askNext: assign({
      next: ({ context, event }) => {
        assertEvent(event, ["AUTH.SAVE", "AUTH.FLUSH"]);
        return [...context.next, event.requestId];
      },
    }),
    answerAtOnce: emit(({ event }) => {
      assertEvent(event, "AUTH.FLUSH");
      return { type: "answer", requestId: event.requestId, ok: true, output: null } satisfies Answer;
    }),
    markTouched: assign({ touched: true }),
    begin: assign({ touched: false }),
    promoteNext: assign({ writing: ({ context }) => context.next, next: [] }),
    answerWritten: enqueueActions(({ context, enqueue }) => {
      for (const a of answers(context.writing, true, null)) enqueue.emit(a);
      enqueue.assign({ writing: [], writes: context.writes + 1, last_error: null });
    }),
    answerFailed: enqueueActions(({ context, event, enqueue }) => {
      const error = (event as { error?: unknown }).error;
      for (const a of answers(context.writing, false, error)) enqueue.emit(a);
      enqueue.assign({ writing: [], last_error: error instanceof Error ? error.message : String(error) });
    }),
  },
}).createMachine({
  id: "auth-state",
  context: ({ input }) => ({ touchDelayMs: input.touchDelayMs, writing: [], next: [], touched: false, writes: 0, last_error: null }),
  initial: "idle",
  states: {
    idle: {
      on: {
        "AUTH.SAVE": { target: "writing", actions: "ask" },
        "AUTH.TOUCHED": { target: "touched" },
        "AUTH.FLUSH": { actions: "answerAtOnce" },
      },
    },
    touched: {
      after: { touchDelay: { target: "writing" } },
      on: {
        "AUTH.SAVE": { target: "writing", actions: "ask" },
        "AUTH.FLUSH": { target: "writing", actions: "ask" },
      },
    },
    writing: {
      entry: "begin",
      invoke: {
        src: "write",
        onDone: [
          { guard: "moreAsked", target: "writing", reenter: true, actions: ["answerWritten", "promoteNext"] },
          { guard: "touchedMeanwhile", target: "touched", actions: "answerWritten" },
          { target: "idle", actions: "answerWritten" },
        ],
        onError: [
          { guard: "moreAsked", target: "writing", reenter: true, actions: ["answerFailed", "promoteNext"] },
          // Kept in memory: the next change or the touch delay tries again.
          { target: "touched", actions: "answerFailed" },
        ],
      },
      on: {
        "AUTH.SAVE": { actions: "askNext" },
        "AUTH.FLUSH": { actions: "askNext" },
        "AUTH.TOUCHED": { actions: "markTouched" },
      },
    },
  },
});
