// The audit trail's store (systemId `audit`; src/api/audit/audit.ts provides the work). The API's
// hook appends entries to a bounded queue in memory without the actor (a full queue drops and
// counts); the actor only hears that the queue stopped being empty (AUDIT.QUEUED).
//
// - opening: the store (a SQLite file, or a PostgreSQL schema) is opened; when that fails → failed,
//   which opens it again after a delay that doubles from 1 s up to 60 s. Entries wait in the queue
//   meanwhile (or are dropped once it is full).
// - ready, two regions. write: the first entry queued starts a 50 ms gathering, then everything
//   queued is written in one transaction (flushing); entries that arrived meanwhile start the next
//   gathering, so a store sees at most one transaction per 50 ms. A failed write puts its entries
//   back and takes the store to failed (closed, reopened later); so does a connection the store
//   reports lost (STORE.LOST). prune: retention and max_entries at once when the store opens, then
//   every prune interval (an hour); a failed prune is recorded and retried at the next interval.
// - off: `api.http.audit: false`. AUDIT.CONFIGURE (a reload changed the store, or turned it on or
//   off) reopens the store or goes off; retention and max_entries changes need no reopening.
//
// Refusals: a read (GET /api/audit, the stream) while the trail is off (auditOn) or its store is not
// open (auditStoreOpen): 503 audit_unavailable. A read that was admitted and then fails is not a
// refusal: the route answers it with audit_read_failed.

import { and, assign, emit, fromPromise, setup, stateIn } from "xstate";
import { doneAnswer, type Answer, type Asked } from "./concern.js";

export type AuditEvent =
  /** Admission of one API read (the read itself runs outside the actor). */
  | ({ type: "AUDIT.READ" } & Asked)
  /** The queue went from empty to holding an entry (the sink tells; in any state). */
  | { type: "AUDIT.QUEUED" }
  /** The store settings changed (a reload): `enabled` false is `api.http.audit: false`. */
  | { type: "AUDIT.CONFIGURE"; enabled: boolean }
  /** The open store lost its connection (PostgreSQL). */
  | { type: "STORE.LOST"; error: string };

export interface AuditInput {
  enabled: boolean;
  flushDelayMs: number;
  pruneIntervalMs: number;
}

/** What a flush did: entries written, and entries left in the queue after it (arrived meanwhile, or beyond one batch). */
export interface FlushResult {
  written: number;
  left: number;
}

export interface AuditContext {
  enabled: boolean;
  /** Entries wait in the queue: QUEUED came, a flush left some, or a failed one put its batch back. */
  pending: boolean;
  flushDelayMs: number;
  pruneIntervalMs: number;
  /** Opens since the start (or the last reconfiguration), successful or not. */
  opens: number;
  /** Failures (open, write, lost connection) since the store was last open: the retry delay doubles with each. */
  failing: number;
  last_error: string | null;
  flushes: number;
  /** Entries written by the last flush. */
  last_flush_entries: number | null;
  prunes: number;
  last_prune_deleted: number | null;
  last_prune_error: string | null;
}

export const AUDIT_FLUSH_DELAY_MS = 50;
export const AUDIT_PRUNE_INTERVAL_MS = 3_600_000;
const MAX_RETRY_DELAY_MS = 60_000;
const errorText = (e: unknown): string => (e instanceof Error ? e.message : String(e));

/** The delay before reopening after `failing` failures in a row: 1 s, 2 s, 4 s … 60 s. */
export const auditRetryDelayMs = (failing: number): number => Math.min(MAX_RETRY_DELAY_MS, 1000 * 2 ** Math.max(0, failing - 1));

