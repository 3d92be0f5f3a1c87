// Configuration saves (PUT /api/config), one at a time: a SAVE is accepted only while idle, so the
// base_version check, validation and write of one save can never interleave with another's.
// The `save` actor (provided by actors/app.actor.ts) does the work; this file has no I/O.

import { assign, emit, fromPromise, setup, stateIn } from "xstate";
import type { DiagnosticDetail } from "../src/config/report.js";
import { doneAnswer, failedAnswer, type Answer, type Asked } from "./concern.js";

export interface SaveRequest {
  /** Full YAML text, written as sent. */
  content: string;
  /** sha256 hex the client edited from; null skips the conflict check. */
  baseVersion: string | null;
  /** Full validation (includes, ${VAR}, plugin args, dependencies) before writing; else YAML syntax only. */
  validate: boolean;
}

export interface SaveSuccess {
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
  ok: false;
  /** The API error code (config_conflict, config_validate_failed, config_too_complex, ...); its status is in the API's error table. */
  code: string;
  message: string;
  extra: Record<string, unknown>;
}

export type SaveResult = SaveSuccess | SaveFailure;

export interface ConfigContext {
  /** Request id of the save running now. */
  requestId: string | null;
  saves: number;
}

export type ConfigEvent = { type: "SAVE"; request: SaveRequest } & Asked;

export const configMachine = setup({
  types: {
    context: {} as ConfigContext,
    events: {} as ConfigEvent,
    emitted: {} as Answer,
  },
  actors: {
    save: fromPromise<SaveResult, SaveRequest>(() => Promise.reject(new Error("saving is not available"))),
  },
  guards: {
    /** A save asked for while another runs is refused (HTTP 409), never queued. */
    saveIdle: stateIn("idle"),
  },
  actions: {
    answerDone: emit(({ context, event }) => doneAnswer(context.requestId, event)),
    answerFailed: emit(({ context, event }) => failedAnswer(context.requestId, event)),
  },
}).createMachine({
  id: "config",
  initial: "idle",
  context: { requestId: null, saves: 0 },
  on: {
    SAVE: { guard: "saveIdle", target: ".saving", actions: assign({ requestId: ({ event }) => event.requestId, saves: ({ context }) => context.saves + 1 }) },
  },
  states: {
    idle: {},
    saving: {
      invoke: {
        src: "save",
        // The request (with its possibly large content) travels as input only, never into context.
        input: ({ event }) => (event).request,
        onDone: { target: "idle", actions: "answerDone" },
        onError: { target: "idle", actions: "answerFailed" },
      },
    },
  },
});
