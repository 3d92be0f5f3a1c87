// Configuration saves (PUT /api/config), one at a time: a SAVE is accepted only while idle, so the
// base_version check, validation and write of one save can never interleave with another's.
// The `save` actor (provided by actors/app.actor.ts) does the work; this file has no I/O.

import { assign, fromPromise, setup, stateIn } from "xstate";
import type { DiagnosticDetail } from "../src/config/report.js";

export interface SaveRequest {
  /** Chosen by the sender, unique per request; the result is kept under it. */
  requestId: string;
  /** Full YAML text, written as sent. */
  content: string;
  /** sha256 hex the client edited from; null skips the conflict check. */
  baseVersion: string | null;
  /** Full validation (includes, ${VAR}, plugin args, dependencies) before writing; else YAML syntax only. */
  validate: boolean;
}

export interface SaveSuccess {
  requestId: string;
  ok: true;
  path: string;
  version: string;
  updated_at_ms: number;
  plugin_count: number;
  init_order: string[];
  /** Problems a reload would hit (only when saved with validate:false). */
  diagnostics: string[];
  diagnostic_details: DiagnosticDetail[];
}

export interface SaveFailure {
  requestId: string;
  ok: false;
  /** HTTP status and error code the API answers with. */
  status: number;
  code: string;
  message: string;
  extra: Record<string, unknown>;
}

export type SaveResult = SaveSuccess | SaveFailure;

export interface ConfigContext {
  /** Request id of the save running now. */
  saving: string | null;
  /** The most recent results, newest last (bounded: each waiter reads its own right away). */
  results: SaveResult[];
}

export type ConfigEvent = { type: "SAVE"; request: SaveRequest };

/** Results kept; a waiter reads its result in the same tick it is stored, so a few suffice. */
export const KEPT_RESULTS = 16;

const errorText = (e: unknown): string => (e instanceof Error ? e.message : String(e));

const keep = (results: SaveResult[], result: SaveResult): SaveResult[] => [...results, result].slice(-KEPT_RESULTS);

export const configMachine = setup({
  types: {
    context: {} as ConfigContext,
    events: {} as ConfigEvent,
  },
  actors: {
    save: fromPromise<SaveResult, SaveRequest>(({ input }) =>
      Promise.resolve({ requestId: input.requestId, ok: false, status: 500, code: "config_save_failed", message: "saving is not available", extra: {} }),
    ),
  },
  guards: {
    /** A save asked for while another runs is refused (HTTP 409), never queued. */
    saveIdle: stateIn("idle"),
  },
  actions: {
    recordResult: assign(({ context, event }) => ({
      saving: null,
      results: keep(context.results, (event as unknown as { output: SaveResult }).output),
    })),
    recordCrash: assign(({ context, event }) => ({
      saving: null,
      results: keep(context.results, {
        requestId: context.saving ?? "",
        ok: false,
        status: 500,
        code: "config_save_failed",
        message: `saving the configuration failed: ${errorText((event as { error?: unknown }).error)}`,
        extra: {},
      }),
    })),
  },
}).createMachine({
  id: "config",
  initial: "idle",
  context: { saving: null, results: [] },
  on: {
    SAVE: { guard: "saveIdle", target: ".saving", actions: assign({ saving: ({ event }) => event.request.requestId }) },
  },
  states: {
    idle: {},
    saving: {
      invoke: {
        id: "save",
        src: "save",
        // The request (with its possibly large content) travels as input only, never into context.
        input: ({ event }) => event.request,
        onDone: { target: "idle", actions: "recordResult" },
        onError: { target: "idle", actions: "recordCrash" },
      },
    },
  },
});