export const auditMachine = setup({
  types: {
    context: {} as AuditContext,
    events: {} as AuditEvent,
    emitted: {} as Answer,
    input: {} as AuditInput,
  },
  actors: {
    /** Opens the store (the settings in force); rejects when it cannot. */
    open: fromPromise<void>(() => Promise.reject(new Error("not provided"))),
    /** Writes what is queued (one batch, one transaction). Rejects with the batch put back. */
    flush: fromPromise<FlushResult>(() => Promise.reject(new Error("not provided"))),
    /** Retention, then max_entries, in chunks; resolves with the number deleted. */
    prune: fromPromise<number>(() => Promise.reject(new Error("not provided"))),
  },
  guards: {
    /** The trail is on (api.http.audit is not false). */
    auditOn: ({ context }) => context.enabled,
    /** The store is open: reads can run. */
    auditStoreOpen: stateIn("ready"),
    configuredOn: ({ event }) => event.type === "AUDIT.CONFIGURE" && event.enabled,
    startsOn: ({ context }) => context.enabled,
    entriesQueued: ({ context }) => context.pending,
  },
  delays: {
    flushDelay: ({ context }) => context.flushDelayMs,
    pruneInterval: ({ context }) => context.pruneIntervalMs,
    retryDelay: ({ context }) => auditRetryDelayMs(context.failing),
  },
  actions: {
    /** Closes the store (leaving ready: a failure, a reconfiguration, off). */
    closeStore: () => undefined,
    answerAdmitted: emit(({ event }) => doneAnswer((event as Partial<Asked>).requestId ?? null, { output: null })),
    // Off empties the queue; a store changed keeps what waits for it.
    configure: assign(({ context, event }) => {
      const enabled = event.type === "AUDIT.CONFIGURE" && event.enabled;
      return { enabled, pending: enabled && context.pending, failing: 0, last_error: null, opens: 0 };
    }),
    markPending: assign({ pending: true }),
    countOpen: assign({ opens: ({ context }) => context.opens + 1 }),
    markOpen: assign({ failing: 0, last_error: null }),
    markFailed: assign(({ context, event }) => ({ failing: context.failing + 1, last_error: errorText((event as { error?: unknown }).error) })),
    // A failed write put its batch back.
    markFlushFailed: assign(({ context, event }) => ({ pending: true, failing: context.failing + 1, last_error: errorText((event as { error?: unknown }).error) })),
    recordFlush: assign(({ context, event }) => {
      const { written, left } = (event as unknown as { output: FlushResult }).output;
      return { flushes: context.flushes + 1, last_flush_entries: written, pending: left > 0 };
    }),
    recordPrune: assign(({ context, event }) => ({ prunes: context.prunes + 1, last_prune_deleted: (event as unknown as { output: number }).output, last_prune_error: null })),
    recordPruneError: assign(({ context, event }) => ({ prunes: context.prunes + 1, last_prune_error: errorText((event as { error?: unknown }).error) })),
  },
}).createMachine({
  id: "audit",
  initial: "boot",
  context: ({ input }) => ({
    enabled: input.enabled,
    pending: false,
    flushDelayMs: input.flushDelayMs,
    pruneIntervalMs: input.pruneIntervalMs,
    opens: 0,
    failing: 0,
    last_error: null,
    flushes: 0,
    last_flush_entries: null,
    prunes: 0,
    last_prune_deleted: null,
    last_prune_error: null,
  }),
  on: {
    "AUDIT.READ": { guard: and(["auditOn", "auditStoreOpen"]), actions: "answerAdmitted" },
    "AUDIT.QUEUED": { actions: "markPending" },
    "AUDIT.CONFIGURE": [
      { guard: "configuredOn", target: ".opening", reenter: true, actions: "configure" },
      { target: ".off", actions: "configure" },
    ],
  },
  states: {
    boot: { always: [{ guard: "startsOn", target: "opening" }, { target: "off" }] },
    off: {},
    opening: {
      entry: "countOpen",
      invoke: { id: "open", src: "open", onDone: { target: "ready", actions: "markOpen" }, onError: { target: "failed", actions: "markFailed" } },
    },
    ready: {
      type: "parallel",
      exit: "closeStore",
      on: { "STORE.LOST": { target: "failed", actions: "markFailed" } },
      states: {
        write: {
          initial: "settling",
          states: {
            // Entries that waited while the store was closed are written first.
            settling: { always: [{ guard: "entriesQueued", target: "gathering" }, { target: "idle" }] },
            idle: { on: { "AUDIT.QUEUED": { target: "gathering", actions: "markPending" } } },
            gathering: { after: { flushDelay: "flushing" } },
            flushed: { always: [{ guard: "entriesQueued", target: "gathering" }, { target: "idle" }] },
            flushing: {
              invoke: {
                id: "flush",
                src: "flush",
                // The result is recorded first: the guard reads what the flush left.
                onDone: { target: "flushed", actions: "recordFlush" },
                onError: { target: "#audit.failed", actions: "markFlushFailed" },
              },
            },
          },
        },
        prune: {
          initial: "pruning",
          states: {
            pruning: { invoke: { id: "prune", src: "prune", onDone: { target: "waiting", actions: "recordPrune" }, onError: { target: "waiting", actions: "recordPruneError" } } },
            waiting: { after: { pruneInterval: "pruning" } },
          },
        },
      },
    },
    failed: { after: { retryDelay: "opening" } },
  },
});
